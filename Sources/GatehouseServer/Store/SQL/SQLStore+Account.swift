import Foundation
import GatehouseDomain

/// What a signed-in user changes of their own account: sessions, password, identities.
extension SQLStore {
    func liveSessions(userId: String, now: Date) async throws -> [SessionRecord] {
        try await db.query(
            "SELECT \(Self.sessionColumns) FROM sessions WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > $2 ORDER BY created_at DESC, id DESC",
            .text(userId), SQLValue(now)
        ).map(Self.session)
    }

    func revokeAllSessions(userId: String, keeping: String?, now: Date) async throws -> Int {
        try await Self.revokeSessions(userId: userId, keeping: keeping, now: now, db)
    }

    private static func revokeSessions(userId: String, keeping: String?, now: Date, _ tx: any SQLExecutor) async throws -> Int {
        try await tx.query(
            "UPDATE sessions SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL AND id <> $3 RETURNING id",
            SQLValue(now), .text(userId), .text(keeping ?? "")
        ).count
    }

    func reproveSession(id: String, methods: [AuthenticationMethod], at: Date) async throws -> Bool {
        try await Self.reprove(id: id, methods: methods, at: at, db)
    }

    private static func reprove(id: String, methods: [AuthenticationMethod], at: Date, _ tx: any SQLExecutor) async throws -> Bool {
        !(try await tx.query(
            "UPDATE sessions SET methods = $2, proven_at = $3 WHERE id = $1 AND revoked_at IS NULL AND expires_at > $3 RETURNING id",
            .text(id), .text(methods.map(\.rawValue).joined(separator: " ")), SQLValue(at)
        ).isEmpty)
    }

    func emailAccounts(userId: String) async throws -> [EmailAccountRecord] {
        try await Self.emailAccounts(userId: userId, db)
    }

    private static func emailAccounts(userId: String, _ tx: any SQLExecutor) async throws -> [EmailAccountRecord] {
        try await tx.query("SELECT \(accountColumns) FROM email_accounts WHERE user_id = $1 ORDER BY created_at, email", .text(userId))
            .map(Self.account)
    }

    func changePassword(
        userId: String, newPasswordHash: String, session: String, methods: [AuthenticationMethod], mail: OutboxMessage?, now: Date
    ) async throws -> Bool {
        do {
            return try await db.transaction { tx in
                let changed = try await tx.query(
                    "UPDATE email_accounts SET password_hash = $2 WHERE user_id = $1 AND confirmed_at IS NOT NULL RETURNING email",
                    .text(userId), .text(newPasswordHash)
                )
                // Thrown, so that the transaction rolls back the password it set.
                guard !changed.isEmpty, try await Self.reprove(id: session, methods: methods, at: now, tx) else { throw NothingChanged() }
                _ = try await Self.revokeSessions(userId: userId, keeping: session, now: now, tx)
                if let mail { try await Self.insertMail(mail, tx) }
                return true
            }
        } catch is NothingChanged {
            return false
        }
    }

    /// Rolls a transaction back when a later statement finds that the change may not happen.
    private struct NothingChanged: Error {}

    func removeIdentity(
        id: String, userId: String, keepsAWayIn: @escaping @Sendable (_ identities: [IdentityRecord], _ accounts: [EmailAccountRecord]) -> Bool
    ) async throws -> IdentityRemoval {
        try await db.transaction { tx in
            // The user's row first: racing removals for one user take turns, each seeing what the other left.
            guard !(try await tx.query("UPDATE users SET id = id WHERE id = $1 RETURNING id", .text(userId))).isEmpty else { return .notFound }
            let identities = try await tx.query("SELECT \(Self.identityColumns) FROM identities WHERE user_id = $1 ORDER BY created_at, id", .text(userId))
                .map { try Self.identity($0) }
            guard let identity = identities.first(where: { $0.id == id }) else { return .notFound }
            var accounts = try await Self.emailAccounts(userId: userId, tx)
            let account = identity.providerType == "local-userpass" ? accounts.first { $0.email == identity.externalId } : nil
            accounts.removeAll { $0.email == account?.email }
            guard keepsAWayIn(identities.filter { $0.id != id }, accounts) else { return .lastWayIn }
            if let account {
                try await tx.query("DELETE FROM email_accounts WHERE app_id = $1 AND email = $2", .text(account.appId), .text(account.email))
                // Its links (confirmation, reset) go with it: none may set a password for an address the user gave up.
                try await tx.query(
                    "DELETE FROM one_time_tokens WHERE user_id = $1 AND (email = $2 OR email IS NULL) AND used_at IS NULL",
                    .text(userId), .text(account.email)
                )
            }
            try await tx.query("DELETE FROM identities WHERE id = $1", .text(id))
            return .removed(identity)
        }
    }
}
