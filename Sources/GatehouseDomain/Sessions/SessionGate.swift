import Foundation
import GatehouseWire
import Logging

/// What the login code hands the gate once a credential is proven: the user, how the session it starts may act
/// (``SessionKind``), the methods that proved it and when. The only value ``SessionGate`` issues a session for.
///
/// Its initialiser is private to this file, and every function here that makes one proves a credential first (a
/// password, an API key, a provider's token, an emailed code checked against its flow, a sign-up or reset flow that
/// a code completed) or makes the user it stands for (an anonymous login). So a session for a bare user cannot be
/// written: the compiler refuses it anywhere else. A new way in (a second factor, a passkey, a browser login) is a
/// new function here that proves its credential, never a new way to mint a session.
package struct SessionProof: Sendable {
    package let user: UserRecord
    package let kind: SessionKind
    /// RFC 8176 `amr` values, in the order they were proven.
    package let methods: [AuthenticationMethod]
    /// The API key that logged in: disabling or deleting it ends the session.
    package let apiKeyId: String?
    /// When the credential was proven (the session's `auth_time`).
    package let provenAt: Date
    /// The Client API provider name of the credential (`local-userpass`, `api-key`, …), or the native grant.
    package let via: String
    /// A password's login backoff, whose counts the success ends: in the write of the session it starts (Client API)
    /// or at once (``SessionGate/settle(_:)``).
    package let backoff: LoginBackoff?

    fileprivate init(
        user: UserRecord, kind: SessionKind, methods: [AuthenticationMethod], apiKeyId: String? = nil, provenAt: Date, via: String,
        backoff: LoginBackoff? = nil
    ) {
        self.user = user
        self.kind = kind
        self.methods = methods
        self.apiKeyId = apiKeyId
        self.provenAt = provenAt
        self.via = via
        self.backoff = backoff
    }
}

/// A session the gate issued, not yet written: the only value the store writes as a new session
/// (``GatehouseStore/createSession(_:recording:clearingLoginFailures:)``, ``NativeFlowEffect/createSession(_:)``).
/// Made in this file only.
///
/// It is written only while what proved it still holds (the store checks it in the write): its user exists, is not
/// disabled and had none of its sessions ended since the proof read it (``userEpoch``), and an API key's session's key
/// exists and is enabled. A login still in flight when the owner resets the password, or anything else ends every
/// session, so gets no session, whatever the order in which the two reach the database.
package struct IssuedSession: Sendable, Hashable {
    package let record: SessionRecord
    /// The user's ``UserRecord/sessionEpoch`` when the credential was read.
    package let userEpoch: Int
    fileprivate init(_ record: SessionRecord, userEpoch: Int) {
        self.record = record
        self.userEpoch = userEpoch
    }
}

/// The one gate every session of both protocols passes: Client API logins of every provider, API keys, anonymous
/// logins, native password, `oob` and `continuation_token` grants. It turns a proven credential into a
/// ``SessionProof`` and a proof into a session that records its kind, the methods that proved it and when.
package struct SessionGate: Sendable {
    package let env: AuthEnvironment

    package init(env: AuthEnvironment) {
        self.env = env
    }

    // MARK: Proofs

    /// Proves a login credential (``LoginService`` checks it with its provider and the app's limits, and audits a
    /// failure) and vouches for its user. `via`: the protocol, for the audit log (`native auth`; nil: the Client API).
    package func prove(_ credential: LoginCredential, app: AppSettings, via: String? = nil) async throws -> SessionProof {
        let (proven, backoff) = try await LoginService(env: env).proving(credential, app: app, via: via)
        let now = env.clock.now
        switch credential {
        case .emailPassword:
            return SessionProof(user: proven.user, kind: .firstParty, methods: [.password], provenAt: now, via: credential.providerType, backoff: backoff)
        case .apiKey:
            return SessionProof(user: proven.user, kind: .apiKey, methods: [.apiKey], apiKeyId: proven.apiKeyId, provenAt: now, via: credential.providerType)
        case .anonymous:
            return SessionProof(user: proven.user, kind: .anonymous, methods: [], provenAt: now, via: credential.providerType)
        case .customToken, .googleIDToken, .googleAuthCode, .appleIDToken, .facebookAccessToken, .function:
            return SessionProof(user: proven.user, kind: .firstParty, methods: [.federated], provenAt: now, via: credential.providerType)
        }
    }

    /// A native sign-in's emailed code (`grant_type=oob`), checked against the flow the request's continuation token
    /// loaded, whose user was fixed when it started. The flow's step that writes the session is taken only while that
    /// user had none of its sessions ended since and still has the flow's address (``NativeFlowRecord/userEpoch``).
    package func proveCode(
        _ flow: NativeFlowRecord, token: OpaqueToken, client: NativeAuthService.Client, request: NativeAuthRequest
    ) async throws -> SessionProof {
        try await NativeAuthService(env: env).checkCode(flow, token: token, client: client, request: request)
        guard let userId = flow.userId, let user = try await env.store.user(id: userId) else { throw NativeFlowError.invalidCode() }
        guard !user.disabled else { throw NativeFlowError.userDisabled }
        return SessionProof(user: user, kind: .firstParty, methods: [.oneTimeCode], provenAt: env.clock.now, via: "native auth signin")
    }

    /// A sign-up or password reset flow its emailed code completed (`grant_type=continuation_token`), loaded by the
    /// request's continuation token: the code proved the mailbox of the flow's user.
    package func proveCompletedFlow(_ flow: NativeFlowRecord) async throws -> SessionProof {
        guard flow.step == .completed, flow.verified, flow.kind == .signUp || flow.kind == .resetPassword else {
            throw NativeFlowError.invalidContinuationToken("the continuation token is not valid for this endpoint")
        }
        guard let userId = flow.userId, let user = try await env.store.user(id: userId) else {
            throw NativeFlowError.invalidContinuationToken("the account of this flow no longer exists")
        }
        guard !user.disabled else { throw NativeFlowError.userDisabled }
        return SessionProof(user: user, kind: .firstParty, methods: [.oneTimeCode], provenAt: env.clock.now, via: "native auth \(flow.kind.rawValue)")
    }

    /// Ends a password's backoff counts at once, for a session not written with them (a native sign-in, whose session
    /// is its flow's effect).
    package func settle(_ proof: SessionProof) async throws {
        try await proof.backoff?.succeeded()
    }

    // MARK: Proving a session again

    /// Whether the caller's session was proven within the app's `recentProofWindow`: what changing a credential
    /// asks for. An API-key session never is (a leaked key must not become a way to keep the account).
    package func isRecentlyProven(_ caller: SessionService.Caller) -> Bool {
        guard caller.kind != .apiKey else { return false }
        let provenAt = caller.session.provenAt ?? caller.session.createdAt
        return env.clock.now.timeIntervalSince(provenAt) <= TimeInterval(caller.app.recentProofWindow)
    }

    /// Requires what adding or changing a credential, or deleting the user, asks for: a session proven within the
    /// app's `recentProofWindow` (``isRecentlyProven(_:)``); else ``AuthError/reauthenticationRequired``.
    ///
    /// With `exemptingAnonymousUsers` (linking, deleting the user), an anonymous user — an anonymous session whose
    /// user holds nothing but anonymous identities — goes on at any age: it has nothing to prove again, and links to
    /// upgrade or deletes itself. The exemption is the user's, not the session's: once the user holds another way in,
    /// its anonymous sessions are held to the window like any other, or a stolen refresh token of the session that
    /// upgraded would add a way in, or delete the account, for the 60 days it lives.
    ///
    /// - Returns: how the caller passed. ``RecentProof/anonymousUser`` was read outside the write that follows: that
    ///   write must check it again with the user's row locked (``GatehouseStore/addIdentity(_:owner:)``), or an upgrade
    ///   racing a stolen stale session's link would let both through.
    @discardableResult
    package func requireRecentProof(_ caller: SessionService.Caller, exemptingAnonymousUsers: Bool = false) async throws -> RecentProof {
        if isRecentlyProven(caller) { return .proven }
        if exemptingAnonymousUsers, caller.kind == .anonymous,
            try await env.store.identities(userId: caller.user.id).allSatisfy({ $0.providerType == AnonymousService.providerType })
        {
            return .anonymousUser
        }
        throw AuthError.reauthenticationRequired
    }

    /// Runs `write`, a change a session makes to its own user, under the ``OwnerHold`` that `caller` and `proof` ask
    /// for, and answers the hold's refusals as the gate answers them: every session ended since the caller was read,
    /// ``AuthError/invalidSession(_:)``; the anonymous exemption no longer holding, ``AuthError/reauthenticationRequired``.
    package func holdingOwner<T: Sendable>(
        _ caller: SessionService.Caller, _ proof: RecentProof, _ write: (OwnerHold) async throws -> T
    ) async throws -> T {
        do {
            return try await write(OwnerHold(epoch: caller.user.sessionEpoch, whileOnlyAnonymous: proof == .anonymousUser))
        } catch StoreError.sessionEnded {
            throw AuthError.invalidSession("invalid session")
        } catch StoreError.recentProofRequired {
            throw AuthError.reauthenticationRequired
        }
    }

    /// How a caller met ``requireRecentProof(_:exemptingAnonymousUsers:)``.
    package enum RecentProof: Sendable, Hashable {
        /// Its session was proven within the window.
        case proven
        /// Its user held nothing but anonymous identities when read.
        case anonymousUser
    }

    /// Proves the password of the manager's own account in its session, checked as a login is (its limits and
    /// delays): the session's `auth_time` becomes now and `pwd` joins its methods. A wrong password is
    /// ``AuthError/wrongCurrentPassword`` (the session stays valid); a user without a password is refused.
    /// - Returns: the session as it is now recorded.
    @discardableResult
    package func reauthenticate(_ manager: AccountManager, password: String) async throws -> SessionRecord {
        let caller = manager.caller
        let proof = try await provePassword(of: caller, password)
        try await proof.backoff.succeeded()
        return try await reprove(caller, .password)
    }

    /// Proves the caller's session again with the code ``AccountCodes`` mailed to the account's address for it: the
    /// session's `auth_time` becomes now and `otp` joins its methods. A code asked for in another session, wrong,
    /// expired or used is ``AuthError/invalidCode``.
    @discardableResult
    package func reauthenticate(_ manager: AccountManager, code: String) async throws -> SessionRecord {
        let caller = manager.caller
        let token = try await AccountCodes(env: env).check(.reauthenticationCode, code: code, caller: caller)
        guard try await env.store.spendToken(id: token.id, now: env.clock.now) else { throw AuthError.invalidCode }
        return try await reprove(caller, .oneTimeCode)
    }

    /// Records `method` as proven now in the caller's session.
    private func reprove(_ caller: SessionService.Caller, _ method: AuthenticationMethod) async throws -> SessionRecord {
        let now = env.clock.now
        let methods = Self.adding(method, to: caller.session.methods)
        guard try await env.store.reproveSession(id: caller.session.id, methods: methods, at: now) else {
            throw AuthError.invalidSession("invalid session")
        }
        await env.audit(.reauthenticated, app: caller.app.id, user: caller.user.id, detail: ["session": caller.session.id, "method": method.rawValue])
        var session = caller.session
        session.methods = methods
        session.provenAt = now
        return session
    }

    /// The caller's password proven again, or a refusal: ``AuthError/wrongCurrentPassword`` for a wrong one (audited
    /// as a failed login, and counted in the login backoff of the account's addresses), ``AuthError/accountChangeRefused(_:)``
    /// for a user without a password. The backoff's counts are the caller's to end.
    ///
    /// A user with a second address linked in signs in with either address's password (a linked address keeps its own
    /// until a password change or reset sets one on every address), so either proves the session: each confirmed
    /// address is tried in turn, oldest first, and one whose hash is an earlier one's is not tried again. Every try is
    /// a login attempt of that address, limited and delayed as one: a delay or limit on an earlier address refuses the
    /// request before a later one is tried.
    ///
    /// When a later address's password is the right one, each earlier address gets back exactly the failure this
    /// request counted on it (``LoginBackoff/giveBack()``): the owner's own proofs with the linked address's password
    /// add nothing to the first address's counts, however often they are made. Nothing more is given back: the run's
    /// earlier failures stay, as a correct password ends the counts of its own address only, so that whoever links an
    /// address of their own into a session they hold cannot use it to wipe the failures of the owner's address and
    /// guess its password past the delays. What they do get is one uncounted comparison of the owner's password per
    /// password they give a linked address — each a registration, a confirmation of its mailbox and a notice mailed
    /// to the owner — and a session that can change the password outright has no need to guess it. Still counted in
    /// full: the login rate limit of each address tried, and a try's time (its delay runs from the latest attempt).
    /// The audit row of an earlier address's delays starting may be written for a failure that is then given back.
    package func provePassword(of caller: SessionService.Caller, _ password: String) async throws -> EmailPasswordService.PasswordProof {
        let accounts = try await env.store.emailAccounts(userId: caller.user.id).filter { $0.confirmedAt != nil && !$0.passwordHash.isEmpty }
        guard !accounts.isEmpty else {
            throw AuthError.accountChangeRefused("the user has no password; link an email/password identity to add one")
        }
        var tried: Set<String> = []
        var missed: [LoginBackoff] = []
        for account in accounts where tried.insert(account.passwordHash).inserted {
            let outcome: EmailPasswordService.PasswordAttempt
            do {
                outcome = try await EmailPasswordService(env: env).attempt(app: caller.app, username: account.email, password: password)
            } catch AuthError.invalidCredentials, AuthError.confirmationRequired {
                continue  // The address changed since it was read (unconfirmed, or its user gone): nothing counted to give back.
            }
            switch outcome {
            case .wrong(let backoff):
                missed.append(backoff)
            case .proven(let proof) where proof.user.id == caller.user.id:
                for backoff in missed { await giveBack(backoff) }
                return proof
            case .proven:
                continue  // The address moved to another user since it was read.
            }
        }
        await env.audit(.loginFailed, app: caller.app.id, user: caller.user.id, detail: ["provider": EmailPasswordService.providerType, "reason": "reauthentication"])
        throw AuthError.wrongCurrentPassword
    }

    /// ``LoginBackoff/giveBack()``, best effort: a store that fails here refuses nothing the password proved (the
    /// failure stays counted, as it would have before a later address matched).
    private func giveBack(_ backoff: LoginBackoff) async {
        do {
            try await backoff.giveBack()
        } catch {
            env.logger.warning("a reauthentication's counted try was not given back", metadata: ["app": "\(backoff.app.id)", "error": "\(error)"])
        }
    }

    /// `methods` with `method` last, once.
    package static func adding(_ method: AuthenticationMethod, to methods: [AuthenticationMethod]) -> [AuthenticationMethod] {
        methods.filter { $0 != method } + [method]
    }

    // MARK: Sessions

    /// Starts a Client API session for `proof` and issues its tokens: the session, its login's audit row and the end
    /// of a password's backoff counts are one write.
    package func startSession(_ proof: SessionProof, app: AppSettings, device: [String: JSONValue]) async throws -> LoginResult {
        let now = env.clock.now
        let secret = Base64URL.encode(Secrets.randomBytes(32))
        let issued = session(for: proof, app: app, device: device, secretHash: Secrets.sha256(secret))
        var detail = ["provider": proof.via]
        if let key = proof.apiKeyId { detail["apiKey"] = key }
        let event = env.auditEvent(.loginSucceeded, app: app.id, user: proof.user.id, detail: detail)
        do {
            try await env.store.createSession(issued, recording: event, clearingLoginFailures: proof.backoff?.clearedKeys ?? [])
        } catch StoreError.sessionEnded {
            throw Self.refusal(of: proof)
        }
        env.countAuthEvent(.loginSucceeded, app: app.id, detail: detail)
        // Keys rotated or retired by `gatehouse keys` reach this instance before it signs.
        await env.keys.refreshIfNeeded(from: env.store, now: now)
        let session = issued.record
        let refresh = TokenClaims(
            sub: proof.user.id, typ: .refresh, sid: session.id, aud: app.id, iss: env.publicURL,
            iat: Int64(now.timeIntervalSince1970), exp: Int64(session.expiresAt.timeIntervalSince1970),
            baasDeviceId: session.deviceId, userData: nil, jti: secret
        )
        return LoginResult(
            accessToken: try SessionService(env: env).accessToken(for: proof.user, session: session, app: app),
            refreshToken: try JWT.sign(refresh, key: env.keys.current),
            userId: proof.user.id,
            deviceId: session.deviceId
        )
    }

    /// A native sign-in's session for `proof`, written as its flow's last effect (in the flow's transaction); its
    /// refresh token is `refresh`.
    package func nativeSession(_ proof: SessionProof, client: NativeAuthService.Client, refresh: OpaqueToken) -> IssuedSession {
        session(
            for: proof, app: client.app, device: ["client_id": .string(client.id)], secretHash: refresh.hash, id: refresh.id, clientId: client.id
        )
    }

    /// What a login answers when its session was not written because what proved it ended meanwhile
    /// (``StoreError/sessionEnded``): the refusal of its credential, as if it had come a moment later.
    package static func refusal(of proof: SessionProof) -> AuthError {
        proof.apiKeyId != nil ? .invalidAPIKey : .invalidCredentials
    }

    private func session(
        for proof: SessionProof, app: AppSettings, device: [String: JSONValue], secretHash: [UInt8], id: String? = nil, clientId: String? = nil
    ) -> IssuedSession {
        let now = env.clock.now
        return IssuedSession(SessionRecord(
            id: id ?? Secrets.objectID(at: now), appId: app.id, userId: proof.user.id, deviceId: Secrets.objectID(at: now), device: device,
            secretHash: secretHash, createdAt: now, expiresAt: now.addingTimeInterval(TimeInterval(app.refreshTokenTTL)), revokedAt: nil,
            clientId: clientId, apiKeyId: proof.apiKeyId, kind: proof.kind, methods: proof.methods,
            provenAt: proof.kind == .apiKey ? nil : proof.provenAt
        ), userEpoch: proof.user.sessionEpoch)
    }
}
