import Crypto
import Foundation
import GatehouseDomain
import GatehouseWire

/// What an import from another system did.
public struct ForeignImportSummary: Sendable, Hashable, CustomStringConvertible {
    /// Records read from the file.
    public var read = 0
    /// Users written (with `dryRun`, users that would have been).
    public var imported = 0
    /// Of ``imported``, users without a password (they set one through a password reset).
    public var withoutPassword = 0
    /// Of ``imported``, users whose address was not verified in the source: they stay pending until they confirm it.
    public var pending = 0
    /// Records not imported; each is reported with its reason.
    public var skipped = 0

    public var description: String {
        "\(read) records: \(imported) users imported (\(withoutPassword) without a password, \(pending) pending confirmation), \(skipped) skipped"
    }
}

/// A record the import did not bring in, and why.
public struct SkippedRecord: Sendable, Hashable, CustomStringConvertible {
    /// 1-based position of the record among the file's users (a CSV file's header is not counted).
    public var record: Int
    public var sourceId: String?
    public var email: String?
    public var reason: String

    /// `record 17  id=abc  email=a@example.com  skipped: …`, tab-separated, one line: a field's control characters (a
    /// tab or newline inside a quoted CSV field) are shown escaped, so that no record can forge another's line.
    public var description: String {
        ["record \(record)", "id=\(Self.escaped(sourceId ?? "-"))", "email=\(Self.escaped(email ?? "-"))", "skipped: \(Self.escaped(reason))"]
            .joined(separator: "\t")
    }

    private static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return text }
        return text.unicodeScalars.map { $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0) }.joined()
    }
}

/// How far an import is.
public struct ImportProgress: Sendable, Hashable {
    public var summary: ForeignImportSummary
    /// Bytes of the file read so far.
    public var bytesRead: Int
}

/// Writes the users of another system's export into one app, in batches of one transaction each: a failure keeps the
/// batches before it, and running the import again skips what is there already (an address the app has), so it is
/// safe to repeat. With `dryRun` every batch is checked against the database and rolled back.
struct ForeignImport {
    let db: any SQLDatabase
    let appId: String
    let format: ForeignExportFormat
    var batchSize = 500
    var dryRun = false

    func run(
        _ reader: inout ForeignExportReader, now: Date, progress: (ImportProgress) -> Void, skipped: (SkippedRecord) -> Void
    ) async throws -> ForeignImportSummary {
        var summary = ForeignImportSummary()
        // The addresses and ids read so far, to tell a duplicate within the file (the database cannot: a source id is
        // not a column, and a dry run's batches are rolled back): 128-bit digests, some 50 bytes a record.
        var seenEmails: Set<Fingerprint> = []
        var seenIds: Set<Fingerprint> = []
        var ended = false
        func skip(_ record: Int, _ sourceId: String?, _ email: String?, _ reason: String) {
            summary.skipped += 1
            skipped(SkippedRecord(record: record, sourceId: sourceId, email: email, reason: reason))
        }
        while !ended {
            var batch: [Row] = []
            while batch.count < batchSize {
                guard let record = try reader.next() else {
                    ended = true
                    break
                }
                summary.read += 1
                switch record {
                case .skipped(let sourceId, let email, let reason):
                    skip(summary.read, sourceId, email, reason)
                case .user(let user):
                    let email = Fingerprint(user.email.normalized)
                    if seenEmails.contains(email) {
                        skip(summary.read, user.sourceId, user.email.display, "an earlier record has the same address")
                        continue
                    }
                    let id = user.sourceId.map(Fingerprint.init)
                    if let id, seenIds.contains(id) {
                        skip(summary.read, user.sourceId, user.email.display, "an earlier record has the same id")
                        continue
                    }
                    seenEmails.insert(email)
                    if let id { seenIds.insert(id) }
                    batch.append(Row(record: summary.read, user: user))
                }
            }
            if !batch.isEmpty {
                let refused = try await write(batch, now: now)
                for row in batch {
                    if let reason = refused[row.record] {
                        skip(row.record, row.user.sourceId, row.user.email.display, reason)
                    } else {
                        summary.imported += 1
                        summary.withoutPassword += row.user.passwordHash == nil ? 1 : 0
                        summary.pending += row.user.emailVerified ? 0 : 1
                    }
                }
            }
            progress(ImportProgress(summary: summary, bytesRead: reader.input.consumed))
        }
        if summary.imported > 0, !dryRun, db.dialect == .postgres {
            // The planner's statistics catch up with what was written now, not at autovacuum's next round: the next
            // import's (or sign-in's) lookups by address are planned for the tables as they are. Best effort: a role
            // that does not own the tables gets a warning, not an error.
            _ = try? await db.query("ANALYZE users, identities, email_accounts, migrated_addresses")
        }
        return summary
    }

    /// The first 128 bits of a text's SHA-256: equal texts, equal fingerprints; different ones collide with a
    /// probability (about 10⁻²⁷ for a million records) far below any other failure.
    struct Fingerprint: Hashable {
        var high: UInt64
        var low: UInt64

        init(_ text: String) {
            let digest = Array(SHA256.hash(data: Array(text.utf8)))
            (high, low) = (0, 0)
            for index in 0..<8 {
                high = high << 8 | UInt64(digest[index])
                low = low << 8 | UInt64(digest[index + 8])
            }
        }
    }

    struct Row: Sendable {
        var record: Int
        var user: ForeignUser
    }

    private struct RolledBack: Error {
        var refused: [Int: String]
    }

    /// Writes one batch in one transaction; returns the records it did not write, with the reason. A write a
    /// concurrent sign-up beat (the address taken between the check and the insert) retries the batch.
    private func write(_ batch: [Row], now: Date) async throws -> [Int: String] {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await db.transaction { [appId, format, dryRun] tx in
                    let refused = try await Self.insert(batch, appId: appId, format: format, now: now, tx)
                    if dryRun { throw RolledBack(refused: refused) }
                    return refused
                }
            } catch let rolledBack as RolledBack {
                return rolledBack.refused
            } catch StoreError.conflict where attempt < 3 {
                continue
            }
        }
    }

    private static func insert(_ batch: [Row], appId: String, format: ForeignExportFormat, now: Date, _ tx: any SQLExecutor) async throws -> [Int: String] {
        // Which addresses the app has, with the source id their identity came with (one statement for the batch).
        // The identity is a subquery, one unique-index lookup per address found, whatever the planner believes: as
        // a join, PostgreSQL's statistics of tables an import just filled (not analyzed yet) made it a nested loop
        // over every identity of the app, for every address (0.4 s a batch at 20,000 users, growing with the app).
        let emails = batch.map { SQLValue.text($0.user.email.normalized) }
        let placeholders = (0..<emails.count).map { "$\($0 + 3)" }.joined(separator: ", ")
        var present: [String: (sourceId: String?, pending: Bool)] = [:]
        for row in try await tx.query(
            """
            SELECT e.email, CASE WHEN e.confirmed_at IS NULL THEN 1 ELSE 0 END AS pending,
                (SELECT i.data FROM identities i WHERE i.app_id = e.app_id AND i.provider_type = $2 AND i.external_id = e.email) AS data
            FROM email_accounts e
            WHERE e.app_id = $1 AND e.email IN (\(placeholders))
            """,
            [.text(appId), .text(EmailPasswordService.providerType)] + emails
        ) {
            let data = try row.optionalText("data").map(JSONColumn.decode) ?? [:]
            present[try row.text("email")] = (data[Self.sourceIdKey]?.stringValue, try row.int("pending") != 0)
        }
        var refused: [Int: String] = [:]
        var users: [UserRecord] = []
        var identities: [IdentityRecord] = []
        var accounts: [(EmailAccountRecord, createdAt: Date)] = []
        for row in batch {
            let user = row.user
            if let existing = present[user.email.normalized] {
                if existing.sourceId != nil && existing.sourceId == user.sourceId {
                    refused[row.record] = "already imported (the app has this address, from this source id)"
                    continue
                }
                // Someone registered the address here and never confirmed it; the source verified it for this user.
                // The verified owner wins, as a confirmation would: the pending registration goes, with its user and
                // links, in this transaction. Anything else keeps what the app has.
                guard existing.pending, user.emailVerified else {
                    refused[row.record] = "the app has a user with this address already"
                    continue
                }
                _ = try await SQLStore.deletePendingAccount(appId: appId, email: user.email.normalized, userId: nil, tx)
            }
            let createdAt = user.createdAt ?? now
            let userId = Secrets.objectID(at: createdAt)
            var data: [String: JSONValue] = ["email": .string(user.email.display), Self.sourceKey: .string(format.rawValue)]
            if let sourceId = user.sourceId { data[Self.sourceIdKey] = .string(sourceId) }
            if let name = user.name { data["name"] = .string(name) }
            users.append(UserRecord(id: userId, appId: appId, createdAt: createdAt, disabled: user.disabled, customData: user.customData))
            identities.append(IdentityRecord(
                id: Secrets.objectID(at: createdAt), userId: userId, appId: appId, providerType: EmailPasswordService.providerType,
                externalId: user.email.normalized, data: data, createdAt: createdAt
            ))
            // The source system verified the address: Gatehouse takes that as proof that the user holds the mailbox.
            accounts.append((
                EmailAccountRecord(
                    appId: appId, email: user.email.normalized, userId: userId, passwordHash: user.passwordHash ?? "",
                    confirmedAt: user.emailVerified ? now : nil, mailboxProvenAt: user.emailVerified ? now : nil,
                    address: user.email.display, fromOldSystem: true
                ),
                createdAt
            ))
        }
        // One statement per table for the batch: a round trip and a parse each, not three per user.
        try await SQLStore.insertUsers(users, tx)
        try await SQLStore.insertIdentities(identities, tx)
        try await SQLStore.insertAccounts(accounts, tx)
        let written = users.count
        if written > 0 {
            try await tx.query(
                "INSERT INTO audit_events (at, app_id, kind, user_id, ip, user_agent, detail) VALUES ($1, $2, $3, NULL, NULL, NULL, $4)",
                SQLValue(now), .text(appId), .text(AuditKind.usersImported.rawValue),
                .text(try JSONColumn.encode(["source": .string(format.rawValue), "users": .string(String(written))]))
            )
        }
        return refused
    }

    /// The keys of an imported user's email/password identity data that name where they came from (the profile's
    /// `data` shows them): `imported_from` (`firebase`, …) and `source_user_id` (the user's id there).
    static let sourceKey = "imported_from"
    static let sourceIdKey = "source_user_id"
}
