import Foundation
import GatehouseDomain
import GatehouseWire

/// ``GatehouseStore`` over any ``SQLDatabase``. The statements are plain SQL that SQLite and PostgreSQL both run.
struct SQLStore: GatehouseStore {
    let db: any SQLDatabase

    /// `LIMIT n` written into a statement's text rather than bound, for the limits the code fixes (a page size, a
    /// batch): SQLite reads a bound LIMIT's value to plan the statement and marks the statement to be planned again
    /// whenever that value is bound anew, so a kept statement with `LIMIT $n` was parsed and planned afresh at every
    /// use — the outbox's claim about once a second on an idle server, the dev mailbox at every read. A limit a
    /// caller chooses (an admin listing's) stays a bound value, so that each choice does not keep a statement of its
    /// own in the connection's table.
    static func limit(_ rows: Int) -> String { "LIMIT \(max(0, rows))" }

    func ping() async throws { try await db.ping() }

    /// Writes and deletes, in one committed transaction, a row large enough to need new pages: it fails when the
    /// database cannot take writes (a full disk, `max_page_count` reached, a read-only server) and not only when it
    /// cannot be reached. Random bytes, so that compression cannot shrink them. Its success alone does not make a
    /// database whose last real write failed for lack of space ready (``WriteHealth``): that write may have fitted in
    /// reused pages. Such a database is ready again once a real write succeeds, or, for an SQLite file, once the probe
    /// succeeds with space free on the file's filesystem.
    func probeWrite() async throws {
        let id = UUID().uuidString
        let pad = Secrets.randomBytes(8192)
        try await WriteHealth.$probing.withValue(true) {
            try await db.transaction { tx in
                try await tx.query("INSERT INTO readiness_probe (id, pad) VALUES ($1, $2)", [.text(id), .blob(pad)])
                try await tx.query("DELETE FROM readiness_probe WHERE id = $1", [.text(id)])
            }
        }
        guard let health = db.writeHealth, let reason = health.fullReason else { return }
        if let free = db.freeSpace(), free >= WriteHealth.spaceToRecover {
            health.recovered()
            return
        }
        throw StoreError.unavailable("the last write failed for lack of space (\(reason)); not ready until a write succeeds")
    }

    // MARK: Signing keys

    private static let keysQuery = "SELECT kid, private_key, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at"

    private static func keys(_ rows: [SQLRow]) throws -> [SigningKeyRecord] {
        try rows.map { SigningKeyRecord(kid: try $0.text("kid"), privateKey: try $0.blob("private_key"), createdAt: try $0.date("created_at")) }
    }

    func signingKeys() async throws -> [SigningKeyRecord] {
        try Self.keys(try await db.query(Self.keysQuery, []))
    }

    func signingKeys(insertingIfNone first: SigningKeyRecord) async throws -> [SigningKeyRecord] {
        let dialect = db.dialect
        return try await db.transaction { tx in
            // PostgreSQL: instances starting together take turns (the migrations' lock); SQLite has one writer.
            if dialect == .postgres { try await tx.query("SELECT pg_advisory_xact_lock($1)", .int(Migrations.advisoryLockKey)) }
            try await tx.query(
                """
                INSERT INTO signing_keys (kid, algorithm, private_key, created_at)
                SELECT $1, 'ES256', $2, $3 WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE retired_at IS NULL)
                """,
                .text(first.kid), .blob(first.privateKey), SQLValue(first.createdAt)
            )
            return try Self.keys(try await tx.query(Self.keysQuery, []))
        }
    }

    func allSigningKeys() async throws -> [(key: SigningKeyRecord, retiredAt: Date?)] {
        try await db.query("SELECT kid, private_key, created_at, retired_at FROM signing_keys ORDER BY created_at", []).map { row in
            (SigningKeyRecord(kid: try row.text("kid"), privateKey: try row.blob("private_key"), createdAt: try row.date("created_at")), try row.optionalDate("retired_at"))
        }
    }

    func insertSigningKey(_ key: SigningKeyRecord) async throws {
        try await db.query(
            "INSERT INTO signing_keys (kid, algorithm, private_key, created_at) VALUES ($1, 'ES256', $2, $3)",
            .text(key.kid), .blob(key.privateKey), SQLValue(key.createdAt)
        )
    }

    func retireSigningKey(kid: String, at: Date) async throws -> Bool {
        let dialect = db.dialect
        return try await db.transaction { tx in
            // Key changes take turns (PostgreSQL; SQLite has one writer), so two retirements cannot leave none.
            if dialect == .postgres { try await tx.query("SELECT pg_advisory_xact_lock($1)", .int(Migrations.advisoryLockKey)) }
            return !(try await tx.query(
                """
                UPDATE signing_keys SET retired_at = $2 WHERE kid = $1 AND retired_at IS NULL
                AND (SELECT COUNT(*) FROM signing_keys WHERE retired_at IS NULL) > 1
                RETURNING kid
                """,
                .text(kid), SQLValue(at)
            ).isEmpty)
        }
    }

    // MARK: Users

    func createEmailUser(
        user: UserRecord,
        identity: IdentityRecord,
        account: EmailAccountRecord,
        token: OneTimeTokenRecord?,
        mail: OutboxMessage?,
        recording event: AuditEvent?
    ) async throws {
        // Every registration's writes: one statement on PostgreSQL.
        try await db.writeTogether { tx in
            try await Self.insertUser(user, tx)
            try await Self.insertIdentity(identity, tx)
            try await Self.insertAccount(account, createdAt: user.createdAt, tx)
            if let token { try await Self.insertToken(token, tx) }
            if let mail { try await Self.insertMail(mail, tx) }
            if let event { try await Self.insertAuditEvents([event], tx) }
        }
    }

    func replacePendingRegistration(_ account: EmailAccountRecord, token: OneTimeTokenRecord?, mail: OutboxMessage?, now: Date) async throws -> Bool {
        try await db.transaction { tx in
            guard !(try await tx.query(
                """
                UPDATE email_accounts SET password_hash = $2, confirmed_at = $3, mailbox_proven_at = $4, contested_at = COALESCE(contested_at, $7)
                WHERE user_id = $1 AND app_id = $5 AND email = $6 AND confirmed_at IS NULL RETURNING user_id
                """,
                .text(account.userId), .text(account.passwordHash), SQLValue(account.confirmedAt), SQLValue(account.mailboxProvenAt),
                .text(account.appId), .text(account.email), SQLValue(now)
            ).isEmpty) else { return false }
            // Only the confirmation links this registration's own client asked for give way to its new one, as a resend
            // supersedes only its client's: a registration from another client (someone squatting the address, again
            // and again) never voids the links the owner holds, and no registration voids a reset link. The older
            // links stay safe to follow: the account is contested now, and a contested confirmation confirms no password.
            if let token {
                try await tx.query(
                    """
                    UPDATE one_time_tokens SET superseded_at = $1
                    WHERE user_id = $2 AND kind = $3 AND requester = $4 AND used_at IS NULL AND superseded_at IS NULL
                    """,
                    SQLValue(now), .text(account.userId), .text(OneTimeTokenKind.confirmation.rawValue), .text(token.requester)
                )
                try await Self.insertToken(token, tx)
            }
            if let mail { try await Self.insertMail(mail, tx) }
            return true
        }
    }

    func discardPendingRegistration(_ account: EmailAccountRecord) async throws -> Bool {
        try await db.transaction { tx in
            !(try await Self.deletePendingAccount(appId: account.appId, email: account.email, userId: account.userId, tx).isEmpty)
        }
    }

    /// Deletes the address's email account if it is pending (and of `userId`, when given), with its identity, the
    /// user's tokens, and the user unless it has other identities. The users whose pending account went.
    static func deletePendingAccount(appId: String, email: String, userId: String?, _ tx: any SQLExecutor) async throws -> [String] {
        let delete = "DELETE FROM email_accounts WHERE app_id = $1 AND email = $2 AND confirmed_at IS NULL"
        let pending = try await (
            userId == nil
                ? tx.query(delete + " RETURNING user_id", .text(appId), .text(email))
                : tx.query(delete + " AND user_id = $3 RETURNING user_id", .text(appId), .text(email), .text(userId!))
        ).map { try $0.text("user_id") }
        for owner in pending {
            // Its user goes too, unless it has other identities (it cannot today: linking needs a confirmed login).
            try await tx.query("DELETE FROM identities WHERE user_id = $1 AND provider_type = 'local-userpass' AND external_id = $2", .text(owner), .text(email))
            try await tx.query("DELETE FROM one_time_tokens WHERE user_id = $1", .text(owner))
            if try await tx.query("SELECT id FROM identities WHERE user_id = $1 LIMIT 1", .text(owner)).isEmpty {
                try await deleteUser(id: owner, tx)
            }
        }
        return pending
    }

    func createUser(_ user: UserRecord, identity: IdentityRecord) async throws {
        try await db.transaction { tx in
            try await Self.insertUser(user, tx)
            try await Self.insertIdentity(identity, tx)
        }
    }

    func identity(appId: String, providerType: String, externalId: String) async throws -> IdentityRecord? {
        try await db.query(
            "SELECT \(Self.identityColumns) FROM identities WHERE app_id = $1 AND provider_type = $2 AND external_id = $3",
            .text(appId), .text(providerType), .text(externalId)
        ).first.map { try Self.identity($0) }
    }

    func updateIdentityData(id: String, data: [String: JSONValue]) async throws {
        try await db.query("UPDATE identities SET data = $1 WHERE id = $2", .text(try JSONColumn.encode(data)), .text(id))
    }

    func addIdentity(_ identity: IdentityRecord, owner: OwnerHold?) async throws {
        try await db.transaction { tx in
            try await Self.holdOwner(identity.userId, owner, tx)
            try await Self.insertIdentity(identity, tx)
        }
    }

    func adoptIdentity(id: String, from: String, to: String, owner: OwnerHold, at now: Date, addedBy: Provenance) async throws -> Bool {
        try await db.transaction { tx in
            try await Self.holdOwner(to, owner, tx)
            // One conditional UPDATE decides: of racing links, one moves the identity and the others find it gone.
            let moved = try await tx.query(
                """
                UPDATE identities SET user_id = $3, created_at = $4, added_session = $5, added_methods = $6 WHERE id = $2 AND user_id = $1
                AND NOT EXISTS (SELECT 1 FROM sessions WHERE user_id = $1)
                AND NOT EXISTS (SELECT 1 FROM identities WHERE user_id = $1 AND id <> $2)
                RETURNING id
                """,
                .text(from), .text(id), .text(to), SQLValue(now), .text(addedBy.session), .text(AuthenticationMethod.text(addedBy.methods))
            )
            guard !moved.isEmpty else { return false }
            // The account moves before its old user goes: deleting the user would cascade to it.
            try await tx.query("UPDATE email_accounts SET user_id = $1 WHERE user_id = $2", .text(to), .text(from))
            for table in ["one_time_tokens", "native_flows"] {
                try await tx.query("DELETE FROM \(table) WHERE user_id = $1", .text(from))
            }
            try await tx.query("DELETE FROM users WHERE id = $1", .text(from))
            return true
        }
    }

    func emailAccount(appId: String, email: String) async throws -> EmailAccountRecord? {
        try await db.query(
            "SELECT \(Self.accountColumns) FROM email_accounts WHERE app_id = $1 AND email = $2",
            .text(appId), .text(email)
        ).first.map(Self.account)
    }

    static let emailAccountWithUserQuery = """
        SELECT \(columns(accountColumns, of: "email_accounts")), \(joinedUserColumns)
        FROM email_accounts LEFT JOIN users ON users.id = email_accounts.user_id
        WHERE email_accounts.app_id = $1 AND email_accounts.email = $2
        """

    func emailAccountWithUser(appId: String, email: String) async throws -> (account: EmailAccountRecord, user: UserRecord?)? {
        guard let row = try await db.query(Self.emailAccountWithUserQuery, .text(appId), .text(email)).first else { return nil }
        return try Self.accountWithUser(row)
    }

    /// The account and its user of a row of ``emailAccountWithUserQuery``'s columns; nil when a LEFT JOIN found no
    /// account.
    static func accountWithUser(_ row: SQLRow) throws -> (account: EmailAccountRecord, user: UserRecord?)? {
        try row.optionalText("email") == nil ? nil : (try account(row), try joinedUser(row))
    }

    func user(id: String) async throws -> UserRecord? {
        try await db.query("SELECT \(Self.userColumns) FROM users WHERE id = $1", .text(id)).first.map { try Self.user($0) }
    }

    func identities(userId: String) async throws -> [IdentityRecord] {
        try await db.query("SELECT \(Self.identityColumns) FROM identities WHERE user_id = $1 ORDER BY created_at, id", .text(userId))
            .map { try Self.identity($0) }
    }

    func deleteUser(id: String, notices: [OutboxMessage], owner: OwnerHold?) async throws {
        try await db.transaction { tx in
            if let owner { try await Self.holdOwner(id, owner, tx) }
            try await Self.deleteUser(id: id, tx)
            for mail in notices { try await Self.insertMail(mail, tx) }
        }
    }

    private static func deleteUser(id: String, _ tx: any SQLExecutor) async throws {
        for kind in CredentialKind.allCases { try await discard(kind, userId: id, keeping: nil, tx) }
        // What is left: sessions, tokens and flows, any identity of a kind this version does not know, and the keys
        // a server user's row names.
        for table in ["sessions", "one_time_tokens", "native_flows", "identities", "api_keys"] {
            try await tx.query("DELETE FROM \(table) WHERE user_id = $1", .text(id))
        }
        try await tx.query("DELETE FROM users WHERE id = $1", .text(id))
    }

    /// Deletes the keys behind the user's api-key identities: the user's own, and for a server user its server key.
    static func deleteAPIKeys(ofUser userId: String, _ tx: any SQLExecutor) async throws {
        try await tx.query(
            "DELETE FROM api_keys WHERE id IN (SELECT external_id FROM identities WHERE user_id = $1 AND provider_type = 'api-key')",
            .text(userId)
        )
    }

    func setCustomData(appId: String, userId: String, data: [String: JSONValue]) async throws -> Bool {
        !(try await db.query(
            "UPDATE users SET custom_data = $1 WHERE id = $2 AND app_id = $3 RETURNING id",
            .text(try JSONColumn.encode(data)), .text(userId), .text(appId)
        ).isEmpty)
    }

    func upgradePasswordHash(appId: String, email: String, from old: String, to new: String) async throws {
        try await db.query(
            "UPDATE email_accounts SET password_hash = $4 WHERE app_id = $1 AND email = $2 AND password_hash = $3",
            .text(appId), .text(email), .text(old), .text(new)
        )
    }

    // MARK: One-time tokens

    private struct RollBack: Error {}

    func issueOneTimeToken(_ token: OneTimeTokenRecord, mail: OutboxMessage?, dryRun: Bool) async throws {
        do {
            try await db.transaction { tx in
                // Only the asking client's older tokens: someone else asking cannot void the link the owner holds.
                try await tx.query(
                    """
                    UPDATE one_time_tokens SET superseded_at = $1
                    WHERE user_id = $2 AND kind = $3 AND requester = $4 AND used_at IS NULL AND superseded_at IS NULL
                    """,
                    SQLValue(token.createdAt), .text(token.userId), .text(token.kind.rawValue), .text(token.requester)
                )
                try await Self.insertToken(token, tx)
                if let mail { try await Self.insertMail(mail, tx) }
                if dryRun { throw RollBack() }
            }
        } catch is RollBack {}
    }

    func retireOneTimeToken(id: String, now: Date) async throws {
        try await db.query(
            "UPDATE one_time_tokens SET superseded_at = $1 WHERE id = $2 AND used_at IS NULL AND superseded_at IS NULL", SQLValue(now), .text(id)
        )
    }

    func oneTimeToken(id: String) async throws -> OneTimeTokenRecord? {
        try await db.query("SELECT \(Self.tokenColumns) FROM one_time_tokens WHERE id = $1", .text(id)).first.flatMap { try Self.token($0) }
    }

    static let tokenColumns = "id, app_id, kind, user_id, secret_hash, created_at, expires_at, used_at, superseded_at, email, requester, attempts, address, subject"

    /// A token from a row of ``tokenColumns``; nil for a kind this version does not know (a newer instance's).
    static func token(_ row: SQLRow) throws -> OneTimeTokenRecord? {
        guard let kind = OneTimeTokenKind(rawValue: try row.text("kind")) else { return nil }
        return OneTimeTokenRecord(
            id: try row.text("id"),
            appId: try row.text("app_id"),
            kind: kind,
            userId: try row.text("user_id"),
            secretHash: try row.blob("secret_hash"),
            createdAt: try row.date("created_at"),
            expiresAt: try row.date("expires_at"),
            usedAt: try row.optionalDate("used_at"),
            supersededAt: try row.optionalDate("superseded_at"),
            email: try row.optionalText("email"),
            requester: try row.text("requester"),
            attempts: Int(try row.int("attempts")),
            address: try row.optionalText("address"),
            subject: try row.optionalText("subject")
        )
    }

    /// The single conditional update that makes a token single-use: the user and address it was made for.
    /// Other clients' tokens of the same kind may still be live (each client supersedes only its own): once one is
    /// used, they are superseded in the same transaction, so a link works once whoever asked for it.
    private static func consume(_ id: String, kind: OneTimeTokenKind, now: Date, _ tx: any SQLExecutor) async throws -> (userId: String, email: String?)? {
        guard let used = try await tx.query(
            """
            UPDATE one_time_tokens SET used_at = $1
            WHERE id = $2 AND kind = $3 AND used_at IS NULL AND superseded_at IS NULL AND expires_at > $1
            RETURNING user_id, email
            """,
            SQLValue(now), .text(id), .text(kind.rawValue)
        ).first.map({ (userId: try $0.text("user_id"), email: try $0.optionalText("email")) }) else { return nil }
        try await tx.query(
            "UPDATE one_time_tokens SET superseded_at = $1 WHERE user_id = $2 AND kind = $3 AND used_at IS NULL AND superseded_at IS NULL",
            SQLValue(now), .text(used.userId), .text(kind.rawValue)
        )
        return used
    }

    func redeemConfirmationToken(id: String, now: Date, provingMailbox: Bool) async throws -> MailboxProof.Confirmation? {
        try await db.transaction { tx in
            guard let token = try await Self.consume(id, kind: .confirmation, now: now, tx) else { return nil }
            let hash = if provingMailbox {
                try await Self.proveMailbox(userId: token.userId, email: token.email, .registrationConfirmed, now: now, tx)
            } else {
                try await Self.confirmVouched(userId: token.userId, email: token.email, now: now, tx)
            }
            return hash == "" ? .noPassword : .passwordConfirmed
        }
    }

    /// A confirmation function's `success`: the app vouches for the registrant, which proves nothing about the
    /// mailbox. The account is confirmed and stays unproven (the owner's first proof still resets trust); a contested
    /// registration's password is not confirmed, since nobody can tell whose it is.
    /// - Returns: the password hash the account has afterwards (empty: none); nil when no account was confirmed.
    private static func confirmVouched(userId: String, email: String?, now: Date, _ tx: any SQLExecutor) async throws -> String? {
        let update = """
            UPDATE email_accounts SET confirmed_at = COALESCE(confirmed_at, $2),
                password_set_at = CASE WHEN contested_at IS NOT NULL AND password_hash <> '' THEN $2 ELSE password_set_at END,
                password_hash = CASE WHEN contested_at IS NOT NULL THEN '' ELSE password_hash END, contested_at = NULL
            WHERE user_id = $1
            """
        let rows = if let email {
            try await tx.query(update + " AND email = $3 RETURNING password_hash", .text(userId), SQLValue(now), .text(email))
        } else {
            // A token made before tokens recorded their address: the user's accounts, as such tokens always did.
            try await tx.query(update + " RETURNING password_hash", .text(userId), SQLValue(now))
        }
        return try rows.first?.text("password_hash")
    }

    func redeemPasswordResetToken(id: String, newPasswordHash: String, now: Date) async throws -> Bool {
        try await db.transaction { tx in
            guard let token = try await Self.consume(id, kind: .passwordReset, now: now, tx) else { return false }
            try await Self.resetPassword(userId: token.userId, email: token.email, newPasswordHash: newPasswordHash, now: now, tx)
            return true
        }
    }

    /// A reset: the proof that sets the new password, then every session of the user ends (API-key sessions too), and
    /// with them every other reset of the user under way, whichever protocol it came by: its unused reset links are
    /// superseded, and its native reset flows that have not set a password are deleted (one that has — the flow of
    /// this reset among them — holds to the user's epoch from then on, ``flowBasis``, so an older one's sign-in after
    /// its reset ends here too). Whoever held an earlier reset code or link can neither set a password over the
    /// owner's new one nor sign in with what it already set.
    ///
    /// The new password is the user's, as a password change sets it (``changePassword(userId:newPasswordHash:session:methods:mail:now:)``):
    /// every other confirmed address of the user (one linked to it) takes it too, so that the old password of a
    /// linked address, which may be the one that leaked, is no way in after the owner's reset of another.
    private static func resetPassword(userId: String, email: String?, newPasswordHash: String, now: Date, _ tx: any SQLExecutor) async throws {
        try await proveMailbox(userId: userId, email: email, .ownerProven(newPasswordHash: newPasswordHash), now: now, tx)
        try await tx.query(
            """
            UPDATE email_accounts SET password_hash = $2, password_set_at = $3, password_session = NULL, password_methods = NULL
            WHERE user_id = $1 AND confirmed_at IS NOT NULL AND password_hash <> $2
            """,
            .text(userId), .text(newPasswordHash), SQLValue(now)
        )
        _ = try await revokeAllSessions(userId: userId, now: now, tx)
        try await tx.query(
            "UPDATE one_time_tokens SET superseded_at = $1 WHERE user_id = $2 AND kind = $3 AND used_at IS NULL AND superseded_at IS NULL",
            SQLValue(now), .text(userId), .text(OneTimeTokenKind.passwordReset.rawValue)
        )
        try await tx.query(
            "DELETE FROM native_flows WHERE user_id = $1 AND kind = $2 AND step IN \(resetBeforeItsPassword)",
            .text(userId), .text(NativeFlowRecord.Kind.resetPassword.rawValue)
        )
    }

    /// Applies ``MailboxProof`` to the user's email account of `email` (of the user's only one when nil, for tokens
    /// made before they recorded their address): confirmed and proven from `now` on, with the password the proof
    /// decides. The first proof by the owner of a never-proven mailbox also discards everything someone else could
    /// have added to the user: its API keys, every other identity and email account (an address linked to it), every
    /// unused one-time token, and every session. The account's row is locked first (PostgreSQL), so that proofs
    /// racing for one account apply one after the other.
    /// - Returns: the password hash the account has afterwards (empty: none); nil when no single account was proven.
    @discardableResult
    static func proveMailbox(userId: String, email: String?, _ proof: MailboxProof, now: Date, _ tx: any SQLExecutor) async throws -> String? {
        let lock = "UPDATE email_accounts SET user_id = user_id WHERE user_id = $1"
        let returning = " RETURNING app_id, email, password_hash, mailbox_proven_at, contested_at"
        let rows = if let email {
            try await tx.query(lock + " AND email = $2" + returning, .text(userId), .text(email))
        } else {
            try await tx.query(lock + returning, .text(userId))
        }
        guard rows.count == 1, let row = rows.first else {
            // A token made before tokens recorded their address, for a user with several email accounts: as such
            // tokens always did, it confirms them and (a reset) sets the password of each; no trust reset.
            guard !rows.isEmpty else { return nil }
            if case .ownerProven(let new?) = proof {
                try await tx.query(
                    "UPDATE email_accounts SET password_hash = $2, password_set_at = $3, password_session = NULL, password_methods = NULL WHERE user_id = $1",
                    .text(userId), .text(new), SQLValue(now)
                )
            }
            try await tx.query(
                "UPDATE email_accounts SET confirmed_at = COALESCE(confirmed_at, $2), mailbox_proven_at = COALESCE(mailbox_proven_at, $2) WHERE user_id = $1",
                .text(userId), SQLValue(now)
            )
            return nil
        }
        let (appId, address) = (try row.text("app_id"), try row.text("email"))
        let wasProven = try row.optionalDate("mailbox_proven_at") != nil
        let contested = try row.optionalDate("contested_at") != nil
        let current = try row.text("password_hash")
        let hash = proof.passwordHash(current: current, wasProven: wasProven, contested: contested)
        if proof.resetsTrust(wasProven: wasProven, contested: contested) {
            try await resetTrust(userId: userId, keeping: address, now: now, tx)
        }
        try await tx.query(
            """
            UPDATE email_accounts SET password_hash = $3, confirmed_at = COALESCE(confirmed_at, $4), mailbox_proven_at = COALESCE(mailbox_proven_at, $4),
                contested_at = NULL
            WHERE app_id = $1 AND email = $2
            """,
            .text(appId), .text(address), .text(hash), SQLValue(now)
        )
        let byOwner = if case .ownerProven = proof { true } else { false }
        if hash != current || (byOwner && hash.isEmpty) {
            // A reset set it, or the proof discarded a password no proof stood behind, or the owner proved the
            // mailbox of an account without a password: no session did any of it, and the old system's say over the
            // account ends (``EmailAccountRecord/oldSystemMayVouch``): once the owner has shown up here, its old
            // password, which may have leaked, is no way in.
            try await tx.query(
                "UPDATE email_accounts SET password_set_at = $3, password_session = NULL, password_methods = NULL WHERE app_id = $1 AND email = $2",
                .text(appId), .text(address), SQLValue(now)
            )
        }
        // A proof clears the account's login-failure counts, from every address (the login backoff's rows).
        try await tx.query("DELETE FROM login_failures WHERE account = $1", .text(LoginBackoff.account(app: appId, identifier: address)))
        return hash
    }

    /// The mailbox `address`'s owner proved it, and nothing else of the user is trusted: every session ends, and
    /// its API keys, every other identity and email account (an address linked to it) and every unused one-time
    /// token go — except, for an undo, the undo links of earlier changes (`sparingUndoLinksBefore`): the owner of an
    /// older address outranks whoever held a newer one, so an undo never voids the link that undoes an earlier change.
    static func resetTrust(
        userId: String, keeping address: String, now: Date, sparingUndoLinksBefore earlier: Date? = nil, _ tx: any SQLExecutor
    ) async throws {
        _ = try await revokeAllSessions(userId: userId, now: now, tx)
        for kind in CredentialKind.allCases { try await discard(kind, userId: userId, keeping: address, tx) }
        try await tx.query(
            """
            UPDATE one_time_tokens SET superseded_at = $1 WHERE user_id = $2 AND used_at IS NULL AND superseded_at IS NULL
            AND NOT (kind = $3 AND created_at < $4)
            """,
            SQLValue(now), .text(userId), .text(OneTimeTokenKind.emailChangeUndo.rawValue), SQLValue(earlier ?? Date(timeIntervalSince1970: 0))
        )
    }

    // MARK: Sessions

    /// Writes the session with its login's audit row and the end of its backoff counts, all or nothing, and only
    /// while what proved it holds (``IssuedSession``); otherwise ``StoreError/sessionEnded`` and nothing is written.
    ///
    /// The check is part of the write, so that no order of a login and a revocation leaves a session behind: every
    /// revocation first counts up the user's `session_epoch` (``bumpSessionEpoch(userId:_:)``, which locks the user's
    /// row) or changes the API key's row, then ends the sessions. On PostgreSQL the write is one statement that reads
    /// those rows `FOR SHARE`: a revocation that got there first has committed before the read sees the rows (the
    /// session is not written), and one that comes later waits for the write to commit, and then its statement that
    /// ends the sessions sees this one. On SQLite write transactions run one at a time.
    func createSession(_ session: IssuedSession, recording event: AuditEvent, clearingLoginFailures keys: [String]) async throws {
        let record = session.record
        var binds = try Self.sessionBinds(record)
        let basis = Self.sessionBasis(session, binds: &binds)
        let sessionWrite = binds.count
        let eventValues = try Self.auditValues(event, binds: &binds)
        func placeholders(_ values: [String]) -> String {
            values.map { value in
                binds.append(.text(value))
                return "$\(binds.count)"
            }.joined(separator: ", ")
        }
        switch db.dialect {
        case .postgres:
            // One statement: the rows the proof rests on, locked; the session from them; the other writes from it.
            var clauses = [
                "basis AS (\(basis) FOR SHARE)",
                "s AS (INSERT INTO sessions (\(Self.sessionColumns)) SELECT \(Self.sessionPlaceholders) FROM basis RETURNING id)",
                "a AS (INSERT INTO audit_events (\(Self.auditColumns)) SELECT \(eventValues) FROM s)",
            ]
            if !keys.isEmpty { clauses.append("f AS (DELETE FROM login_failures WHERE key IN (\(placeholders(keys))) AND EXISTS (SELECT 1 FROM s))") }
            let written = try await db.query("WITH \(clauses.joined(separator: ", ")) SELECT count(*) AS written FROM s", binds)
            guard try written.first?.int("written") == 1 else { throw StoreError.sessionEnded }
        case .sqlite:
            let withSession = "EXISTS (SELECT 1 FROM sessions WHERE id = \(placeholders([record.id])))"
            let auditWrite = binds.count
            // Each statement gets the values up to its last placeholder (SQLite refuses one too many).
            var writes: [SQLWrite] = [
                (sql: "INSERT INTO sessions (\(Self.sessionColumns)) SELECT \(Self.sessionPlaceholders) WHERE EXISTS (\(basis)) RETURNING id",
                 binds: Array(binds.prefix(sessionWrite))),
                (sql: "INSERT INTO audit_events (\(Self.auditColumns)) SELECT \(eventValues) WHERE \(withSession)", binds: Array(binds.prefix(auditWrite))),
            ]
            if !keys.isEmpty {
                writes.append((sql: "DELETE FROM login_failures WHERE key IN (\(placeholders(keys))) AND \(withSession)", binds: binds))
            }
            // No session written (its basis gone): the other writes, conditioned on it, wrote nothing either.
            guard try await db.transaction(running: writes).first?.isEmpty == false else { throw StoreError.sessionEnded }
        }
    }

    /// The `SELECT` that finds the rows `session`'s proof rests on (its user with the epoch it read, not disabled;
    /// an API key's session's key, enabled), with its binds appended.
    private static func sessionBasis(_ session: IssuedSession, binds: inout [SQLValue]) -> String {
        binds.append(.text(session.record.userId))
        let user = "$\(binds.count)"
        binds.append(.int(Int64(session.userEpoch)))
        var sql = "SELECT users.id FROM users"
        var conditions = ["users.id = \(user)", "users.session_epoch = $\(binds.count)", "users.disabled = 0"]
        if let key = session.record.apiKeyId {
            binds.append(.text(key))
            sql += " JOIN api_keys ON api_keys.id = $\(binds.count)"
            conditions.append("api_keys.disabled = 0")
        }
        return sql + " WHERE " + conditions.joined(separator: " AND ")
    }

    /// Checks, in a native flow's transaction and before its effects, that what proved the flow's session still holds
    /// (as ``createSession(_:recording:clearingLoginFailures:)`` checks it); else ``StoreError/sessionEnded``, which
    /// rolls the flow's step back. Checked first, because the flow's own effects may end the user's other sessions
    /// (the first proof of a mailbox) before its session is written. On PostgreSQL the rows stay locked to the end of
    /// the transaction (`FOR UPDATE`: those effects then update the user's row without waiting on another flow's share).
    static func requireSessionBasis(_ session: IssuedSession, dialect: SQLDialect, _ tx: any SQLExecutor) async throws {
        var binds: [SQLValue] = []
        let basis = sessionBasis(session, binds: &binds)
        guard try await !tx.query(basis + (dialect == .postgres ? " FOR UPDATE" : ""), binds).isEmpty else { throw StoreError.sessionEnded }
    }

    static func insertSession(_ session: SessionRecord, _ tx: any SQLExecutor) async throws {
        try await tx.query("INSERT INTO sessions (\(sessionColumns)) VALUES (\(sessionPlaceholders))", try sessionBinds(session))
    }

    private static let sessionPlaceholders = (1...18).map { "$\($0)" }.joined(separator: ", ")

    /// A session's values in ``sessionColumns``' order.
    private static func sessionBinds(_ session: SessionRecord) throws -> [SQLValue] {
        [
            .text(session.id), .text(session.appId), .text(session.userId), .text(session.deviceId),
            .text(try JSONColumn.encode(session.device)), .blob(session.secretHash), SQLValue(session.createdAt),
            SQLValue(session.expiresAt), SQLValue(session.revokedAt), SQLValue(session.clientId),
            SQLValue(session.previousSecretHash), SQLValue(session.rotationSalt), SQLValue(session.rotatedAt),
            SQLValue(session.apiKeyId), SQLValue(session.lastUsedAt), .text(session.kind.rawValue),
            .text(AuthenticationMethod.text(session.methods)), SQLValue(session.provenAt),
        ]
    }

    static let sessionColumns = """
        id, app_id, user_id, device_id, device, secret_hash, created_at, expires_at, revoked_at, \
        client_id, previous_secret_hash, rotation_salt, rotated_at, api_key_id, last_used_at, kind, methods, proven_at
        """

    /// A session and its user: what every authenticated request reads first, so the reads of concurrent requests may
    /// run as one statement (``SQLDatabase/rows(of:key:)``).
    static let sessionWithUserRead = KeyedRead(
        "session+user",
        select: """
            SELECT \(columns(sessionColumns, of: "sessions")),
                \(joinedUserColumns)
            FROM sessions LEFT JOIN users ON users.id = sessions.user_id
            """,
        key: "sessions.id", column: "id"
    )

    /// ``sessionWithUserRead`` with the user's identities joined, their columns named `identity_…`, ordered as
    /// ``identities(userId:)`` orders them.
    static let sessionWithUserAndIdentitiesRead = KeyedRead(
        "session+user+identities",
        select: """
            SELECT \(columns(sessionColumns, of: "sessions")),
                \(joinedUserColumns),
                \(columns(identityColumns, of: "identities", as: "identity_"))
            FROM sessions LEFT JOIN users ON users.id = sessions.user_id
                LEFT JOIN identities ON identities.user_id = users.id
            """,
        key: "sessions.id", column: "id", tail: "ORDER BY identities.created_at, identities.id"
    )

    static func session(_ row: SQLRow) throws -> SessionRecord {
        SessionRecord(
            id: try row.text("id"),
            appId: try row.text("app_id"),
            userId: try row.text("user_id"),
            deviceId: try row.text("device_id"),
            device: try JSONColumn.decode(row.text("device")),
            secretHash: try row.blob("secret_hash"),
            createdAt: try row.date("created_at"),
            expiresAt: try row.date("expires_at"),
            revokedAt: try row.optionalDate("revoked_at"),
            clientId: try row.optionalText("client_id"),
            previousSecretHash: try row.optionalBlob("previous_secret_hash"),
            rotationSalt: try row.optionalBlob("rotation_salt"),
            rotatedAt: try row.optionalDate("rotated_at"),
            apiKeyId: try row.optionalText("api_key_id"),
            lastUsedAt: try row.optionalDate("last_used_at"),
            kind: SessionKind(rawValue: try row.text("kind")),
            methods: AuthenticationMethod.list(try row.text("methods")),
            provenAt: try row.optionalDate("proven_at")
        )
    }

    func session(id: String) async throws -> SessionRecord? {
        try await db.query("SELECT \(Self.sessionColumns) FROM sessions WHERE id = $1", .text(id)).first.map(Self.session)
    }

    func sessionWithUser(id: String) async throws -> (session: SessionRecord, user: UserRecord?)? {
        let rows = try await db.rows(of: Self.sessionWithUserRead, key: id)
        guard let row = rows.first else { return nil }
        return try Self.sessionWithUser(row)
    }

    func sessionWithUserAndIdentities(id: String) async throws -> (session: SessionRecord, user: UserRecord?, identities: [IdentityRecord])? {
        let rows = try await db.rows(of: Self.sessionWithUserAndIdentitiesRead, key: id)
        guard let first = rows.first else { return nil }
        let (session, user) = try Self.sessionWithUser(first)
        // One row per identity (one row with NULLs when there is none): the user's, so none without a user.
        let identities = user == nil ? [] : try rows.compactMap { row in
            try row.optionalText("identity_id") == nil ? nil : try Self.identity(row, prefix: "identity_")
        }
        return (session, user, identities)
    }

    private static func sessionWithUser(_ row: SQLRow) throws -> (session: SessionRecord, user: UserRecord?) {
        (try Self.session(row), try Self.joinedUser(row))
    }

    func revokeSession(id: String, now: Date) async throws {
        try await db.query("UPDATE sessions SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL", SQLValue(now), .text(id))
    }

    func touchSession(id: String, now: Date, notBefore: Date) async throws {
        try await db.query(
            "UPDATE sessions SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)",
            .text(id), SQLValue(now), SQLValue(notBefore)
        )
    }

    func revokeAllSessions(userId: String, now: Date) async throws -> Int {
        try await db.transaction { tx in try await Self.revokeAllSessions(userId: userId, now: now, tx) }
    }

    /// Ends every session of the user, and any still being written (``bumpSessionEpoch(userId:_:)``).
    private static func revokeAllSessions(userId: String, now: Date, _ tx: any SQLExecutor) async throws -> Int {
        try await bumpSessionEpoch(userId: userId, tx)
        return try await tx.query(
            "UPDATE sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL RETURNING id", SQLValue(now), .text(userId)
        ).count
    }

    /// What every ending of a user's sessions does first: counts up the user's `session_epoch`, locking its row. A
    /// session whose credential was read before (a login in flight) is then not written
    /// (``createSession(_:recording:clearingLoginFailures:)``), and one written before is among those the revocation
    /// then ends.
    static func bumpSessionEpoch(userId: String, _ tx: any SQLExecutor) async throws {
        try await tx.query("UPDATE users SET session_epoch = session_epoch + 1 WHERE id = $1", .text(userId))
    }

    /// What every write that adds a credential to an existing user does first, in its transaction: locks the user's
    /// row (as ``bumpSessionEpoch(userId:_:)`` does) and, given `epoch` (the ``UserRecord/sessionEpoch`` the adding
    /// session was read with), checks that none of the user's sessions ended since; ``StoreError/sessionEnded``
    /// otherwise, or when the user is gone. An ending of every session (a reset, the first proof of the mailbox, which
    /// also discards every credential someone else added) then either committed first and the credential is refused,
    /// or waits for it and removes it: a credential asked for at that moment is never left behind.
    static func holdOwner(_ userId: String, epoch: Int?, _ tx: any SQLExecutor) async throws {
        var binds: [SQLValue] = [.text(userId)]
        var condition = ""
        if let epoch {
            binds.append(.int(Int64(epoch)))
            condition = " AND session_epoch = $2"
        }
        guard try await !tx.query("UPDATE users SET session_epoch = session_epoch WHERE id = $1\(condition) RETURNING id", binds).isEmpty
        else { throw StoreError.sessionEnded }
    }

    /// ``holdOwner(_:epoch:_:)`` for an ``OwnerHold`` (nil: no session adds it), and its anonymous condition, read with
    /// the user's row locked: of an upgrade and a stale anonymous session's link racing, the second finds a way in
    /// that is not anonymous and writes nothing.
    static func holdOwner(_ userId: String, _ owner: OwnerHold?, _ tx: any SQLExecutor) async throws {
        try await holdOwner(userId, epoch: owner?.epoch, tx)
        if owner?.whileOnlyAnonymous == true {
            let other = try await tx.query(
                "SELECT 1 FROM identities WHERE user_id = $1 AND provider_type <> $2 LIMIT 1", .text(userId), .text(AnonymousService.providerType)
            )
            guard other.isEmpty else { throw StoreError.recentProofRequired }
        }
    }

    func setUserDisabled(appId: String, userId: String, disabled: Bool, now: Date) async throws -> Bool {
        try await db.transaction { tx in
            let found = try await tx.query(
                "UPDATE users SET disabled = $1 WHERE id = $2 AND app_id = $3 RETURNING id", SQLValue(disabled), .text(userId), .text(appId)
            )
            guard !found.isEmpty else { return false }
            if disabled { _ = try await Self.revokeAllSessions(userId: userId, now: now, tx) }
            return true
        }
    }

    func rotateSessionSecret(id: String, from old: [UInt8], to new: [UInt8], salt: [UInt8], now: Date) async throws -> Bool {
        try await db.transaction { tx in
            let rotated = try await tx.query(
                """
                UPDATE sessions SET secret_hash = $3, previous_secret_hash = $2, rotation_salt = $4, rotated_at = $5
                WHERE id = $1 AND secret_hash = $2 AND revoked_at IS NULL AND expires_at > $5
                RETURNING id
                """,
                .text(id), .blob(old), .blob(new), .blob(salt), SQLValue(now)
            )
            guard !rotated.isEmpty else { return false }
            try await tx.query(
                "INSERT INTO spent_refresh_secrets (secret_hash, session_id, spent_at) VALUES ($1, $2, $3)", .blob(old), .text(id), SQLValue(now)
            )
            return true
        }
    }

    func spentRefreshSecret(sessionId: String, secretHash: [UInt8]) async throws -> Date? {
        try await db.query(
            "SELECT spent_at FROM spent_refresh_secrets WHERE secret_hash = $1 AND session_id = $2", .blob(secretHash), .text(sessionId)
        ).first.map { try $0.date("spent_at") }
    }

    // MARK: API keys

    private static let apiKeyColumns = "id, app_id, user_id, name, key_hash, disabled, created_at"

    private static func apiKey(_ row: SQLRow) throws -> APIKeyRecord {
        APIKeyRecord(
            id: try row.text("id"),
            appId: try row.text("app_id"),
            userId: try row.optionalText("user_id"),
            name: try row.text("name"),
            keyHash: try row.blob("key_hash"),
            disabled: try row.int("disabled") != 0,
            createdAt: try row.date("created_at")
        )
    }

    func createAPIKey(_ key: APIKeyRecord, identity: IdentityRecord, serverUser: UserRecord?, ownerEpoch: Int?, limit: Int) async throws -> APIKeyWrite {
        try await db.transaction { tx in
            if let owner = key.userId {
                try await Self.holdOwner(owner, epoch: ownerEpoch, tx)
                let held = try await tx.query("SELECT count(*) AS n FROM api_keys WHERE user_id = $1", .text(owner)).first?.int("n") ?? 0
                guard held < Int64(limit) else { return .limitReached }
            }
            if let serverUser { try await Self.insertUser(serverUser, tx) }
            try await Self.insertAPIKey(key, tx)
            try await Self.insertIdentity(identity, tx)
            return .created
        }
    }

    static func insertAPIKey(_ key: APIKeyRecord, _ tx: any SQLExecutor) async throws {
        try await tx.query(
            "INSERT INTO api_keys (\(apiKeyColumns)) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            .text(key.id), .text(key.appId), SQLValue(key.userId), .text(key.name), .blob(key.keyHash), SQLValue(key.disabled),
            SQLValue(key.createdAt)
        )
    }

    func apiKey(appId: String, id: String) async throws -> APIKeyRecord? {
        try await db.query("SELECT \(Self.apiKeyColumns) FROM api_keys WHERE app_id = $1 AND id = $2", .text(appId), .text(id))
            .first.map(Self.apiKey)
    }

    func apiKeys(appId: String, userId: String?) async throws -> [APIKeyRecord] {
        if let userId {
            return try await db.query(
                "SELECT \(Self.apiKeyColumns) FROM api_keys WHERE app_id = $1 AND user_id = $2 ORDER BY created_at, id",
                .text(appId), .text(userId)
            ).map(Self.apiKey)
        }
        return try await db.query(
            "SELECT \(Self.apiKeyColumns) FROM api_keys WHERE app_id = $1 AND user_id IS NULL ORDER BY created_at, id", .text(appId)
        ).map(Self.apiKey)
    }

    func apiKeyLogin(appId: String, keyHash: [UInt8]) async throws -> (key: APIKeyRecord, user: UserRecord)? {
        guard let key = try await db.query(
            "SELECT \(Self.apiKeyColumns) FROM api_keys WHERE key_hash = $1 AND app_id = $2", .blob(keyHash), .text(appId)
        ).first.map(Self.apiKey) else { return nil }
        guard let user = try await db.query(
            """
            SELECT \(Self.columns(Self.userColumns, of: "u")) FROM users u
            JOIN identities i ON i.user_id = u.id
            WHERE i.app_id = $1 AND i.provider_type = 'api-key' AND i.external_id = $2
            """,
            .text(appId), .text(key.id)
        ).first.map({ try Self.user($0) }) else { return nil }
        return (key, user)
    }

    func setAPIKeyDisabled(appId: String, id: String, disabled: Bool, owner: OwnerHold?, now: Date) async throws -> APIKeySwitch {
        try await db.transaction { tx in
            if let owner {
                // The owner's row first, then the key's, in the order a key's creation takes them.
                guard let user = try await tx.query("SELECT user_id FROM api_keys WHERE app_id = $1 AND id = $2", .text(appId), .text(id))
                    .first?.optionalText("user_id")
                else { return .notFound }
                try await Self.holdOwner(user, owner, tx)
            }
            let updated = try await tx.query(
                "UPDATE api_keys SET disabled = $3 WHERE app_id = $1 AND id = $2 AND disabled <> $3 RETURNING id",
                .text(appId), .text(id), SQLValue(disabled)
            )
            let change: APIKeySwitch
            if !updated.isEmpty {
                change = .changed
            } else {
                let exists = try await tx.query("SELECT 1 AS found FROM api_keys WHERE app_id = $1 AND id = $2", .text(appId), .text(id))
                guard !exists.isEmpty else { return .notFound }
                change = .unchanged
            }
            if disabled { try await Self.revokeSessions(apiKeyId: id, now: now, tx) }
            return change
        }
    }

    func deleteAPIKey(appId: String, id: String, now: Date) async throws -> Bool {
        try await db.transaction { tx in
            guard let key = try await tx.query(
                "DELETE FROM api_keys WHERE app_id = $1 AND id = $2 RETURNING \(Self.apiKeyColumns)", .text(appId), .text(id)
            ).first.map(Self.apiKey) else { return false }
            let owners = try await tx.query(
                "DELETE FROM identities WHERE app_id = $1 AND provider_type = 'api-key' AND external_id = $2 RETURNING user_id",
                .text(appId), .text(id)
            )
            try await Self.revokeSessions(apiKeyId: id, now: now, tx)
            if key.userId == nil {
                // A server key's user exists only for it.
                for owner in owners { try await Self.deleteUser(id: try owner.text("user_id"), tx) }
            }
            return true
        }
    }

    private static func revokeSessions(apiKeyId: String, now: Date, _ tx: any SQLExecutor) async throws {
        try await tx.query(
            "UPDATE sessions SET revoked_at = $1 WHERE api_key_id = $2 AND revoked_at IS NULL", SQLValue(now), .text(apiKeyId)
        )
    }

    // MARK: Native auth flows

    private static let flowColumns = """
        id, app_id, client_id, kind, step, username, email, user_id, challenge_types, token_hash, token_expires_at, \
        code_hash, code_expires_at, code_sent_at, attempts, verified, password_hash, attributes, created_at
        """

    /// Writes a new flow, its user's epoch (``NativeFlowRecord/userEpoch``) pinned in the same statement.
    func insertFlow(_ flow: NativeFlowRecord) async throws {
        try await db.query(
            """
            INSERT INTO native_flows (\(Self.flowColumns), user_epoch)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, (SELECT session_epoch FROM users WHERE id = $8))
            """,
            try Self.binds(flow)
        )
    }

    func flow(id: String) async throws -> NativeFlowRecord? {
        try await db.query("SELECT \(Self.flowColumns), user_epoch FROM native_flows WHERE id = $1", .text(id)).first.map(Self.flow)
    }

    func advanceFlow(_ flow: NativeFlowRecord, from expectedTokenHash: [UInt8], now: Date, effects: [NativeFlowEffect]) async throws -> Bool {
        let dialect = db.dialect
        return try await db.transaction { tx in
            // The flow's identity (app, client, kind) never changes, and neither does `attempts` here: only
            // recordFlowAttempt counts, so a racing step cannot write an older count back.
            let updated = try await tx.query(
                """
                UPDATE native_flows SET step = $2, user_id = $3, token_hash = $4, token_expires_at = $5, code_hash = $6,
                    code_expires_at = $7, code_sent_at = $8, verified = $9, password_hash = $10, attributes = $11
                WHERE id = $1 AND token_hash = $12 AND token_expires_at > $13
                RETURNING id
                """,
                .text(flow.id), .text(flow.step.rawValue), SQLValue(flow.userId), .blob(flow.tokenHash), SQLValue(flow.tokenExpiresAt),
                SQLValue(flow.codeHash), SQLValue(flow.codeExpiresAt), SQLValue(flow.codeSentAt), SQLValue(flow.verified),
                SQLValue(flow.passwordHash), .text(try Self.attributesColumn(flow.attributes)), .blob(expectedTokenHash), SQLValue(now)
            )
            guard !updated.isEmpty else { return false }
            let resets = effects.contains { if case .resetPassword = $0 { true } else { false } }
            try await Self.requireFlowBasis(flow, resetting: resets, dialect: dialect, tx)
            for case .createSession(let session) in effects { try await Self.requireSessionBasis(session, dialect: dialect, tx) }
            for effect in effects { try await Self.apply(effect, now: now, tx) }
            if let userId = flow.userId, effects.contains(where: \.changesUser) {
                // The flow's own effects (a reset ends every session; a sign-up makes the user): it holds to the user
                // as they left it.
                try await tx.query(
                    "UPDATE native_flows SET user_epoch = (SELECT session_epoch FROM users WHERE id = $2) WHERE id = $1", .text(flow.id), .text(userId)
                )
            }
            return true
        }
    }

    /// Checks, in a flow's step's transaction and before its effects, that the flow's basis holds (``flowBasis``);
    /// else ``StoreError/sessionEnded``, which rolls the step back. The user's row stays locked to the end (`FOR UPDATE`
    /// on PostgreSQL), so an ending waits for the step and then ends what it started. A flow without a user yet (an
    /// unknown address; a sign-up until it makes its user) has nothing to check.
    ///
    /// A step that `resetting` the password (a reset's `submit`) is held to the flow's address only, whatever its row's
    /// new step says: the reset is the owner's way to end every session, and no session's holder may keep it from
    /// them by ending sessions again and again (``NativeFlowRecord/userEpoch``).
    private static func requireFlowBasis(_ flow: NativeFlowRecord, resetting: Bool, dialect: SQLDialect, _ tx: any SQLExecutor) async throws {
        // The row's `user_id` and `user_epoch` are the flow's: the step's UPDATE just wrote the one, and only the store
        // sets the other (a sign-up's new user is pinned after its effects).
        guard flow.userId != nil, flow.userEpoch != nil else { return }
        let found = try await tx.query(
            "SELECT users.id " + (resetting ? flowUserAndAddress + " WHERE" : flowBasis + " AND") + " native_flows.id = $1"
                + (dialect == .postgres ? " FOR UPDATE OF users" : ""),
            .text(flow.id)
        )
        guard !found.isEmpty else { throw StoreError.sessionEnded }
    }

    /// The rows of a flow whose basis holds (``NativeFlowRecord/userEpoch``), joined with its user: the user still has
    /// the flow's address in the flow's app and, for every flow held to the epoch (all but a reset that has not set
    /// its password yet), ended none of its sessions since the flow pinned the epoch. A reset is held to the epoch
    /// pinned after its own reset (its `submitted` step's effects): its `poll_completion` and its sign-in after the
    /// reset end with the user's next ending of sessions, as a sign-in's steps do. The caller names the flow
    /// (`AND native_flows.id = …`). The one statement of the rule: a step's transaction checks it
    /// (``requireFlowBasis(_:resetting:dialect:_:)``), and so does the count of an attempt
    /// (``recordFlowAttempt(id:tokenHash:limit:)``) before any answer is checked.
    private static let flowBasis = flowUserAndAddress + """

        WHERE ((native_flows.kind = '\(NativeFlowRecord.Kind.resetPassword.rawValue)' AND native_flows.step IN \(resetBeforeItsPassword))
            OR users.session_epoch = native_flows.user_epoch)
        """

    /// The steps of a reset before it sets its password (as an SQL list): held to the flow's address only.
    private static let resetBeforeItsPassword = "(" + [NativeFlowRecord.Step.started, .codeSent, .newPassword].map { "'\($0.rawValue)'" }
        .joined(separator: ", ") + ")"

    /// A flow joined with its user, while the user has the flow's address in the flow's app.
    private static let flowUserAndAddress = """
        FROM native_flows JOIN users ON users.id = native_flows.user_id
        JOIN email_accounts ON email_accounts.user_id = users.id AND email_accounts.app_id = native_flows.app_id
            AND email_accounts.email = native_flows.username
        """

    /// Whether the flow `$1` has no basis to check (no user yet, or no epoch pinned) or its basis holds.
    private static let flowBasisHolds =
        "(user_id IS NULL OR user_epoch IS NULL OR EXISTS (SELECT 1 \(flowBasis) AND native_flows.id = $1))"

    private static func apply(_ effect: NativeFlowEffect, now: Date, _ tx: any SQLExecutor) async throws {
        switch effect {
        case .mail(let mail, let dryRun):
            try await insertMail(mail, tx)
            if dryRun { try await tx.query("DELETE FROM outbox WHERE id = $1", .text(mail.id)) }
        case .createAccount(let user, let identity, let account):
            // A pending account of the address is someone's unconfirmed registration: the sign-up that proved the
            // mailbox restarts it. A confirmed one stays, and the INSERT below conflicts.
            _ = try await deletePendingAccount(appId: account.appId, email: account.email, userId: nil, tx)
            try await insertUser(user, tx)
            try await insertIdentity(identity, tx)
            try await insertAccount(account, createdAt: user.createdAt, tx)
        case .resetPassword(let userId, let email, let passwordHash):
            try await resetPassword(userId: userId, email: email, newPasswordHash: passwordHash, now: now, tx)
        case .proveMailbox(let userId, let email, let proof):
            try await proveMailbox(userId: userId, email: email, proof, now: now, tx)
        case .createSession(let session):
            // Its basis was checked before the effects ran (advanceFlow).
            try await insertSession(session.record, tx)
        }
    }

    func recordFlowAttempt(id: String, tokenHash: [UInt8], limit: Int) async throws -> FlowAttemptCount {
        let counted = try await db.query(
            """
            UPDATE native_flows SET attempts = attempts + 1
            WHERE id = $1 AND token_hash = $2 AND attempts < $3 AND \(Self.flowBasisHolds)
            RETURNING attempts
            """,
            .text(id), .blob(tokenHash), .int(Int64(limit))
        )
        if let row = counted.first { return .counted(attempt: Int(try row.int("attempts"))) }
        // Why not, as the flow is now: its token first (a racing step took it), then its basis, then its count.
        guard let row = try await db.query(
            "SELECT token_hash, CASE WHEN \(Self.flowBasisHolds) THEN 1 ELSE 0 END AS holds FROM native_flows WHERE id = $1", .text(id)
        ).first, Secrets.constantTimeEquals(try row.blob("token_hash"), tokenHash)
        else { return .tokenSpent }
        return try row.int("holds") == 1 ? .exhausted : .flowEnded
    }

    func returnFlowAttempt(id: String, tokenHash: [UInt8]) async throws {
        try await db.query(
            "UPDATE native_flows SET attempts = attempts - 1 WHERE id = $1 AND token_hash = $2 AND attempts > 0", .text(id), .blob(tokenHash)
        )
    }

    private static func binds(_ flow: NativeFlowRecord) throws -> [SQLValue] {
        [
            .text(flow.id), .text(flow.appId), .text(flow.clientId), .text(flow.kind.rawValue), .text(flow.step.rawValue),
            .text(flow.username), .text(flow.email), SQLValue(flow.userId),
            .text(flow.challengeTypes.map(\.rawValue).sorted().joined(separator: " ")), .blob(flow.tokenHash),
            SQLValue(flow.tokenExpiresAt), SQLValue(flow.codeHash), SQLValue(flow.codeExpiresAt), SQLValue(flow.codeSentAt),
            .int(Int64(flow.attempts)), SQLValue(flow.verified), SQLValue(flow.passwordHash),
            .text(try attributesColumn(flow.attributes)), SQLValue(flow.createdAt),
        ]
    }

    private static func attributesColumn(_ attributes: [String: String]) throws -> String {
        try JSONColumn.encode(attributes.mapValues(JSONValue.string))
    }

    private static func flow(_ row: SQLRow) throws -> NativeFlowRecord {
        guard let kind = NativeFlowRecord.Kind(rawValue: try row.text("kind")), let step = NativeFlowRecord.Step(rawValue: try row.text("step"))
        else { throw SQLRowError(column: "kind/step", expected: "a known flow kind and step") }
        return NativeFlowRecord(
            id: try row.text("id"),
            appId: try row.text("app_id"),
            clientId: try row.text("client_id"),
            kind: kind,
            step: step,
            username: try row.text("username"),
            email: try row.text("email"),
            userId: try row.optionalText("user_id"),
            challengeTypes: Set(try row.text("challenge_types").split(separator: " ").compactMap { NativeAuthChallengeType(rawValue: String($0)) }),
            tokenHash: try row.blob("token_hash"),
            tokenExpiresAt: try row.date("token_expires_at"),
            codeHash: try row.optionalBlob("code_hash"),
            codeExpiresAt: try row.optionalDate("code_expires_at"),
            codeSentAt: try row.optionalDate("code_sent_at"),
            attempts: Int(try row.int("attempts")),
            verified: try row.int("verified") != 0,
            passwordHash: try row.optionalText("password_hash"),
            attributes: try JSONColumn.decode(row.text("attributes")).compactMapValues { if case .string(let s) = $0 { s } else { nil } },
            createdAt: try row.date("created_at"),
            userEpoch: try row.optionalInt("user_epoch").map(Int.init)
        )
    }

    // MARK: Send limits

    /// One statement, no transaction: the count and the insert are one statement (SQLite runs it alone; on
    /// PostgreSQL a transaction around it would not make two racing sends see each other either). Rows older than the
    /// window are not counted, and the retention pass deletes them (``RetentionTarget/sendLog``), not every send.
    func recordSend(appId: String, address: String, kind: String, requester: String, now: Date, since: Date, limit: Int, total: Int) async throws -> Bool {
        !(try await db.query(
            """
            INSERT INTO send_log (app_id, address, kind, at, requester)
            SELECT $1, $2, $3, $4, $7
            FROM (SELECT COUNT(*) AS everyone, COUNT(CASE WHEN requester = $7 THEN 1 END) AS mine
                  FROM send_log WHERE app_id = $1 AND address = $2 AND kind = $3 AND at >= $5) AS sent
            WHERE sent.mine < $6 AND (sent.everyone < $8 OR sent.mine = 0)
            RETURNING at
            """,
            .text(appId), .text(address), .text(kind), SQLValue(now), SQLValue(since), .int(Int64(limit)), .text(requester), .int(Int64(total))
        ).isEmpty)
    }

    func oldestSend(appId: String, address: String, kind: String, requester: String, since: Date) async throws -> Date? {
        try await db.query(
            "SELECT MIN(at) AS oldest FROM send_log WHERE app_id = $1 AND address = $2 AND kind = $3 AND requester = $4 AND at >= $5",
            .text(appId), .text(address), .text(kind), .text(requester), SQLValue(since)
        ).first.flatMap { try $0.optionalDate("oldest") }
    }

    // MARK: Outbox

    func enqueue(_ mail: OutboxMessage) async throws {
        try await Self.insertMail(mail, db)
    }

    private static let mailColumns =
        "id, app_id, kind, recipient, subject, text_body, html_body, created_at, status, attempts, next_attempt_at, delivered_at, last_error"

    func claimDueMail(now: Date, leaseUntil: Date, limit: Int) async throws -> [OutboxMessage] {
        // PostgreSQL: rows another instance is claiming right now are skipped, not waited for. SQLite has one
        // writer, so the plain subquery is already exclusive.
        let skipLocked = db.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
        return try await db.query(
            """
            UPDATE outbox SET claimed_until = $2
            WHERE id IN (
                SELECT id FROM outbox
                WHERE status = 'pending' AND next_attempt_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1)
                ORDER BY seq \(Self.limit(limit))\(skipLocked)
            )
            RETURNING seq, \(Self.mailColumns)
            """,
            SQLValue(now), SQLValue(leaseUntil)
        ).sorted { (try? $0.int("seq")) ?? 0 < (try? $1.int("seq")) ?? 0 }.map(Self.mail)
    }

    /// Messages waiting to be sent (`gatehouse_outbox_pending`): due or waiting for a retry, not failed.
    func pendingMailCount() async throws -> Int {
        let rows = try await db.query("SELECT COUNT(*) AS n FROM outbox WHERE status = 'pending'")
        return Int(try rows.first?.int("n") ?? 0)
    }

    func markDelivered(id: String, at: Date) async throws {
        try await db.query(
            "UPDATE outbox SET status = 'delivered', delivered_at = $1, attempts = attempts + 1, claimed_until = NULL WHERE id = $2",
            SQLValue(at), .text(id)
        )
    }

    func markAttemptFailed(id: String, error: String, retryAt: Date?) async throws {
        if let retryAt {
            try await db.query(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $1, next_attempt_at = $2, claimed_until = NULL WHERE id = $3",
                .text(error), SQLValue(retryAt), .text(id)
            )
        } else {
            try await db.query(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $1, status = 'failed', claimed_until = NULL WHERE id = $2",
                .text(error), .text(id)
            )
        }
    }

    func failedMail(appId: String?, limit: Int) async throws -> [OutboxMessage] {
        var binds: [SQLValue] = [.int(Int64(limit))]
        var filter = ""
        if let appId {
            binds.append(.text(appId))
            filter = " AND app_id = $2"
        }
        return try await db.query(
            "SELECT \(Self.mailColumns) FROM outbox WHERE status = 'failed'\(filter) ORDER BY seq DESC LIMIT $1", binds
        ).map(Self.mail)
    }

    func retryFailedMail(ids: [String]?, now: Date) async throws -> Int {
        // created_at moves to now: the retry budget counts from the operator's decision, not the first write.
        let update = "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = $1, created_at = $1, claimed_until = NULL WHERE status = 'failed'"
        guard let ids else { return try await db.query(update + " RETURNING id", SQLValue(now)).count }
        guard !ids.isEmpty else { return 0 }
        let placeholders = ids.indices.map { "$\($0 + 2)" }.joined(separator: ", ")
        return try await db.query(update + " AND id IN (\(placeholders)) RETURNING id", [SQLValue(now)] + ids.map { SQLValue.text($0) }).count
    }

    func mailbox(recipient: String?, limit: Int) async throws -> [OutboxMessage] {
        if let recipient {
            return try await db.query(
                "SELECT \(Self.mailColumns) FROM outbox WHERE lower(recipient) = $1 ORDER BY seq DESC \(Self.limit(limit))",
                .text(recipient.lowercased())
            ).map(Self.mail)
        }
        return try await db.query("SELECT \(Self.mailColumns) FROM outbox ORDER BY seq DESC \(Self.limit(limit))")
            .map(Self.mail)
    }

    // MARK: Rows

    static let userColumns = "id, app_id, created_at, disabled, custom_data, session_epoch"

    /// `columns` (a list like ``userColumns``) named by `table`, for a join; each renamed `prefix` + the column when
    /// the other table has columns of the same names.
    static func columns(_ columns: String, of table: String, as prefix: String? = nil) -> String {
        columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .map { column in prefix.map { "\(table).\(column) AS \($0)\(column)" } ?? "\(table).\(column)" }
            .joined(separator: ", ")
    }

    /// A user from a row of ``userColumns``, each named `prefix` + the column where a join renamed them.
    static func user(_ row: SQLRow, prefix: String = "") throws -> UserRecord {
        UserRecord(
            id: try row.text(prefix + "id"),
            appId: try row.text(prefix + "app_id"),
            createdAt: try row.date(prefix + "created_at"),
            disabled: try row.int(prefix + "disabled") != 0,
            customData: try JSONColumn.decode(row.text(prefix + "custom_data")),
            sessionEpoch: Int(try row.int(prefix + "session_epoch"))
        )
    }

    /// ``userColumns`` of a `users` table joined to another (whose own `id`, `app_id`… keep their names), as
    /// `joined_user_…`; ``joinedUser(_:)`` reads them.
    static let joinedUserColumns = columns(userColumns, of: "users", as: "joined_user_")

    /// The user of a row with ``joinedUserColumns``: nil when the LEFT JOIN found none.
    static func joinedUser(_ row: SQLRow) throws -> UserRecord? {
        try row.optionalText("joined_user_id") == nil ? nil : try user(row, prefix: "joined_user_")
    }

    static func insertUser(_ user: UserRecord, _ tx: any SQLExecutor) async throws {
        try await insertUsers([user], tx)
    }

    /// Inserts `users` in one statement (an import's batch).
    static func insertUsers(_ users: [UserRecord], _ tx: any SQLExecutor) async throws {
        try await insertRows(into: "users (id, app_id, created_at, disabled, custom_data)", users, tx) { user in
            [.text(user.id), .text(user.appId), SQLValue(user.createdAt), SQLValue(user.disabled), .text(try JSONColumn.encode(user.customData))]
        }
    }

    /// `INSERT INTO table (columns) VALUES (…), (…)` with one row of binds per element, then `suffix` (say an
    /// `ON CONFLICT` clause); nothing for an empty list.
    private static func insertRows<Element>(
        into table: String, _ elements: [Element], _ tx: any SQLExecutor, then suffix: String = "",
        _ row: (Element) throws -> [SQLValue]
    ) async throws {
        guard !elements.isEmpty else { return }
        var binds: [SQLValue] = []
        var rows: [String] = []
        for element in elements {
            let values = try row(element)
            rows.append("(" + (binds.count + 1...binds.count + values.count).map { "$\($0)" }.joined(separator: ", ") + ")")
            binds += values
        }
        try await tx.query("INSERT INTO \(table) VALUES \(rows.joined(separator: ", "))\(suffix)", binds)
    }

    static let identityColumns = "id, user_id, app_id, provider_type, external_id, data, created_at, added_session, added_methods"

    /// An identity from a row of ``identityColumns``, each named `prefix` + the column where a join renamed them.
    static func identity(_ row: SQLRow, prefix: String = "") throws -> IdentityRecord {
        IdentityRecord(
            id: try row.text(prefix + "id"),
            userId: try row.text(prefix + "user_id"),
            appId: try row.text(prefix + "app_id"),
            providerType: try row.text(prefix + "provider_type"),
            externalId: try row.text(prefix + "external_id"),
            data: try JSONColumn.decode(row.text(prefix + "data")),
            createdAt: try row.date(prefix + "created_at"),
            addedBy: try provenance(row, session: prefix + "added_session", methods: prefix + "added_methods")
        )
    }

    /// A credential's provenance from its two columns (nil when no session added it).
    static func provenance(_ row: SQLRow, session: String, methods: String) throws -> Provenance? {
        guard let id = try row.optionalText(session) else { return nil }
        return Provenance(session: id, methods: AuthenticationMethod.list(try row.optionalText(methods) ?? ""))
    }

    static func insertIdentity(_ identity: IdentityRecord, _ tx: any SQLExecutor) async throws {
        try await insertIdentities([identity], tx)
    }

    static func insertIdentities(_ identities: [IdentityRecord], _ tx: any SQLExecutor) async throws {
        try await insertRows(
            into: "identities (id, user_id, app_id, provider_type, external_id, data, created_at, added_session, added_methods)", identities, tx
        ) { identity in
            [
                .text(identity.id), .text(identity.userId), .text(identity.appId), .text(identity.providerType),
                .text(identity.externalId), .text(try JSONColumn.encode(identity.data)), SQLValue(identity.createdAt),
                SQLValue(identity.addedBy?.session), SQLValue(identity.addedBy.map { AuthenticationMethod.text($0.methods) }),
            ]
        }
    }

    static func insertAccount(_ account: EmailAccountRecord, createdAt: Date, _ tx: any SQLExecutor) async throws {
        try await insertAccounts([(account, createdAt)], tx)
    }

    static func insertAccounts(_ accounts: [(EmailAccountRecord, createdAt: Date)], _ tx: any SQLExecutor) async throws {
        try await insertRows(
            into: """
                email_accounts (app_id, email, user_id, password_hash, confirmed_at, created_at, mailbox_proven_at, address, contested_at, \
                from_old_system, password_set_at, password_session, password_methods)
                """,
            accounts, tx
        ) { account, createdAt in
            [
                .text(account.appId), .text(account.email), .text(account.userId), .text(account.passwordHash),
                SQLValue(account.confirmedAt), SQLValue(createdAt), SQLValue(account.mailboxProvenAt), SQLValue(account.address),
                SQLValue(account.contestedAt), .int(account.fromOldSystem ? 1 : 0), SQLValue(account.passwordSetAt),
                SQLValue(account.passwordSetBy?.session), SQLValue(account.passwordSetBy.map { AuthenticationMethod.text($0.methods) }),
            ]
        }
        // An address the old system hands over is remembered for good: one statement for the batch, as above.
        try await recordMigratedAddresses(accounts.filter(\.0.fromOldSystem).map { ($0.0.appId, $0.0.email, $0.createdAt) }, tx)
    }

    /// Records addresses the old system handed over (``migratedAddress(appId:email:)``) in one statement; one already
    /// recorded keeps its first date.
    static func recordMigratedAddresses(_ addresses: [(appId: String, email: String, at: Date)], _ tx: any SQLExecutor) async throws {
        try await insertRows(into: "migrated_addresses (app_id, email, migrated_at)", addresses, tx, then: " ON CONFLICT DO NOTHING") {
            [.text($0.appId), .text($0.email), SQLValue($0.at)]
        }
    }

    func migratedAddress(appId: String, email: String) async throws -> Bool {
        !(try await db.query("SELECT 1 FROM migrated_addresses WHERE app_id = $1 AND email = $2", .text(appId), .text(email)).isEmpty)
    }

    static func insertToken(_ token: OneTimeTokenRecord, _ tx: any SQLExecutor) async throws {
        try await tx.query(
            """
            INSERT INTO one_time_tokens (id, app_id, kind, user_id, secret_hash, created_at, expires_at, email, superseded_at, requester, address, subject)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
            """,
            .text(token.id), .text(token.appId), .text(token.kind.rawValue), .text(token.userId), .blob(token.secretHash),
            SQLValue(token.createdAt), SQLValue(token.expiresAt), SQLValue(token.email), SQLValue(token.supersededAt), .text(token.requester),
            SQLValue(token.address), SQLValue(token.subject)
        )
    }

    static func insertMail(_ mail: OutboxMessage, _ tx: any SQLExecutor) async throws {
        try await tx.query(
            """
            INSERT INTO outbox (id, seq, app_id, kind, recipient, subject, text_body, html_body, created_at, status, attempts, next_attempt_at)
            VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM outbox), $2, $3, $4, $5, $6, $7, $8, 'pending', 0, $9)
            """,
            .text(mail.id), .text(mail.appId), .text(mail.kind), .text(mail.recipient), .text(mail.subject),
            .text(mail.text), .text(mail.html), SQLValue(mail.createdAt), SQLValue(mail.nextAttemptAt)
        )
    }

    static let accountColumns = """
        app_id, email, user_id, password_hash, confirmed_at, mailbox_proven_at, address, contested_at, from_old_system, \
        password_set_at, password_session, password_methods
        """

    static func account(_ row: SQLRow) throws -> EmailAccountRecord {
        EmailAccountRecord(
            appId: try row.text("app_id"),
            email: try row.text("email"),
            userId: try row.text("user_id"),
            passwordHash: try row.text("password_hash"),
            confirmedAt: try row.optionalDate("confirmed_at"),
            mailboxProvenAt: try row.optionalDate("mailbox_proven_at"),
            address: try row.optionalText("address"),
            contestedAt: try row.optionalDate("contested_at"),
            fromOldSystem: try row.int("from_old_system") != 0,
            passwordSetAt: try row.optionalDate("password_set_at"),
            passwordSetBy: try provenance(row, session: "password_session", methods: "password_methods")
        )
    }

    private static func mail(_ row: SQLRow) throws -> OutboxMessage {
        OutboxMessage(
            id: try row.text("id"),
            appId: try row.text("app_id"),
            kind: try row.text("kind"),
            recipient: try row.text("recipient"),
            subject: try row.text("subject"),
            text: try row.text("text_body"),
            html: try row.text("html_body"),
            createdAt: try row.date("created_at"),
            status: OutboxMessage.Status(rawValue: try row.text("status")) ?? .pending,
            attempts: Int(try row.int("attempts")),
            nextAttemptAt: try row.date("next_attempt_at"),
            deliveredAt: try row.optionalDate("delivered_at"),
            lastError: try row.optionalText("last_error")
        )
    }
}

/// JSON documents stored in TEXT columns.
enum JSONColumn {
    /// Keys sorted, written by hand (``JSONText``: every login stores its device this way). A `/` is written as it is;
    /// rows written before by `JSONEncoder` have it as `\/`, which reads back the same.
    static func encode(_ object: [String: JSONValue]) throws -> String {
        if object.isEmpty { return "{}" }
        var out: [UInt8] = []
        JSONText.appendObject(object, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Every session and user read decodes one or two of these (a device, custom data), most of them `{}`: the empty
    /// object is not parsed, and objects without numbers are read by ``JSONText/readObject(_:)``; the rest, and
    /// anything it does not read as `JSONDecoder` would, by `JSONDecoder`.
    static func decode(_ text: String) throws -> [String: JSONValue] {
        if text == "{}" { return [:] }
        if let object = JSONText.readObject(text) { return object }
        return try JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8))
    }
}
