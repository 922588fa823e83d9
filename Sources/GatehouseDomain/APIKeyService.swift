import Foundation
import GatehouseWire
import Logging

/// The `api-key` provider: user API keys (managed by their owner with a refresh token), server API keys (managed by
/// the operator with `gatehouse apikeys`), and logging in with either.
///
/// A key is a 256-bit CSPRNG secret, shown once when it is made and stored only as its SHA-256. Each key has an
/// `api-key` identity whose id (and id within the provider) is the key's id: on its owner for a user key (so a
/// login with it is a login as the owner), and on a user of its own for a server key (profile `type` `server`).
package struct APIKeyService: Sendable {
    package let env: AuthEnvironment

    package static let providerType = "api-key"
    /// The longest key name, in characters (names are ASCII letters, digits, `_` and `-`).
    package static let maxNameLength = 64

    /// The app, if it has the provider on.
    private func enabledApp(_ app: AppSettings) throws(AuthError) -> AppSettings {
        guard app.apiKeys else { throw .providerNotEnabled(Self.providerType) }
        return app
    }

    /// Throws ``AuthError/invalidAPIKeyName(_:)`` unless `name` follows the naming rule.
    package static func validate(name: String) throws(AuthError) {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F || byte == 0x2D
        }
        guard !name.isEmpty, name.utf8.count <= maxNameLength, allowed else {
            throw .invalidAPIKeyName("API key name must be 1 to \(maxNameLength) letters, digits, '_' or '-'")
        }
    }

    // MARK: Login

    /// Logs in with a key: a user key as its owner, a server key as its server user. Unknown, disabled and deleted
    /// keys all get ``AuthError/invalidAPIKey``.
    package func login(appId: String, key secret: String) async throws -> (UserRecord, APIKeyRecord) {
        let app = try enabledApp(try env.app(appId))
        let hash = Secrets.sha256(secret)
        // Per key too (by its hash): a leaked key used from many addresses is still slowed down. The address was
        // counted with every other login (LoginService).
        try await env.checkRateLimit(.login, app: app, account: Secrets.hex(hash), countingAddress: false)
        guard let found = try await env.store.apiKeyLogin(appId: app.id, keyHash: hash),
            Secrets.constantTimeEquals(found.key.keyHash, hash), !found.key.disabled
        else { throw AuthError.invalidAPIKey }
        guard !found.user.disabled else { throw AuthError.userDisabled }
        return (found.user, found.key)
    }

    // MARK: User keys (refresh token)

    /// The caller behind a refresh token (the api_keys routes take refresh tokens, spec §3.9).
    package func caller(refreshToken: String) async throws -> SessionService.Caller {
        try await SessionService(env: env).authenticate(refreshToken, as: .refresh)
    }

    /// `POST auth/api_keys`: a new key of the caller's, with its secret (the only time it is shown).
    /// API keys one user may have.
    package static let maxKeysPerUser = 20

    /// A key as its owner sees it: never its hash; its secret only in the answer to its creation.
    package struct KeyView: Sendable, Hashable {
        package var id: String
        package var name: String
        /// The secret, only when the key was just made.
        package var secret: String?
        package var disabled: Bool
    }

    package func create(caller: SessionService.Caller, name: String) async throws -> KeyView {
        let app = try enabledApp(caller.app)
        // A key cannot breed keys: a leaked key (or its session) must not outlive its own revocation.
        let caller = try caller.manager(to: "create API keys").caller
        // A key is a credential that outlives a password reset: adding one asks for a recent proof, as every
        // credential does.
        try await SessionGate(env: env).requireRecentProof(caller)
        try Self.validate(name: name)
        let (key, secret, _) = try await insert(app: app, owner: caller.user, name: name, addedBy: Provenance(adding: nil, by: caller))
        env.logger.info("API key created", metadata: ["app": "\(app.id)", "user": "\(caller.user.id)", "key": "\(key.id)"])
        await env.audit(.apiKeyCreated, app: app.id, user: caller.user.id, detail: ["apiKey": key.id, "name": key.name])
        await AccountService(env: env).notify(
            .credentialAdded, what: AccountService.describe(providerType: Self.providerType, detail: key.name), user: caller.user.id, app: app
        )
        return KeyView(id: key.id, name: key.name, secret: secret, disabled: key.disabled)
    }

    /// `GET auth/api_keys`: the caller's keys, oldest first, without secrets.
    package func list(caller: SessionService.Caller) async throws -> [KeyView] {
        let app = try enabledApp(caller.app)
        return try await env.store.apiKeys(appId: app.id, userId: caller.user.id).map(Self.view)
    }

    /// `GET auth/api_keys/{id}`.
    package func fetch(caller: SessionService.Caller, id: String) async throws -> KeyView {
        Self.view(try await owned(caller: caller, id: id).1)
    }

    /// `DELETE auth/api_keys/{id}`: the key, its identity and the sessions logged in with it.
    package func delete(caller: SessionService.Caller, id: String) async throws {
        let (app, key) = try await owned(caller: try caller.manager(to: "delete API keys").caller, id: id)
        guard try await env.store.deleteAPIKey(appId: app.id, id: key.id, now: env.clock.now) else { throw AuthError.apiKeyNotFound }
        env.logger.info("API key deleted", metadata: ["app": "\(app.id)", "key": "\(key.id)"])
        await env.audit(.apiKeyDeleted, app: app.id, user: caller.user.id, detail: ["apiKey": key.id])
    }

    /// `PUT auth/api_keys/{id}/enable` and `…/disable`. Disabling ends the sessions logged in with the key.
    package func setDisabled(caller: SessionService.Caller, id: String, disabled: Bool) async throws {
        // A key session could otherwise turn its own key back on after the owner disabled another, or the reverse.
        let manager = try caller.manager(to: "enable or disable API keys")
        try await setDisabled(manager, key: try await owned(caller: manager.caller, id: id).1, disabled: disabled)
    }

    /// ``setDisabled(caller:id:disabled:)`` for `key` as the request read it, which other requests may have changed
    /// since (it must be the manager's own, of an app with the provider on). Turning a key back on adds a way in
    /// again, as creating one does: it asks for a recent proof, the owner hears of it, and its write is held to the
    /// caller's sessions (``OwnerHold``), so that one read before the owner's reset does not land after it. That held
    /// write is the only one that enables a key: a key read as on is left as it is now (disabled since, it stays so,
    /// as if this request had come first). Disabling is the owner's remedy for a key they did not make: it asks for
    /// nothing.
    package func setDisabled(_ manager: AccountManager, key: APIKeyRecord, disabled: Bool) async throws {
        let caller = manager.caller
        let app = try enabledApp(caller.app)
        guard key.appId == app.id, key.userId == caller.user.id else { throw AuthError.apiKeyNotFound }
        if !disabled && !key.disabled { return }
        let change: APIKeySwitch
        if disabled {
            change = try await env.store.setAPIKeyDisabled(appId: app.id, id: key.id, disabled: true, owner: nil, now: env.clock.now)
        } else {
            let gate = SessionGate(env: env)
            let proof = try await gate.requireRecentProof(caller)
            change = try await gate.holdingOwner(caller, proof) { owner in
                try await env.store.setAPIKeyDisabled(appId: app.id, id: key.id, disabled: false, owner: owner, now: env.clock.now)
            }
        }
        // Of two requests turning the key on (or off) at once, the one that changed it is audited and tells the owner.
        guard change != .notFound else { throw AuthError.apiKeyNotFound }
        guard change == .changed else { return }
        await env.audit(disabled ? .apiKeyDisabled : .apiKeyEnabled, app: app.id, user: caller.user.id, detail: ["apiKey": key.id])
        if !disabled {
            let what = AccountService.describe(providerType: Self.providerType, detail: "\(key.name), disabled before,")
            await AccountService(env: env).notify(.credentialAdded, what: what, user: caller.user.id, app: app)
        }
    }

    /// The caller's key `id`; another user's key, a server key or an unknown id are all ``AuthError/apiKeyNotFound``.
    private func owned(caller: SessionService.Caller, id: String) async throws -> (AppSettings, APIKeyRecord) {
        let app = try enabledApp(caller.app)
        guard Secrets.isObjectID(id), let key = try await env.store.apiKey(appId: app.id, id: id.lowercased()), key.userId == caller.user.id else {
            throw AuthError.apiKeyNotFound
        }
        return (app, key)
    }

    // MARK: Server keys (operator)

    /// A new server key, its secret, and the id of the user it logs in as.
    package func createServerKey(appId: String, name: String) async throws -> (key: APIKeyRecord, secret: String, userId: String) {
        let app = try env.app(appId)
        try Self.validate(name: name)
        let made = try await insert(app: app, owner: nil, name: name)
        env.logger.info("server API key created", metadata: ["app": "\(app.id)", "key": "\(made.key.id)"])
        await env.audit(.apiKeyCreated, app: app.id, user: made.userId, detail: ["apiKey": made.key.id, "name": name, "server": "true"])
        return made
    }

    /// The app's server keys, oldest first, with when each was made.
    package func serverKeys(appId: String) async throws -> [APIKeyRecord] {
        let app = try env.app(appId)
        return try await env.store.apiKeys(appId: app.id, userId: nil)
    }

    /// Deletes (with its user) or enables/disables a server key. False when the app has no server key `id`.
    package func deleteServerKey(appId: String, id: String) async throws -> Bool {
        let app = try env.app(appId)
        guard try await serverKey(app: app, id: id) != nil else { return false }
        guard try await env.store.deleteAPIKey(appId: app.id, id: id.lowercased(), now: env.clock.now) else { return false }
        await env.audit(.apiKeyDeleted, app: app.id, detail: ["apiKey": id.lowercased(), "server": "true"])
        return true
    }

    package func setServerKeyDisabled(appId: String, id: String, disabled: Bool) async throws -> Bool {
        let app = try env.app(appId)
        guard try await serverKey(app: app, id: id) != nil else { return false }
        switch try await env.store.setAPIKeyDisabled(appId: app.id, id: id.lowercased(), disabled: disabled, owner: nil, now: env.clock.now) {
        case .notFound: return false
        case .unchanged: return true
        case .changed:
            await env.audit(disabled ? .apiKeyDisabled : .apiKeyEnabled, app: app.id, detail: ["apiKey": id.lowercased(), "server": "true"])
            return true
        }
    }

    private func serverKey(app: AppSettings, id: String) async throws -> APIKeyRecord? {
        guard Secrets.isObjectID(id), let key = try await env.store.apiKey(appId: app.id, id: id.lowercased()), key.userId == nil else { return nil }
        return key
    }

    // MARK: Shared

    /// Stores a new key of `owner` (a server key with a new server user when nil) and its identity; returns the
    /// record, the secret and the id of the user the key logs in as.
    private func insert(
        app: AppSettings, owner: UserRecord?, name: String, addedBy: Provenance? = nil
    ) async throws -> (key: APIKeyRecord, secret: String, userId: String) {
        let now = env.clock.now
        let secret = Secrets.token()
        let key = APIKeyRecord(
            id: Secrets.objectID(at: now), appId: app.id, userId: owner?.id, name: name, keyHash: Secrets.sha256(secret), disabled: false,
            createdAt: now
        )
        var serverUser: UserRecord?
        if owner == nil {
            serverUser = UserRecord(id: Secrets.objectID(at: now), appId: app.id, createdAt: now, disabled: false, customData: [:])
        }
        // The identity's id is the key's, so that the profile lists the key's id (as App Services does).
        let identity = IdentityRecord(
            id: key.id, userId: owner?.id ?? serverUser!.id, appId: app.id, providerType: Self.providerType,
            externalId: key.id,
            // A server user's profile shows its key's name; a user key adds nothing to its owner's profile.
            data: owner == nil ? ["name": .string(name)] : [:],
            createdAt: now, addedBy: addedBy
        )
        // The limit and the owner's sessions are checked in the write (GatehouseStore.createAPIKey), so that requests
        // at once cannot pass the limit and a key asked for as every session ends is not written after.
        let written: APIKeyWrite
        do {
            written = try await env.store.createAPIKey(
                key, identity: identity, serverUser: serverUser, ownerEpoch: addedBy == nil ? nil : owner?.sessionEpoch, limit: Self.maxKeysPerUser
            )
        } catch StoreError.conflict {
            throw AuthError.apiKeyAlreadyExists
        } catch StoreError.sessionEnded {
            throw AuthError.invalidSession("invalid session")
        }
        guard written == .created else {
            throw AuthError.apiKeyRefused("a user can have at most \(Self.maxKeysPerUser) API keys; delete one first")
        }
        return (key, secret, identity.userId)
    }

    package static func view(_ key: APIKeyRecord) -> KeyView {
        KeyView(id: key.id, name: key.name, secret: nil, disabled: key.disabled)
    }

    /// True when the user is the server user of a server key: its profile `type` is then `server`.
    package static func isServerUser(_ identities: [IdentityRecord], store: any GatehouseStore) async throws -> Bool {
        for identity in identities where identity.providerType == providerType {
            if let key = try await store.apiKey(appId: identity.appId, id: identity.externalId), key.userId == nil { return true }
        }
        return false
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
