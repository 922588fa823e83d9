import CoreMetrics
import Foundation
import GatehouseArgon2
import GatehouseWire
import Logging

/// What every domain operation needs: storage, time, hashing, keys and the configuration.
package struct AuthEnvironment: Sendable {
    package var store: any GatehouseStore
    package var clock: GatehouseClock
    package var hasher: any PasswordHasher
    package var keys: SigningKeys
    package var configuration: GatehouseConfiguration
    /// The externally reachable base URL, with the real port when the configured one was 0.
    package var publicURLBox: PublicURL
    package var logger: Logger
    /// Email templates by app id.
    package var templates: [String: MailTemplates]
    /// Outbound HTTP: identity providers' keys and APIs, webhooks.
    package var outbound: any OutboundHTTP
    /// Identity providers' signing keys.
    package var jwks: JWKSCache
    /// The configured `custom-token` keys of each app, parsed.
    package var customTokenKeys: [String: [JWTVerificationKey]] = [:]
    /// Closures standing in for webhooks (embedding programs).
    package var functions: FunctionHandlers = FunctionHandlers()
    /// Audit rows, written in groups under load.
    package var auditWriter: AuditWriter
    /// Rate-limit counts: shared through the database, most hits admitted without a write.
    package var rateLimiter: RateLimiter
    /// Work requests start and do not wait for.
    package var background = BackgroundWork()
    /// Where the domain's metrics go (see ``countAuthEvent(_:app:detail:)``): the server's own registry, or nowhere.
    package var metrics = AuthEventCounters.none
    /// Who is asking, for rate limits and the audit log: set per request (``serving(_:)``); empty for the server's
    /// own work (the command line, background delivery).
    package var origin = RequestOrigin()

    /// This environment for one request from `origin`: the services a façade builds with it count that client's
    /// limits and record its address in the audit log.
    package func serving(_ origin: RequestOrigin) -> AuthEnvironment {
        var copy = self
        copy.origin = origin
        return copy
    }

    package func templates(for app: AppSettings) -> MailTemplates { templates[app.id]! }

    package var publicURL: String { publicURLBox.value }

    /// The app with `id`, or ``AuthError/appNotFound(_:)``.
    package func app(_ id: String) throws(AuthError) -> AppSettings {
        guard let app = configuration.app(id: id) else { throw .appNotFound(id) }
        return app
    }

    package init(
        store: any GatehouseStore, clock: GatehouseClock, hasher: any PasswordHasher, keys: SigningKeys,
        configuration: GatehouseConfiguration, publicURLBox: PublicURL, logger: Logger,
        templates: [String: MailTemplates], outbound: any OutboundHTTP, jwks: JWKSCache,
        customTokenKeys: [String: [JWTVerificationKey]] = [:], functions: FunctionHandlers = FunctionHandlers(),
        auditWriter: AuditWriter
    ) {
        self.store = store
        self.clock = clock
        self.hasher = hasher
        self.keys = keys
        self.configuration = configuration
        self.publicURLBox = publicURLBox
        self.logger = logger
        self.templates = templates
        self.outbound = outbound
        self.jwks = jwks
        self.customTokenKeys = customTokenKeys
        self.functions = functions
        self.auditWriter = auditWriter
        self.rateLimiter = RateLimiter(store: store)
    }
}

/// How a session began, stored with it (``SessionRecord/kind``). The kind decides what the session may do.
package enum SessionKind: String, Sendable, Hashable, CaseIterable {
    /// Started by proving a first-party credential: a password, an email code, an identity provider. May manage the
    /// account.
    case firstParty = "first-party"
    /// Started with a user or server API key: may read the profile, refresh and call functions, but never link,
    /// delete the user, end other sessions or manage keys. A leaked key must not become a way to keep the account.
    case apiKey = "api-key"
    /// An anonymous login, which made its user: it may manage what it has, and link to upgrade itself.
    case anonymous

    package var mayManageAccount: Bool { self != .apiKey }
}

/// Proof that a caller may change its account (``SessionService/Caller/manager(to:)`` is the only way to make one).
package struct AccountManager: Sendable {
    package let caller: SessionService.Caller
    fileprivate init(caller: SessionService.Caller) { self.caller = caller }
}

/// The result of a successful login.
package struct LoginResult: Sendable, Hashable {
    package var accessToken: String
    package var refreshToken: String
    package var userId: String
    package var deviceId: String

    package init(accessToken: String, refreshToken: String, userId: String, deviceId: String) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.userId = userId
        self.deviceId = deviceId
    }
}

/// Sessions and the tokens that stand for them.
package struct SessionService: Sendable {
    package let env: AuthEnvironment

    /// An access token for `user` in `session`, with the user's current custom data, and how the session was
    /// proven: `amr` (``SessionRecord/methods``, omitted when nothing was proven: an anonymous session, or one made
    /// before sessions recorded it), `auth_time` (its last first-party proof, else its start) and `sid`.
    package func accessToken(for user: UserRecord, session: SessionRecord, app: AppSettings) throws -> String {
        let now = env.clock.now
        let key = env.keys.current
        var claims = TokenClaims(
            sub: user.id, typ: .access, sid: session.id, aud: app.id, iss: env.publicURL,
            iat: Int64(now.timeIntervalSince1970), exp: Int64(now.timeIntervalSince1970) + Int64(app.accessTokenTTL),
            baasDeviceId: session.deviceId, userData: user.customData, jti: nil
        )
        claims.amr = session.methods.isEmpty ? nil : session.methods.map(\.rawValue)
        claims.authTime = Int64((session.provenAt ?? session.createdAt).timeIntervalSince1970)
        return try JWT.sign(claims, key: key)
    }

    /// An authenticated caller: the user and session behind a valid token.
    package struct Caller: Sendable {
        package var user: UserRecord
        package var session: SessionRecord
        package var app: AppSettings

        /// How the session began, which decides what it may do (the security model's "session kinds have powers").
        package var kind: SessionKind { session.kind }

        /// The caller as one who may change the account, or ``AuthError/forbidden(_:)`` for a session that may not.
        /// Every operation that links or removes an identity, deletes the user, ends other sessions or manages API
        /// keys takes an ``AccountManager``, so it cannot run for a session without that power.
        package func manager(to action: String) throws(AuthError) -> AccountManager {
            guard kind.mayManageAccount else {
                throw .forbidden("a session logged in with an API key cannot \(action); log in with a password or another provider")
            }
            return AccountManager(caller: self)
        }

        package init(user: UserRecord, session: SessionRecord, app: AppSettings) {
            self.user = user
            self.session = session
            self.app = app
        }
    }

    /// Verifies a bearer token of the expected kind: signature, expiry, the session (alive, unexpired, and for
    /// refresh tokens the secret, through ``SessionRefresh``) and the user. Any failure is
    /// ``AuthError/invalidSession(_:)``.
    package func authenticate(_ token: String, as kind: TokenClaims.Kind, refreshMode: SessionRefresh.Mode = .keep) async throws -> Caller {
        var app: AppSettings?
        do {
            return try await verify(token, as: kind, app: &app, refreshMode: refreshMode)
        } catch let refusal as SessionRefresh.Refusal {
            if refusal != .replayed {
                try await SessionRefresh(env: env).refused(refusal.reason, counted: refusal != .notValid, app: app, via: nil)
            }
            throw AuthError.invalidSession(Self.message(refusal))
        } catch AuthError.invalidSession(let reason) where kind == .refresh {
            // Every refused refresh token is recorded: under the app it was issued for once its signature is known
            // good, else server-wide. One with a good signature was looked up: it counts against the address's
            // refresh limit as a good one does (with its session).
            try await SessionRefresh(env: env).refused(reason, counted: false, app: app, via: nil)
            throw AuthError.invalidSession(reason)
        }
    }

    /// The Client API's words for a refused refresh token.
    private static func message(_ refusal: SessionRefresh.Refusal) -> String {
        switch refusal {
        case .notValid, .ended(.revoked), .ended(.expired), .ended(.userGone): "invalid session"
        case .ended(.clientRemoved): "invalid session: native auth is off for this client"
        case .alreadyUsed, .replayed: "invalid session: the refresh token was already used"
        case .ended(.idle): "invalid session: unused for too long, log in again"
        case .ended(.userDisabled): "invalid session: user disabled"
        }
    }

    /// ``authenticate(_:as:)`` for an access token, with the user's identities read in the same statement as the
    /// session and the user: the profile's one read.
    private func authenticateWithIdentities(_ accessToken: String) async throws -> (caller: Caller, identities: [IdentityRecord]) {
        var app: AppSettings?
        return try await verify(accessToken, as: .access, app: &app, identities: true)
    }

    private func verify(
        _ token: String, as kind: TokenClaims.Kind, app verifiedApp: inout AppSettings?, refreshMode: SessionRefresh.Mode
    ) async throws -> Caller {
        try await verify(token, as: kind, app: &verifiedApp, identities: false, refreshMode: refreshMode).caller
    }

    private func verify(
        _ token: String, as kind: TokenClaims.Kind, app verifiedApp: inout AppSettings?, identities withIdentities: Bool,
        refreshMode: SessionRefresh.Mode = .keep
    ) async throws -> (caller: Caller, identities: [IdentityRecord]) {
        if kind == .refresh, let presented = OpaqueToken(token) {
            return (try await verifyNativeRefreshToken(presented, app: &verifiedApp, mode: refreshMode), [])
        }
        let now = env.clock.now
        await env.keys.refreshIfNeeded(from: env.store, now: now)
        let claims: TokenClaims
        do {
            claims = try env.keys.verify(token)
        } catch where error == .unknownKey {
            // A key this instance has not read yet (`keys rotate` on another instance): read the keys again, once.
            await env.keys.refreshIfNeeded(from: env.store, now: now, kid: JWT.kid(token))
            do {
                claims = try env.keys.verify(token)
            } catch {
                throw AuthError.invalidSession(error.description)
            }
        } catch {
            throw AuthError.invalidSession(error.description)
        }
        guard claims.typ == kind else { throw AuthError.invalidSession(TokenError.wrongKind(expected: kind).description) }
        guard claims.exp > Int64(now.timeIntervalSince1970) else {
            throw AuthError.invalidSession(kind == .access ? "invalid session: access token expired" : "invalid session: refresh token expired")
        }
        guard let app = env.configuration.app(id: claims.aud) else { throw AuthError.invalidSession("invalid session: unknown app") }
        verifiedApp = app
        let found = withIdentities
            ? try await env.store.sessionWithUserAndIdentities(id: claims.sid)
            : try await env.store.sessionWithUser(id: claims.sid).map { ($0.session, $0.user, []) }
        guard let (session, user, identities) = found, session.userId == claims.sub else {
            throw AuthError.invalidSession("invalid session")
        }
        if kind == .refresh {
            guard let secret = claims.jti else { throw AuthError.invalidSession("invalid session") }
            let accepted = try await SessionRefresh(env: env).accept(
                .init(clientAPISecret: secret), session: session, user: user, app: app, mode: refreshMode, via: "client api"
            )
            return (Caller(user: accepted.user, session: accepted.session, app: app), identities)
        }
        return (try caller(session: session, user: user, app: app), identities)
    }

    /// A native-auth refresh token presented to the Client API (its session, logout and API-key routes): the same
    /// session, so the same user in both protocols. Only the current secret is accepted; the Client API does not
    /// rotate it. A spent one presented after the reuse window ends the session, as it does at the native `/token`;
    /// signing out (`mode` ``SessionRefresh/Mode/signOut``) takes any secret of the session.
    private func verifyNativeRefreshToken(
        _ presented: OpaqueToken, app verifiedApp: inout AppSettings?, mode: SessionRefresh.Mode
    ) async throws -> Caller {
        guard let (session, user) = try await env.store.sessionWithUser(id: presented.id), session.clientId != nil,
            let app = env.configuration.app(id: session.appId)
        else { throw AuthError.invalidSession("invalid session") }
        verifiedApp = app
        let accepted = try await SessionRefresh(env: env).accept(.init(presented), session: session, user: user, app: app, mode: mode, via: "client api")
        return Caller(user: accepted.user, session: accepted.session, app: app)
    }

    /// The caller behind a verified access token's session, if the session and its user may still be used.
    private func caller(session: SessionRecord, user: UserRecord?, app: AppSettings) throws(AuthError) -> Caller {
        switch Self.problem(with: session, user: user, app: app, now: env.clock.now, refreshing: false) {
        case nil: break
        case .revoked?, .expired?, .userGone?: throw AuthError.invalidSession("invalid session")
        case .idle?: throw AuthError.invalidSession("invalid session: unused for too long, log in again")
        case .userDisabled?: throw AuthError.invalidSession("invalid session: user disabled")
        case .clientRemoved?: throw AuthError.invalidSession("invalid session: native auth is off for this client")
        }
        guard let user else { throw AuthError.invalidSession("invalid session") }
        return Caller(user: user, session: session, app: app)
    }

    /// Why a session cannot be used now. Both protocols ask this one question, each answering in its envelope.
    package enum Problem: Sendable, Hashable {
        /// Signed out, reset, revoked by a replay, its key disabled, its user disabled or logged out everywhere.
        case revoked
        /// Past its `refreshTokenTTL`.
        case expired
        /// Unused longer than the app's `sessionIdleTimeout` (asked when refreshing).
        case idle
        case userGone
        case userDisabled
        /// A native session of a client the app no longer configures (or with native auth off): as at the native API,
        /// such a client has no sessions — neither its refresh tokens nor its access tokens work (they do again once
        /// it is configured again, unless they ended meanwhile). Its sign-out still ends it (``SessionRefresh/Mode/signOut``).
        case clientRemoved
    }

    /// The first reason `session` (of `user`, nil when the user is gone) cannot be used at `now`, or nil.
    package static func problem(with session: SessionRecord, user: UserRecord?, app: AppSettings, now: Date, refreshing: Bool) -> Problem? {
        if session.revokedAt != nil { return .revoked }
        if session.expiresAt <= now { return .expired }
        if refreshing, isIdle(session, app: app, now: now) { return .idle }
        guard let user else { return .userGone }
        if user.disabled { return .userDisabled }
        // Last: a session with no other problem may still be signed out when this is its only one.
        if let clientId = session.clientId, !(app.nativeAuth.map { $0.enabled && $0.clientIds.contains(clientId) } ?? false) {
            return .clientRemoved
        }
        return nil
    }

    /// Whether `session` has gone unused longer than the app's `sessionIdleTimeout`.
    package static func isIdle(_ session: SessionRecord, app: AppSettings, now: Date) -> Bool {
        app.sessionIdleTimeout > 0 && now.timeIntervalSince(session.lastActiveAt) > TimeInterval(app.sessionIdleTimeout)
    }

    /// `POST auth/session`: a fresh access token (with current custom data) for a valid refresh token.
    package func refresh(_ refreshToken: String) async throws -> String {
        let caller = try await authenticate(refreshToken, as: .refresh)
        await env.auditRefresh(app: caller.app.id, user: caller.user.id, session: caller.session.id)
        return try accessToken(for: caller.user, session: caller.session, app: caller.app)
    }

    /// `DELETE auth/session`: revokes the refresh token's session at once — for a native session, whichever of its
    /// secrets is presented (``SessionRefresh/Mode/signOut``).
    package func logOut(_ refreshToken: String) async throws {
        // The presentation itself ends the session (``SessionRefresh/Mode/signOut``).
        _ = try await authenticate(refreshToken, as: .refresh, refreshMode: .signOut)
    }

    /// A user's profile: what `GET auth/profile` shows.
    package struct Profile: Sendable, Hashable {
        package struct Identity: Sendable, Hashable {
            /// ``SessionService/profileId(of:)``.
            package var id: String
            package var providerType: String
            /// ``SessionService/providerId(appId:provider:)``.
            package var providerId: String
        }

        package var userId: String
        /// ``SessionService/domainId(appId:)``.
        package var domainId: String
        package var identities: [Identity]
        /// Profile data merged from the identities, the oldest's first.
        package var data: [String: JSONValue]
        /// The user of a server API key (App Services' profile `type` `server`).
        package var isServerUser: Bool
    }

    /// `GET auth/profile`.
    package func profile(_ accessToken: String) async throws -> Profile {
        let (caller, identities) = try await authenticateWithIdentities(accessToken)
        var data: [String: JSONValue] = [:]
        for identity in identities {
            data.merge(identity.data) { existing, _ in existing }
        }
        return Profile(
            userId: caller.user.id,
            domainId: Self.domainId(appId: caller.app.id),
            identities: identities.map {
                .init(id: Self.profileId(of: $0), providerType: $0.providerType, providerId: Self.providerId(appId: $0.appId, provider: $0.providerType))
            },
            data: data,
            isServerUser: try await APIKeyService.isServerUser(identities, store: env.store)
        )
    }

    /// `DELETE auth/delete`: removes the user with every identity and session, and mails the account's addresses.
    ///
    /// Like a credential change it asks for a recent proof of the session
    /// (``SessionGate/requireRecentProof(_:exemptingAnonymousUsers:)``): it cannot be undone, and a stolen refresh token
    /// (good for 60 days) must not be enough. An anonymous user (one never upgraded) may always delete itself: it has
    /// nothing to prove again — checked again inside the deletion, so that a stale session racing the upgrade never
    /// deletes the upgraded user.
    package func deleteUser(_ accessToken: String) async throws {
        let caller = try await authenticate(accessToken, as: .access).manager(to: "delete the user").caller
        let gate = SessionGate(env: env)
        let proof = try await gate.requireRecentProof(caller, exemptingAnonymousUsers: true)
        let notices = try await AccountService(env: env).notices(.accountDeleted, user: caller.user.id, app: caller.app)
        try await gate.holdingOwner(caller, proof) { owner in
            try await env.store.deleteUser(id: caller.user.id, notices: notices, owner: owner)
        }
        env.logger.info("user deleted", metadata: ["app": "\(caller.app.id)", "user": "\(caller.user.id)"])
        await env.audit(.userDeleted, app: caller.app.id, user: caller.user.id)
    }

    /// `DELETE auth/sessions` (a Gatehouse extension): with an access token, ends every session of its user.
    package func logOutEverywhere(_ accessToken: String) async throws {
        let caller = try await authenticate(accessToken, as: .access).manager(to: "log the user out everywhere").caller
        let revoked = try await env.store.revokeAllSessions(userId: caller.user.id, now: env.clock.now)
        env.logger.info("logged out everywhere", metadata: ["app": "\(caller.app.id)", "user": "\(caller.user.id)", "sessions": "\(revoked)"])
        await env.audit(.logoutEverywhere, app: caller.app.id, user: caller.user.id, detail: ["sessions": "\(revoked)"])
    }

    /// The id a profile shows for `identity`. As App Services: an external provider's identity is known by that
    /// provider's id for the user (the JWT's `sub`, the Facebook user id); email/password and anonymous identities
    /// by their own ObjectId.
    package static func profileId(of identity: IdentityRecord) -> String {
        identity.providerType == EmailPasswordService.providerType ? identity.id : identity.externalId
    }

    /// A stable 24-hex id for an app's provider configuration (App Services' `provider_id`).
    package static func providerId(appId: String, provider: String) -> String {
        stableId("provider:\(appId):\(provider)")
    }

    /// A stable 24-hex id for the app's user domain.
    package static func domainId(appId: String) -> String {
        stableId("domain:\(appId)")
    }

    /// The first 12 bytes of `name`'s SHA-256, in hex. Every profile read asks for these (its domain and each
    /// identity's provider): the few names there are — one per app and provider — are remembered, up to
    /// ``stableIdLimit``, rather than hashed again each time.
    private static func stableId(_ name: String) -> String {
        if let known = stableIds.withLockedValue({ $0[name] }) { return known }
        let id = Secrets.hex(Array(Secrets.sha256(name).prefix(12)))
        stableIds.withLockedValue { ids in
            if ids.count < stableIdLimit { ids[name] = id }
        }
        return id
    }

    private static let stableIdLimit = 1024
    private static let stableIds = LockedValue<[String: String]>([:])

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
