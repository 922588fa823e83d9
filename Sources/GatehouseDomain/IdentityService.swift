import Foundation
import Logging

/// Users found by, and linked to, the identities providers vouch for. The same external identity always finds the
/// same user.
package struct IdentityService: Sendable {
    package let env: AuthEnvironment

    /// The user of `identity`, created on its first login. Its profile data is refreshed from the provider's.
    package func logIn(_ identity: ExternalIdentity, app: AppSettings) async throws -> UserRecord {
        for _ in 0..<2 {
            if let existing = try await env.store.identity(appId: app.id, providerType: identity.providerType, externalId: identity.externalId) {
                if existing.data != identity.data { try await env.store.updateIdentityData(id: existing.id, data: identity.data) }
                guard let user = try await env.store.user(id: existing.userId) else { throw AuthError.invalidCredentials }
                guard !user.disabled else { throw AuthError.userDisabled }
                return user
            }
            let now = env.clock.now
            let user = UserRecord(id: Secrets.objectID(at: now), appId: app.id, createdAt: now, disabled: false, customData: [:])
            do {
                try await env.store.createUser(user, identity: record(identity, userId: user.id, app: app))
                env.logger.info("user created", metadata: ["app": "\(app.id)", "user": "\(user.id)", "provider": "\(identity.providerType)"])
                return user
            } catch StoreError.conflict {
                // Two first logins with one identity raced, and the other one created the user: find it.
                continue
            }
        }
        throw AuthError.invalidCredentials
    }

    /// Adds `identity` to the caller's user (`login?link=true`). An identity that is already the caller's is fine; one
    /// of another user is refused, except an email/password account that was registered but never logged in: it
    /// is no one's user yet, so it moves to the caller (and its empty user goes), as App Services does.
    ///
    /// The identity is written only while the caller's session holds: a link asked for as every session of the user
    /// ends (a reset, the first proof of the mailbox) gets ``AuthError/invalidSession(_:)`` and adds nothing; one
    /// that passed the recent proof only as an anonymous user (`proof`) gets ``AuthError/reauthenticationRequired``
    /// if the user gained another way in meanwhile.
    package func link(_ identity: ExternalIdentity, to manager: AccountManager, proof: SessionGate.RecentProof) async throws {
        try await SessionGate(env: env).holdingOwner(manager.caller, proof) { owner in
            try await attach(identity, to: manager.caller, owner: owner)
        }
    }

    private func attach(_ identity: ExternalIdentity, to caller: SessionService.Caller, owner: OwnerHold) async throws {
        let app = caller.app
        for _ in 0..<2 {
            if let existing = try await env.store.identity(appId: app.id, providerType: identity.providerType, externalId: identity.externalId) {
                if existing.userId == caller.user.id { return }
                if identity.providerType == EmailPasswordService.providerType,
                    try await env.store.adoptIdentity(
                        id: existing.id, from: existing.userId, to: caller.user.id, owner: owner, at: env.clock.now,
                        addedBy: Self.provenance(identity, caller: caller)
                    )
                {
                    env.logger.info("identity linked", metadata: ["app": "\(app.id)", "user": "\(caller.user.id)", "provider": "\(identity.providerType)"])
                    await linked(identity, to: caller)
                    return
                }
                throw AuthError.identityInUse
            }
            do {
                var record = record(identity, userId: caller.user.id, app: app)
                record.addedBy = Self.provenance(identity, caller: caller)
                try await env.store.addIdentity(record, owner: owner)
                env.logger.info("identity linked", metadata: ["app": "\(app.id)", "user": "\(caller.user.id)", "provider": "\(identity.providerType)"])
                await linked(identity, to: caller)
                return
            } catch StoreError.conflict {
                continue
            }
        }
        throw AuthError.identityInUse
    }

    /// Tells the account's addresses that a way in was added (the linked address included, which is now one of them).
    private func linked(_ identity: ExternalIdentity, to caller: SessionService.Caller) async {
        let label = identity.providerType == EmailPasswordService.providerType ? identity.externalId : nil
        await AccountService(env: env).notify(
            .credentialAdded, what: AccountService.describe(providerType: identity.providerType, detail: label), user: caller.user.id, app: caller.app
        )
    }

    /// A linked identity's provenance: the linking session, and the credential it proved to link it (a password, or
    /// a provider's word).
    private static func provenance(_ identity: ExternalIdentity, caller: SessionService.Caller) -> Provenance {
        Provenance(adding: identity.providerType == EmailPasswordService.providerType ? .password : .federated, by: caller)
    }

    private func record(_ identity: ExternalIdentity, userId: String, app: AppSettings) -> IdentityRecord {
        let now = env.clock.now
        return IdentityRecord(
            id: Secrets.objectID(at: now), userId: userId, appId: app.id, providerType: identity.providerType,
            externalId: identity.externalId, data: identity.data, createdAt: now
        )
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
