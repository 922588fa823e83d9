import Foundation
import GatehouseDomain

/// Where each kind of credential lives (``CredentialKind``). Every rule that acts on all of a user's credentials —
/// listing them, the mailbox owner's trust reset, deleting the user, export — switches over the kinds here or in the
/// transfer, so a new kind is a compile error at each until it says where it lives and what becomes of it.
extension SQLStore {
    func credentials(userId: String) async throws -> [Credential] {
        var found: [Credential] = []
        for kind in CredentialKind.allCases {
            found += try await Self.credentials(kind, userId: userId, db)
        }
        return found
    }

    static func credentials(_ kind: CredentialKind, userId: String, _ tx: any SQLExecutor) async throws -> [Credential] {
        switch kind {
        case .mailbox:
            return try await tx.query(
                """
                SELECT \(columns(accountColumns, of: "email_accounts")), email_accounts.created_at AS account_created_at,
                    \(columns(identityColumns, of: "identities", as: "identity_"))
                FROM email_accounts LEFT JOIN identities ON identities.user_id = email_accounts.user_id
                    AND identities.provider_type = 'local-userpass' AND identities.external_id = email_accounts.email
                WHERE email_accounts.user_id = $1 ORDER BY email_accounts.created_at, email_accounts.email
                """,
                .text(userId)
            ).map { row in
                let account = try Self.account(row)
                let identity = try row.optionalText("identity_id") == nil ? nil : try Self.identity(row, prefix: "identity_")
                return Credential(
                    kind: .mailbox, id: account.email, label: account.recipient, addedAt: try identity?.createdAt ?? row.date("account_created_at"),
                    addedBy: identity?.addedBy, proven: account.mailboxProvenAt != nil
                )
            }
        case .password:
            return try await tx.query(
                "SELECT \(accountColumns), created_at FROM email_accounts WHERE user_id = $1 AND password_hash <> '' ORDER BY created_at, email",
                .text(userId)
            ).map { row in
                let account = try Self.account(row)
                return Credential(
                    kind: .password, id: account.email, label: account.recipient, addedAt: try account.passwordSetAt ?? row.date("created_at"),
                    addedBy: account.passwordSetBy
                )
            }
        case .identity:
            return try await tx.query(
                """
                SELECT \(identityColumns) FROM identities
                WHERE user_id = $1 AND provider_type NOT IN ('local-userpass', 'api-key') ORDER BY created_at, id
                """,
                .text(userId)
            ).map { row in
                let identity = try Self.identity(row)
                return Credential(kind: .identity, id: identity.id, label: identity.providerType, addedAt: identity.createdAt, addedBy: identity.addedBy)
            }
        case .apiKey:
            return try await tx.query(
                """
                SELECT \(columns(identityColumns, of: "identities")), api_keys.name AS key_name FROM identities
                JOIN api_keys ON api_keys.app_id = identities.app_id AND api_keys.id = identities.external_id
                WHERE identities.user_id = $1 AND identities.provider_type = 'api-key' ORDER BY identities.created_at, identities.id
                """,
                .text(userId)
            ).map { row in
                let identity = try Self.identity(row)
                return Credential(kind: .apiKey, id: identity.externalId, label: try row.text("key_name"), addedAt: identity.createdAt, addedBy: identity.addedBy)
            }
        }
    }

    /// Removes the user's credentials of `kind`, all of them, or all but the mailbox `keeping` and what belongs to it
    /// (the trust reset of its owner's proof).
    static func discard(_ kind: CredentialKind, userId: String, keeping address: String?, _ tx: any SQLExecutor) async throws {
        switch kind {
        case .mailbox:
            if let address {
                try await tx.query("DELETE FROM email_accounts WHERE user_id = $1 AND email <> $2", .text(userId), .text(address))
                try await tx.query(
                    "DELETE FROM identities WHERE user_id = $1 AND provider_type = 'local-userpass' AND external_id <> $2", .text(userId), .text(address)
                )
            } else {
                try await tx.query("DELETE FROM email_accounts WHERE user_id = $1", .text(userId))
                try await tx.query("DELETE FROM identities WHERE user_id = $1 AND provider_type = 'local-userpass'", .text(userId))
            }
        case .password:
            // On its email account's row: it goes with its mailbox, and the proven mailbox's password is what the
            // proof decides (``MailboxProof``), set by the proof's own statement.
            break
        case .identity:
            try await tx.query("DELETE FROM identities WHERE user_id = $1 AND provider_type NOT IN ('local-userpass', 'api-key')", .text(userId))
        case .apiKey:
            try await deleteAPIKeys(ofUser: userId, tx)
            try await tx.query("DELETE FROM identities WHERE user_id = $1 AND provider_type = 'api-key'", .text(userId))
        }
    }
}
