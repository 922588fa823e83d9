import Foundation
import GatehouseDomain
import GatehouseWire

/// What a signed-in user changes of their own account: sessions, password, identities.
extension SQLStore {
    func liveSessions(userId: String, now: Date) async throws -> [SessionRecord] {
        try await db.query(
            "SELECT \(Self.sessionColumns) FROM sessions WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > $2 ORDER BY created_at DESC, id DESC",
            .text(userId), SQLValue(now)
        ).map(Self.session)
    }

    func revokeAllSessions(userId: String, keeping: String?, now: Date) async throws -> Int {
        try await db.transaction { tx in try await Self.revokeSessions(userId: userId, keeping: keeping, now: now, tx) }
    }

    /// Ends every session of the user but `keeping`, and any still being written (``bumpSessionEpoch(userId:_:)``).
    private static func revokeSessions(userId: String, keeping: String?, now: Date, _ tx: any SQLExecutor) async throws -> Int {
        try await bumpSessionEpoch(userId: userId, tx)
        return try await tx.query(
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
            .text(id), .text(AuthenticationMethod.text(methods)), SQLValue(at)
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
                    """
                    UPDATE email_accounts SET password_hash = $2, password_set_at = $3, password_session = $4, password_methods = $5
                    WHERE user_id = $1 AND confirmed_at IS NOT NULL RETURNING email
                    """,
                    .text(userId), .text(newPasswordHash), SQLValue(now), .text(session), .text(AuthenticationMethod.text(methods))
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

/// Codes a signed-in session asks for, and the email change they prove.
extension SQLStore {
    func liveToken(userId: String, kind: OneTimeTokenKind, requester: String, now: Date) async throws -> OneTimeTokenRecord? {
        try await db.query(
            """
            SELECT \(Self.tokenColumns) FROM one_time_tokens
            WHERE user_id = $1 AND kind = $2 AND requester = $3 AND used_at IS NULL AND superseded_at IS NULL AND expires_at > $4
            ORDER BY created_at DESC, id DESC LIMIT 1
            """,
            .text(userId), .text(kind.rawValue), .text(requester), SQLValue(now)
        ).first.flatMap { try Self.token($0) }
    }

    func countGuess(tokenId: String, limit: Int, now: Date) async throws -> Bool {
        let rows = try await db.query(
            """
            UPDATE one_time_tokens SET attempts = attempts + 1,
                superseded_at = CASE WHEN attempts + 1 > $2 THEN $3 ELSE superseded_at END
            WHERE id = $1 AND used_at IS NULL AND superseded_at IS NULL AND expires_at > $3
            RETURNING attempts
            """,
            .text(tokenId), .int(Int64(limit)), SQLValue(now)
        )
        guard let attempts = try rows.first?.int("attempts") else { return false }
        return attempts <= Int64(limit)
    }

    func spendToken(id: String, now: Date) async throws -> Bool {
        try await Self.spend(id, now: now, db) != nil
    }

    /// Marks the token `id` used if it is live; its row.
    private static func spend(_ id: String, now: Date, _ tx: any SQLExecutor) async throws -> OneTimeTokenRecord? {
        try await tx.query(
            """
            UPDATE one_time_tokens SET used_at = $2
            WHERE id = $1 AND used_at IS NULL AND superseded_at IS NULL AND expires_at > $2
            RETURNING \(tokenColumns)
            """,
            .text(id), SQLValue(now)
        ).first.flatMap { try Self.token($0) }
    }

    func changeEmail(
        userId: String, from old: String, code: String, undo: OneTimeTokenRecord, mail: [OutboxMessage], by: Provenance, now: Date
    ) async throws -> EmailChange {
        do {
            return try await db.transaction { tx in
                guard let token = try await Self.spend(code, now: now, tx), token.kind == .emailChangeCode, token.userId == userId,
                    let new = token.email
                else { throw Outcome(.codeSpent) }
                // The account's row first: racing changes of one account take turns.
                let locked = try await tx.query(
                    "UPDATE email_accounts SET user_id = user_id WHERE app_id = $1 AND email = $2 AND user_id = $3 RETURNING email",
                    .text(token.appId), .text(old), .text(userId)
                )
                guard !locked.isEmpty else { throw Outcome(.accountGone) }
                if try await tx.query(
                    "SELECT email FROM email_accounts WHERE app_id = $1 AND email = $2 AND confirmed_at IS NOT NULL", .text(token.appId), .text(new)
                ).first != nil {
                    throw Outcome(.addressTaken)
                }
                // A registration of the new address that no one confirmed: its registrant never proved the mailbox.
                _ = try await Self.deletePendingAccount(appId: token.appId, email: new, userId: nil, tx)
                try await Self.moveAddress(appId: token.appId, userId: userId, from: old, to: new, spelled: token.address ?? new, by: by, now: now, tx)
                // Links to the old address die with it; earlier undo links live on: a change must not void the
                // link that takes back an earlier one.
                try await tx.query(
                    """
                    UPDATE one_time_tokens SET superseded_at = $1
                    WHERE user_id = $2 AND used_at IS NULL AND superseded_at IS NULL AND kind <> $3
                    """,
                    SQLValue(now), .text(userId), .text(OneTimeTokenKind.emailChangeUndo.rawValue)
                )
                try await Self.insertToken(undo, tx)
                for message in mail { try await Self.insertMail(message, tx) }
                return .changed
            }
        } catch let outcome as Outcome {
            return outcome.change
        } catch StoreError.conflict {
            // A racing change (or registration) took the address between this one's check and its write.
            return .addressTaken
        }
    }

    /// Ends a transaction early, rolling it back, with what it found.
    private struct Outcome: Error {
        var change: EmailChange
        init(_ change: EmailChange) { self.change = change }
    }

    /// The user's email account of `old` and its identity take the address `new` (spelled `spelled`), proven `now`.
    private static func moveAddress(
        appId: String, userId: String, from old: String, to new: String, spelled: String, by: Provenance?, now: Date, _ tx: any SQLExecutor,
        clearingPassword: Bool = false
    ) async throws {
        try await tx.query(
            """
            UPDATE email_accounts SET email = $3, address = $4, mailbox_proven_at = $5, confirmed_at = COALESCE(confirmed_at, $5),
                contested_at = NULL
            WHERE app_id = $1 AND email = $2 AND user_id = $6
            """,
            .text(appId), .text(old), .text(new), .text(spelled), SQLValue(now), .text(userId)
        )
        if clearingPassword {
            try await tx.query(
                "UPDATE email_accounts SET password_hash = '', password_set_at = $3, password_session = NULL, password_methods = NULL WHERE app_id = $1 AND email = $2",
                .text(appId), .text(new), SQLValue(now)
            )
        }
        for row in try await tx.query(
            "SELECT id, data FROM identities WHERE user_id = $1 AND provider_type = 'local-userpass' AND external_id = $2", .text(userId), .text(old)
        ) {
            var data = try JSONColumn.decode(row.text("data"))
            data["email"] = .string(spelled)
            // The new address is a credential its session added (an undo's comes back with the account).
            try await tx.query(
                "UPDATE identities SET external_id = $2, data = $3, added_session = $4, added_methods = $5 WHERE id = $1",
                .text(try row.text("id")), .text(new), .text(try JSONColumn.encode(data)), SQLValue(by?.session),
                SQLValue(by.map { AuthenticationMethod.text($0.methods) })
            )
        }
        // The old address's failure counts go with it; the new one starts clean (its owner just proved it).
        try await tx.query("DELETE FROM login_failures WHERE account IN ($1, $2)", .text(LoginBackoff.account(app: appId, identifier: old)), .text(LoginBackoff.account(app: appId, identifier: new)))
    }

    func undoEmailChange(tokenId: String, now: Date) async throws -> (userId: String, email: String)? {
        try await db.transaction { tx in
            guard let token = try await tx.query(
                """
                UPDATE one_time_tokens SET used_at = $2
                WHERE id = $1 AND kind = $3 AND used_at IS NULL AND superseded_at IS NULL AND expires_at > $2
                RETURNING \(Self.tokenColumns)
                """,
                .text(tokenId), SQLValue(now), .text(OneTimeTokenKind.emailChangeUndo.rawValue)
            ).first.flatMap({ try Self.token($0) }), let old = token.email else { return nil }
            let userId = token.userId, appId = token.appId
            guard try await tx.query("UPDATE users SET id = id WHERE id = $1 RETURNING id", .text(userId)).first != nil else { return nil }
            // The old address is the owner's: a confirmed account of someone else there (it cannot be: only the
            // mailbox's owner confirms it) refuses; a pending registration of it goes.
            if let holder = try await tx.query("SELECT user_id FROM email_accounts WHERE app_id = $1 AND email = $2", .text(appId), .text(old)).first {
                if try holder.text("user_id") != userId {
                    guard try await !Self.deletePendingAccount(appId: appId, email: old, userId: nil, tx).isEmpty else { return nil }
                }
            }
            let spelled = token.address ?? old
            var identity: String?
            if let id = token.subject {
                identity = try await tx.query(
                    "SELECT external_id FROM identities WHERE id = $1 AND user_id = $2 AND provider_type = 'local-userpass'", .text(id), .text(userId)
                ).first.map { try $0.text("external_id") }
            }
            if let current = identity {
                if current != old {
                    try await Self.moveAddress(appId: appId, userId: userId, from: current, to: old, spelled: spelled, by: nil, now: now, tx, clearingPassword: true)
                } else {
                    try await tx.query(
                        "UPDATE email_accounts SET password_hash = '', password_set_at = $3, password_session = NULL, password_methods = NULL WHERE app_id = $1 AND email = $2",
                        .text(appId), .text(old), SQLValue(now)
                    )
                }
            } else if try await tx.query("SELECT email FROM email_accounts WHERE app_id = $1 AND email = $2", .text(appId), .text(old)).isEmpty {
                // Unlinked since: the owner gets the address back as a new email/password identity, without a password.
                try await Self.insertIdentity(
                    IdentityRecord(
                        id: Secrets.objectID(at: now), userId: userId, appId: appId, providerType: EmailPasswordService.providerType, externalId: old,
                        data: ["email": .string(spelled)], createdAt: now
                    ), tx
                )
                try await Self.insertAccount(
                    EmailAccountRecord(appId: appId, email: old, userId: userId, passwordHash: "", confirmedAt: now, mailboxProvenAt: now, address: spelled),
                    createdAt: now, tx
                )
            }
            try await Self.resetTrust(userId: userId, keeping: old, now: now, sparingUndoLinksBefore: token.createdAt, tx)
            return (userId, old)
        }
    }
}
