import Foundation
import GatehouseArgon2
import GatehouseDomain
import GatehouseWire

/// What an export or import moved.
public struct TransferSummary: Sendable, Hashable, CustomStringConvertible {
    public var users: Int = 0
    public var identities: Int = 0
    public var emailAccounts: Int = 0
    public var sessions: Int = 0
    public var signingKeys: Int = 0
    /// Addresses the old system handed over (``GatehouseStore/migratedAddress(appId:email:)``).
    public var migratedAddresses: Int = 0

    public var description: String {
        "\(users) users, \(identities) identities, \(emailAccounts) email/password accounts, \(sessions) sessions, \(signingKeys) signing keys, "
            + "\(migratedAddresses) migrated addresses"
    }
}

/// Why an import was refused; nothing was written. `line` is 1-based.
public struct TransferError: Error, Sendable, CustomStringConvertible {
    public var line: Int?
    public var message: String

    init(line: Int? = nil, _ message: String) {
        (self.line, self.message) = (line, message)
    }

    public var description: String { line.map { "line \($0): \(message)" } ?? message }
}

/// `gatehouse export` and `gatehouse import` over one database, in ``TransferFormat``. Both run in one
/// transaction: an export reads one consistent snapshot; an import writes everything or nothing.
struct UserTransfer {
    let db: any SQLDatabase
    /// Users read per round of statements while exporting.
    var pageSize = 500

    /// Writes the users of `apps` (all apps when nil) as JSON lines through `write`, one call per line (without the
    /// newline). With `sessions`, also the sessions alive at `now` and the active signing keys.
    func export(apps: [String]?, sessions: Bool, now: Date, write: @escaping @Sendable (String) throws -> Void) async throws -> TransferSummary {
        let dialect = db.dialect
        let pageSize = pageSize
        return try await db.transaction { tx in
            if dialect == .postgres {
                // One snapshot for every statement of the export (SQLite's transaction is one already).
                try await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", [])
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            func emit(_ value: some Encodable) throws {
                try write(String(decoding: try encoder.encode(value), as: UTF8.self))
            }

            let exported: [String]
            if let apps {
                exported = apps
            } else {
                exported = try await tx.query("SELECT DISTINCT app_id FROM users ORDER BY app_id", []).map { try $0.text("app_id") }
            }
            var summary = TransferSummary()
            try emit(TransferFormat.Header(format: TransferFormat.name, version: TransferFormat.version, exportedAt: .init(now), apps: exported, sessions: sessions))
            if sessions {
                for row in try await tx.query("SELECT kid, algorithm, private_key, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at", []) {
                    try emit(TransferFormat.Line(TransferFormat.SigningKey(
                        kid: try row.text("kid"), algorithm: try row.text("algorithm"),
                        privateKey: .init(try row.blob("private_key")), createdAt: .init(try row.date("created_at"))
                    )))
                    summary.signingKeys += 1
                }
            }
            guard !exported.isEmpty else {
                try emit(TransferFormat.Line(TransferFormat.End(users: 0, signingKeys: summary.signingKeys, migratedAddresses: 0)))
                return summary
            }

            // Keyset pages in id order; each page's identities, accounts and sessions come by the range of its ids.
            let appBinds = exported.map(SQLValue.text)
            let appList = (0..<exported.count).map { "$\($0 + 2)" }.joined(separator: ", ")
            var after = ""
            while true {
                let users = try await tx.query(
                    "SELECT \(SQLStore.userColumns) FROM users WHERE id > $1 AND app_id IN (\(appList)) ORDER BY id \(SQLStore.limit(pageSize))",
                    [.text(after)] + appBinds
                ).map { try SQLStore.user($0) }
                guard let first = users.first, let last = users.last else { break }
                let range: [SQLValue] = [.text(first.id), .text(last.id)]
                let identities = Dictionary(grouping: try await tx.query(
                    "SELECT \(SQLStore.identityColumns) FROM identities WHERE user_id >= $1 AND user_id <= $2 ORDER BY created_at, id", range
                ).map { try SQLStore.identity($0) }, by: \.userId)
                var accounts: [String: [TransferFormat.EmailAccount]] = [:]
                for row in try await tx.query(
                    "SELECT \(SQLStore.accountColumns), created_at FROM email_accounts WHERE user_id >= $1 AND user_id <= $2 ORDER BY created_at, email",
                    range
                ) {
                    let account = try SQLStore.account(row)
                    accounts[account.userId, default: []].append(TransferFormat.EmailAccount(
                        email: account.email, passwordHash: account.passwordHash, confirmedAt: account.confirmedAt.map(TransferFormat.Timestamp.init),
                        mailboxProvenAt: account.mailboxProvenAt.map(TransferFormat.Timestamp.init), createdAt: .init(try row.date("created_at")),
                        address: account.address, contestedAt: account.contestedAt.map(TransferFormat.Timestamp.init),
                        fromOldSystem: account.fromOldSystem, passwordSetAt: account.passwordSetAt.map(TransferFormat.Timestamp.init),
                        passwordSession: account.passwordSetBy?.session, passwordMethods: account.passwordSetBy?.methods.map(\.rawValue)
                    ))
                }
                var live: [String: [SessionRecord]] = [:]
                if sessions {
                    live = Dictionary(grouping: try await tx.query(
                        """
                        SELECT \(SQLStore.sessionColumns) FROM sessions
                        WHERE user_id >= $1 AND user_id <= $2 AND revoked_at IS NULL AND expires_at > $3 ORDER BY created_at, id
                        """,
                        range + [SQLValue(now)]
                    ).map(SQLStore.session), by: \.userId)
                }
                var keys: [String: [TransferFormat.APIKey]] = [:]
                for row in try await tx.query(
                    """
                    SELECT k.id, k.user_id, k.name, k.key_hash, k.disabled, k.created_at, i.user_id AS owner FROM api_keys k
                    JOIN identities i ON i.app_id = k.app_id AND i.provider_type = 'api-key' AND i.external_id = k.id
                    WHERE i.user_id >= $1 AND i.user_id <= $2 ORDER BY k.created_at, k.id
                    """,
                    range
                ) {
                    keys[try row.text("owner"), default: []].append(TransferFormat.APIKey(
                        id: try row.text("id"), name: try row.text("name"), server: try row.optionalText("user_id") == nil,
                        keyHash: .init(try row.blob("key_hash")), disabled: try row.int("disabled") != 0, createdAt: .init(try row.date("created_at"))
                    ))
                }
                for user in users {
                    let userIdentities = identities[user.id] ?? []
                    let userSessions = sessions ? (live[user.id] ?? []) : nil
                    // Every kind of credential the user holds, each where the format keeps it.
                    var exported: [IdentityRecord] = []
                    var userAccounts: [TransferFormat.EmailAccount]?
                    var userKeys: [TransferFormat.APIKey]?
                    for kind in CredentialKind.allCases {
                        switch kind {
                        case .mailbox:
                            exported += userIdentities.filter { $0.providerType == EmailPasswordService.providerType }
                            userAccounts = accounts[user.id]
                        case .password:
                            break  // on its email account, with the mailbox
                        case .identity:
                            exported += userIdentities.filter { ![EmailPasswordService.providerType, APIKeyService.providerType].contains($0.providerType) }
                        case .apiKey:
                            exported += userIdentities.filter { $0.providerType == APIKeyService.providerType }
                            userKeys = keys[user.id]
                        }
                    }
                    exported.sort { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
                    try emit(TransferFormat.Line(TransferFormat.User(
                        id: user.id, appId: user.appId, createdAt: .init(user.createdAt), disabled: user.disabled, customData: user.customData,
                        identities: exported.map {
                            .init(
                                id: $0.id, providerType: $0.providerType, externalId: $0.externalId, data: $0.data, createdAt: .init($0.createdAt),
                                addedSession: $0.addedBy?.session, addedMethods: $0.addedBy?.methods.map(\.rawValue)
                            )
                        },
                        emailAccounts: userAccounts,
                        sessions: userSessions?.map {
                            .init(
                                id: $0.id, deviceId: $0.deviceId, device: $0.device, secretHash: .init($0.secretHash), createdAt: .init($0.createdAt),
                                expiresAt: .init($0.expiresAt), clientId: $0.clientId, previousSecretHash: $0.previousSecretHash.map(TransferFormat.Bytes.init),
                                rotationSalt: $0.rotationSalt.map(TransferFormat.Bytes.init), rotatedAt: $0.rotatedAt.map(TransferFormat.Timestamp.init),
                                apiKeyId: $0.apiKeyId, kind: $0.kind.rawValue, methods: $0.methods.map(\.rawValue),
                                provenAt: $0.provenAt.map(TransferFormat.Timestamp.init)
                            )
                        },
                        apiKeys: userKeys
                    )))
                    summary.users += 1
                    summary.identities += exported.count
                    summary.emailAccounts += userAccounts?.count ?? 0
                    summary.sessions += userSessions?.count ?? 0
                }
                after = last.id
            }
            // Every address the old system handed over, in keyset pages per app.
            for app in exported {
                var after = ""
                while true {
                    let rows = try await tx.query(
                        "SELECT email, migrated_at FROM migrated_addresses WHERE app_id = $1 AND email > $2 ORDER BY email \(SQLStore.limit(pageSize))",
                        .text(app), .text(after)
                    )
                    guard let last = rows.last else { break }
                    for row in rows {
                        try emit(TransferFormat.Line(TransferFormat.MigratedAddress(appId: app, email: try row.text("email"), migratedAt: .init(try row.date("migrated_at")))))
                        summary.migratedAddresses += 1
                    }
                    after = try last.text("email")
                }
            }
            try emit(TransferFormat.Line(TransferFormat.End(users: summary.users, signingKeys: summary.signingKeys, migratedAddresses: summary.migratedAddresses)))
            return summary
        }
    }

    /// Reads an export line by line from `next` (nil at the end) and inserts it, all in one transaction: a
    /// malformed or truncated file, a user of an app not in `apps`, or a user, email or identity the database
    /// already has aborts the import with a ``TransferError`` naming the line, and nothing is written. So does a
    /// password hash over ``HashCostBudget``, unless it is Gatehouse's Argon2id costing no more than its app's
    /// parameters in `ownParameters` (by app id).
    func importLines(
        apps: Set<String>, ownParameters: [String: Argon2Parameters] = [:], next: @escaping @Sendable () throws -> String?
    ) async throws -> TransferSummary {
        try await db.transaction { tx in
            let decoder = JSONDecoder()
            var number = 0
            func readLine() throws -> String? {
                while let line = try next() {
                    number += 1
                    if !line.allSatisfy(\.isWhitespace) { return line }
                }
                return nil
            }
            func decode<T: Decodable>(_ type: T.Type, _ line: String) throws -> T {
                do {
                    return try decoder.decode(T.self, from: Data(line.utf8))
                } catch let error as DecodingError {
                    throw TransferError(line: number, "not a valid \(TransferFormat.name) line: \(Self.describe(error))")
                }
            }

            guard let first = try readLine() else { throw TransferError("the input is empty; expected a \(TransferFormat.name) file") }
            let header = try decode(TransferFormat.Header.self, first)
            guard header.format == TransferFormat.name else { throw TransferError(line: number, "not a \(TransferFormat.name) file (format \"\(header.format)\")") }
            guard TransferFormat.readableVersions.contains(header.version) else {
                throw TransferError(
                    line: number,
                    "format version \(header.version) is not supported (this Gatehouse reads versions \(TransferFormat.readableVersions.lowerBound) to \(TransferFormat.readableVersions.upperBound))"
                )
            }

            var summary = TransferSummary()
            while let text = try readLine() {
                let line = try decode(TransferFormat.Line.self, text)
                do {
                    switch line.type {
                    case .signingKey:
                        guard let key = line.signingKey else { continue }
                        try await Self.insert(key, tx)
                        summary.signingKeys += 1
                    case .user:
                        guard let user = line.user else { continue }
                        let records = try Self.records(user, apps: apps, ownParameters: ownParameters[user.appId], version: header.version)
                        try await SQLStore.insertUser(records.user, tx)
                        for identity in records.identities { try await SQLStore.insertIdentity(identity, tx) }
                        for key in records.apiKeys { try await SQLStore.insertAPIKey(key, tx) }
                        try await SQLStore.insertAccounts(records.accounts, tx)
                        for session in records.sessions { try await SQLStore.insertSession(session, tx) }
                        summary.users += 1
                        summary.identities += records.identities.count
                        summary.emailAccounts += records.accounts.count
                        summary.sessions += records.sessions.count
                    case .migratedAddress:
                        guard let address = line.migratedAddress else { continue }
                        guard apps.contains(address.appId) else {
                            throw TransferError("a migrated address belongs to app \"\(address.appId)\", which this configuration does not have")
                        }
                        guard EmailAddress(address.email)?.normalized == address.email else {
                            throw TransferError("migrated address \"\(address.email)\" is not a normalized (trimmed, lowercase) email address")
                        }
                        // The accounts from the old system imported above recorded theirs already.
                        try await SQLStore.recordMigratedAddresses([(address.appId, address.email, address.migratedAt.date)], tx)
                        summary.migratedAddresses += 1
                    case .end:
                        guard let end = line.end, end.users == summary.users, end.signingKeys == summary.signingKeys,
                            (end.migratedAddresses ?? 0) == summary.migratedAddresses
                        else {
                            throw TransferError(
                                "the file ends by announcing \(line.end?.users ?? 0) users, \(line.end?.signingKeys ?? 0) signing keys and "
                                    + "\(line.end?.migratedAddresses ?? 0) migrated addresses, but holds \(summary.users), \(summary.signingKeys) "
                                    + "and \(summary.migratedAddresses)"
                            )
                        }
                        if try readLine() != nil { throw TransferError("there is more after the end line") }
                        return summary
                    }
                } catch let error as TransferError {
                    throw TransferError(line: error.line ?? number, error.message)
                } catch StoreError.conflict {
                    let what = line.user.map { "user \($0.id)" } ?? "signing key \(line.signingKey?.kid ?? "")"  // a migrated address never conflicts
                    throw TransferError(line: number, "\(what) is already in the target database (its id, email or an identity)")
                }
            }
            throw TransferError("the file ends without its end line: it is truncated (after \(summary.users) users)")
        }
    }

    /// The rows of one exported user, checked: a line that would make an account no one can sign in to is refused.
    private static func records(_ user: TransferFormat.User, apps: Set<String>, ownParameters: Argon2Parameters?, version: Int) throws -> (
        user: UserRecord, identities: [IdentityRecord], accounts: [(EmailAccountRecord, createdAt: Date)], sessions: [SessionRecord], apiKeys: [APIKeyRecord]
    ) {
        guard isObjectID(user.id) else { throw TransferError("user id \"\(user.id)\" is not 24 lowercase hex digits") }
        guard apps.contains(user.appId) else {
            throw TransferError("user \(user.id) belongs to app \"\(user.appId)\", which this configuration does not have (add it under apps, then import again)")
        }
        guard !user.identities.isEmpty else { throw TransferError("user \(user.id) has no identity: no one could sign in as them") }
        let identities = try user.identities.map { identity in
            guard isObjectID(identity.id), !identity.providerType.isEmpty, !identity.externalId.isEmpty else {
                throw TransferError("user \(user.id) has an identity without a valid id, providerType or externalId")
            }
            return IdentityRecord(
                id: identity.id, userId: user.id, appId: user.appId, providerType: identity.providerType, externalId: identity.externalId,
                data: identity.data, createdAt: identity.createdAt.date,
                addedBy: identity.addedSession.map { Provenance(session: $0, methods: (identity.addedMethods ?? []).compactMap(AuthenticationMethod.init)) }
            )
        }
        guard user.emailAccount == nil || user.emailAccounts == nil else {
            throw TransferError("user \(user.id) has both emailAccount and emailAccounts; give one")
        }
        var accounts: [(EmailAccountRecord, createdAt: Date)] = []
        let exportedAccounts = user.emailAccounts ?? user.emailAccount.map { [$0] } ?? []
        for exported in exportedAccounts {
            guard let email = EmailAddress(exported.email), email.normalized == exported.email else {
                throw TransferError("user \(user.id): \"\(exported.email)\" is not a normalized (trimmed, lowercase) email address")
            }
            guard identities.contains(where: { $0.providerType == "local-userpass" && $0.externalId == exported.email }) else {
                throw TransferError("user \(user.id): the email account \(exported.email) has no local-userpass identity with that email")
            }
            if !exported.passwordHash.isEmpty {
                // Argon2id as Gatehouse writes it, or a hash of another system that the login can verify (and
                // replaces with Argon2id at the first success), within the cost budget: a file's Argon2id is checked
                // as another system's would be, unless it costs no more than the app's own.
                guard ForeignPasswordHash.isReadable(exported.passwordHash) else {
                    throw TransferError("user \(user.id): the password hash is in no form a login can verify (see docs/migrating.md)")
                }
                if let refusal = ForeignPasswordHash.refusal(exported.passwordHash, ownParameters: ownParameters) {
                    throw TransferError("user \(user.id): \(refusal)")
                }
            }
            accounts.append((
                EmailAccountRecord(
                    appId: user.appId, email: exported.email, userId: user.id, passwordHash: exported.passwordHash,
                    confirmedAt: exported.confirmedAt?.date,
                    // Version 1 files do not say how an account was confirmed: a confirmed one is taken as proven.
                    mailboxProvenAt: version == 1 ? exported.confirmedAt?.date : exported.mailboxProvenAt?.date,
                    address: exported.address.flatMap { EmailAddress($0)?.normalized == exported.email ? $0 : nil },
                    // A file that does not say (written by hand for a migration, or by an older export) brings its
                    // accounts from the system it was made from.
                    contestedAt: exported.contestedAt?.date, fromOldSystem: exported.fromOldSystem ?? true,
                    passwordSetAt: exported.passwordSetAt?.date,
                    passwordSetBy: exported.passwordSession.map {
                        Provenance(session: $0, methods: (exported.passwordMethods ?? []).compactMap(AuthenticationMethod.init))
                    }
                ),
                createdAt: exported.createdAt.date
            ))
        }
        let sessions = try (user.sessions ?? []).map { session in
            guard isObjectID(session.id), session.secretHash.bytes.count == 32 else {
                throw TransferError("user \(user.id) has a session without a valid id or a 32-byte secret hash")
            }
            return SessionRecord(
                id: session.id, appId: user.appId, userId: user.id, deviceId: session.deviceId, device: session.device,
                secretHash: session.secretHash.bytes, createdAt: session.createdAt.date, expiresAt: session.expiresAt.date, revokedAt: nil,
                clientId: session.clientId, previousSecretHash: session.previousSecretHash?.bytes, rotationSalt: session.rotationSalt?.bytes,
                // A session of an API key is a key session whatever the file says: a line cannot raise its powers.
                rotatedAt: session.rotatedAt?.date, apiKeyId: session.apiKeyId,
                kind: session.apiKeyId != nil ? .apiKey : session.kind.flatMap(SessionKind.init(rawValue:)),
                methods: (session.methods ?? []).compactMap(AuthenticationMethod.init(rawValue:)), provenAt: session.provenAt?.date
            )
        }
        let apiKeys = try (user.apiKeys ?? []).map { key in
            guard isObjectID(key.id), key.keyHash.bytes.count == 32, (try? APIKeyService.validate(name: key.name)) != nil else {
                throw TransferError("user \(user.id) has an API key without a valid id, name or 32-byte key hash")
            }
            guard identities.contains(where: { $0.providerType == APIKeyService.providerType && $0.externalId == key.id }) else {
                throw TransferError("user \(user.id): API key \(key.id) has no api-key identity with that id")
            }
            return APIKeyRecord(
                id: key.id, appId: user.appId, userId: key.server ? nil : user.id, name: key.name, keyHash: key.keyHash.bytes,
                disabled: key.disabled, createdAt: key.createdAt.date
            )
        }
        let user = UserRecord(id: user.id, appId: user.appId, createdAt: user.createdAt.date, disabled: user.disabled, customData: user.customData)
        return (user, identities, accounts, sessions, apiKeys)
    }

    /// Inserts a signing key unless the database has it already (importing into a deployment that was exported
    /// from the same keys); a different key under the same kid is refused.
    private static func insert(_ key: TransferFormat.SigningKey, _ tx: any SQLExecutor) async throws {
        guard key.algorithm == "ES256", key.privateKey.bytes.count == 32,
            SigningKeys.isValidP256PrivateKey(key.privateKey.bytes)
        else { throw TransferError("signing key \(key.kid) is not an ES256 (P-256) private key") }
        let existing = try await tx.query("SELECT private_key FROM signing_keys WHERE kid = $1", .text(key.kid))
        if let row = existing.first {
            guard try row.blob("private_key") == key.privateKey.bytes else {
                throw TransferError("the target has a different signing key with kid \(key.kid)")
            }
            return
        }
        try await tx.query(
            "INSERT INTO signing_keys (kid, algorithm, private_key, created_at) VALUES ($1, $2, $3, $4)",
            .text(key.kid), .text(key.algorithm), .blob(key.privateKey.bytes), SQLValue(key.createdAt.date)
        )
    }

    static func isObjectID(_ id: String) -> Bool {
        id.utf8.count == 24 && id.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context.codingPath)): \(context.debugDescription)"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingCharacters(in: CharacterSet(charactersIn: "."))
    }
}
