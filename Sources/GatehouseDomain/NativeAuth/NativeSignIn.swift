import Crypto
import Foundation
import GatehouseWire
import Logging

/// Sign-in (`oauth2/v2.0/initiate` → `challenge` → `token`), sign-in after sign-up or reset
/// (`grant_type=continuation_token`), and refresh (`grant_type=refresh_token`).
extension NativeAuthService {
    /// Scopes granted when the client asks for none.
    package static let defaultScopes = ["openid", "profile", "offline_access"]

    /// `oauth2/v2.0/initiate`.
    package func signInInitiate(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let types = try challengeTypes(request)
        let email = try username(request)
        // A flow is written; the password, if any, is counted as a login when it is checked.
        try await env.checkRateLimit(.flow, app: client.app, account: email.normalized)
        let account = try await env.store.emailAccount(appId: client.app.id, email: email.normalized)
        // An app that migrates users cannot tell an unknown address before its password: the old system may know it.
        if account == nil, client.app.revealUserExistence, !EmailPasswordService(env: env).migrates(client.app) {
            throw NativeFlowError.userNotFound
        }
        guard types.contains(.oob) || types.contains(.password) else {
            return redirect("the client takes neither codes (oob) nor passwords", client: client)
        }
        let token = try await startFlow(.signIn, client: client, email: email, userId: account?.userId, challengeTypes: types)
        return .next(continuationToken: token.encoded)
    }

    /// `oauth2/v2.0/challenge`: asks for the password, or emails a code (first or again).
    package func signInChallenge(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let types = try challengeTypes(request)
        let (flow, token) = try await loadFlow(request, client: client, kinds: [.signIn], steps: [.started, .codeSent])
        if flow.step == .codeSent {
            guard types.contains(.oob) else { return redirect("a code was sent, and the client does not take codes (oob)", client: client) }
            return try await sendCode(flow, token: token, client: client)
        }
        switch try await signInMethod(flow, types: types, client: client) {
        case .password:
            let (_, next) = try await advance(flow, from: token, to: .password, client: client)
            return .passwordRequired(continuationToken: next.encoded)
        case .code:
            return try await sendCode(flow, token: token, client: client)
        case .redirect(let reason):
            return redirect(reason, client: client)
        }
    }

    private enum SignInMethod {
        case password, code
        case redirect(String)
    }

    /// Where the app reveals user existence, as Entra does: a confirmed account with a password signs in with it
    /// when the client takes passwords; an account without one, or not yet confirmed, with a code (which also
    /// confirms it); a password account may use a code instead when the app offers code sign-up.
    ///
    /// Otherwise the answer depends on the app and the client only, never on the account, so that it tells nothing:
    /// every address gets what a new account of this app would have, a password when the app signs up with passwords
    /// and the client takes them, else a code. An account without a password (signed up with codes) then signs in
    /// with a client that takes codes only, or sets a password with a reset; a pending account's password does not
    /// sign in until the account is confirmed.
    private func signInMethod(_ flow: NativeFlowRecord, types: Set<NativeAuthChallengeType>, client: Client) async throws -> SignInMethod {
        let settings = client.settings
        var hasPassword = settings.signUpMethods.contains(.emailPassword)
        var confirmed = true
        if client.app.revealUserExistence, flow.userId != nil,
            let account = try await env.store.emailAccount(appId: client.app.id, email: flow.username),
            account.userId == flow.userId
        {
            hasPassword = !account.passwordHash.isEmpty
            confirmed = account.confirmedAt != nil
        } else if client.app.revealUserExistence, flow.userId == nil, EmailPasswordService(env: env).migrates(client.app) {
            // An address the old system may know signs in with its password there, which migrates it.
            hasPassword = true
        }
        if hasPassword, confirmed, types.contains(.password) { return .password }
        if types.contains(.oob), !hasPassword || !confirmed || settings.signUpMethods.contains(.emailOTP) { return .code }
        return .redirect(
            hasPassword
                ? "this account signs in with a password, and the client does not take passwords"
                : "this account signs in with a one-time code, and the client does not take codes (oob)"
        )
    }

    /// `oauth2/v2.0/token`.
    package func token(client: Client, request: NativeAuthRequest) async throws -> NativeTokens {
        let grant = try request.required(\.grantType, "grant_type")
        if request.challengeType != nil { _ = try challengeTypes(request) }
        let scopes = Self.scopes(request.scope)
        switch NativeAuthGrantType(rawValue: grant) {
        case .password:
            let (flow, token) = try await loadFlow(request, client: client, kinds: [.signIn], steps: [.password])
            try checkUsername(request, flow: flow)
            let password = try request.required(\.password, "password")
            try await recordAttempt(flow, token: token, client: client)
            let gate = SessionGate(env: env)
            let proof: SessionProof
            do {
                proof = try await gate.prove(.emailPassword(username: flow.username, password: password), app: client.app, via: "native auth")
            } catch AuthError.invalidCredentials, AuthError.confirmationRequired {
                throw NativeFlowError.invalidCredentials
            } catch AuthError.userDisabled {
                throw NativeFlowError.userDisabled
            } catch let refusal as AuthError where refusal.refusesUnchecked {
                // Refused before the password was checked (a rate limit, a login delay): the client is told to wait
                // and send it again on this flow, so the flow keeps the attempt. If giving it back fails, the answer is
                // still the refusal (the attempt stays counted: one fewer, never one more).
                do {
                    try await env.store.returnFlowAttempt(id: flow.id, tokenHash: token.hash)
                } catch {
                    env.logger.notice("a refused sign-in's flow attempt was not given back", metadata: ["error": "\(error)"])
                }
                throw refusal
            }
            try await gate.settle(proof)
            return try await finish(flow, token: token, proof: proof, client: client, scopes: scopes)
        case .oob:
            let (flow, token) = try await loadFlow(request, client: client, kinds: [.signIn], steps: [.codeSent])
            let proof = try await SessionGate(env: env).proveCode(flow, token: token, client: client, request: request)
            return try await finish(flow, token: token, proof: proof, client: client, scopes: scopes, confirmEmail: true)
        case .continuationToken:
            let (flow, token) = try await loadFlow(request, client: client, kinds: [.signUp, .resetPassword], steps: [.completed])
            try checkUsername(request, flow: flow)
            let proof = try await SessionGate(env: env).proveCompletedFlow(flow)
            return try await finish(flow, token: token, proof: proof, client: client, scopes: scopes)
        case .refreshToken:
            return try await refresh(client: client, request: request, scopes: scopes)
        default:
            throw NativeFlowError.unsupportedGrantType(grant)
        }
    }

    /// The `username` a client sends with a grant must be the flow's.
    private func checkUsername(_ request: NativeAuthRequest, flow: NativeFlowRecord) throws(NativeFlowError) {
        if let username = request.username, EmailAddress(username)?.normalized != flow.username {
            throw .invalidContinuationToken("the username does not match this flow")
        }
    }

    /// The requested scopes in order without repeats, or ``defaultScopes``.
    package static func scopes(_ text: String?) -> [String] {
        var seen = Set<String>()
        let requested = (text ?? "").split(separator: " ").map(String.init).filter { !$0.isEmpty && seen.insert($0).inserted }
        return requested.isEmpty ? defaultScopes : requested
    }

    /// Ends the flow and starts the session the gate issues for `proof`, in one transaction, and answers its tokens.
    private func finish(
        _ flow: NativeFlowRecord,
        token: OpaqueToken,
        proof: SessionProof,
        client: Client,
        scopes: [String],
        confirmEmail: Bool = false
    ) async throws -> NativeTokens {
        let now = env.clock.now
        let user = proof.user
        let refresh = OpaqueToken.make(id: Secrets.objectID(at: now))
        let issued = SessionGate(env: env).nativeSession(proof, client: client, refresh: refresh)
        let session = issued.record
        var effects: [NativeFlowEffect] = [.createSession(issued)]
        if confirmEmail { effects.insert(.proveMailbox(userId: user.id, email: flow.username, .ownerProven(newPasswordHash: nil)), at: 0) }
        // Every session of the user ended (or the user went) after the flow's basis was last checked — for a password or
        // a code, when this step's attempt was counted (``recordAttempt(_:token:client:)``); a completed sign-up or reset
        // counts none — and the step is not taken: the next one on this flow is told to start again. A password is
        // answered as a wrong one, as it may be a moment later (a reset changes it), so that an ending racing a guess
        // does not confirm the guess.
        let ended: NativeFlowError = proof.methods.contains(.password)
            ? .invalidCredentials : .invalidContinuationToken("the account changed while this sign-in ran; sign in again")
        _ = try await advance(flow, from: token, to: .finished, client: client, effects: effects, ifEnded: ended)
        env.logger.info("user signed in", metadata: ["app": "\(client.app.id)", "user": "\(user.id)", "via": "native auth \(flow.kind.rawValue)"])
        if flow.kind == .signUp {
            await env.audit(.registration, app: client.app.id, user: user.id, detail: ["via": "native auth"])
        }
        await LoginService(env: env).succeeded(user: user, app: client.app, detail: ["via": "native auth \(flow.kind.rawValue)"])
        return try await tokens(user: user, session: session, refreshSecret: refresh.secret, client: client, scopes: scopes)
    }

    /// The `/token` answer for a session: a new access token, the refresh token for `refreshSecret`, an id token.
    private func tokens(
        user: UserRecord,
        session: SessionRecord,
        refreshSecret: [UInt8],
        client: Client,
        scopes: [String]
    ) async throws -> NativeTokens {
        let app = client.app
        let access = try SessionService(env: env).accessToken(for: user, session: session, app: app)
        var idToken: String?
        if scopes.contains("openid") {
            let profile = try await env.store.identities(userId: user.id)
                .first { $0.providerType == EmailPasswordService.providerType }?.data ?? [:]
            let email = profile["email"].flatMap { if case .string(let s) = $0 { s } else { nil } }
            let name = profile["displayName"].flatMap { if case .string(let s) = $0 { s } else { nil } }
            let now = Int64(env.clock.now.timeIntervalSince1970)
            var claims = NativeAuthIDTokenClaims(
                iss: env.publicURL, sub: user.id, aud: client.id, exp: now + Int64(app.accessTokenTTL), iat: now,
                preferredUsername: email ?? user.id, email: email, name: name, oid: user.id, tid: app.id
            )
            claims.amr = session.methods.isEmpty ? nil : session.methods.map(\.rawValue)
            claims.authTime = Int64((session.provenAt ?? session.createdAt).timeIntervalSince1970)
            claims.sid = session.id
            await env.keys.refreshIfNeeded(from: env.store, now: env.clock.now)
            let key = env.keys.current
            idToken = try JWT.sign(claims, key: key)
        }
        return NativeTokens(
            scopes: scopes, expiresIn: app.accessTokenTTL, accessToken: access,
            refreshToken: scopes.contains("offline_access") ? OpaqueToken(id: session.id, secret: refreshSecret).encoded : nil,
            idToken: idToken, userId: user.id, tenantId: app.id
        )
    }

    /// `grant_type=refresh_token`. The refresh token rotates (``SessionRefresh``): the answer carries a new one,
    /// derived from the presented secret and a random salt kept in the session. Presenting the previous token again
    /// within `refreshTokenReuseWindow` seconds answers the same new token (a client that lost the answer, or two
    /// racing refreshes); later, it revokes the session, because someone replays a token that was already exchanged.
    private func refresh(client: Client, request: NativeAuthRequest, scopes: [String]) async throws -> NativeTokens {
        let text = try request.required(\.refreshToken, "refresh_token")
        let refresh = SessionRefresh(env: env)
        do {
            guard let presented = OpaqueToken(text), let found = try await env.store.sessionWithUser(id: presented.id),
                found.session.appId == client.app.id, found.session.clientId == client.id
            else { throw SessionRefresh.Refusal.notValid }
            let accepted = try await refresh.accept(
                .init(presented), session: found.session, user: found.user, app: client.app, mode: .rotate, via: "native auth"
            )
            await env.auditRefresh(app: client.app.id, user: accepted.user.id, session: accepted.session.id)
            return try await tokens(
                user: accepted.user, session: accepted.session, refreshSecret: accepted.nextSecret!, client: client, scopes: scopes
            )
        } catch let refusal as SessionRefresh.Refusal {
            if refusal != .replayed {
                try await refresh.refused(refusal.reason, counted: refusal != .notValid, app: client.app, via: "native auth")
            }
            throw Self.error(refusal)
        }
    }

    /// Native auth's words for a refused refresh token.
    private static func error(_ refusal: SessionRefresh.Refusal) -> NativeFlowError {
        switch refusal {
        case .notValid, .ended(.clientRemoved): .invalidRefreshToken("the refresh token is not valid")
        case .alreadyUsed: .invalidRefreshToken("the refresh token was already used")
        case .replayed: .invalidRefreshToken("the refresh token was already used; the session is revoked, sign in again")
        case .ended(.revoked): .invalidRefreshToken("the session was revoked; sign in again")
        case .ended(.expired), .ended(.idle): .expiredRefreshToken
        case .ended(.userGone): .invalidRefreshToken("the user no longer exists")
        case .ended(.userDisabled): .userDisabled
        }
    }

    /// `oauth2/v2.0/revoke` (RFC 7009): ends the session of a refresh token (current, previous or spent) or of an
    /// access token issued to this client, at once: its refresh token stops working, and so do its access tokens at
    /// every Gatehouse endpoint (resource servers that verify tokens offline see them until they expire). Answers 200
    /// whatever the token was, so that it tells nothing about tokens it did not end.
    package func revoke(client: Client, request: NativeAuthRequest) async throws {
        let text = try request.required(\.token, "token")
        // Each presented token is checked against the database: counted per address first.
        try await env.checkRateLimit(.refresh, app: client.app)
        guard let (session, presented) = try await sessionToRevoke(text, client: client) else { return }
        try await SessionRefresh(env: env).signOut(session, presenting: presented, app: client.app, via: "native auth")
    }

    /// The live session `text` stands for, if it was issued to `client`, and which of its secrets `text` is (an
    /// access token counts as the current one).
    private func sessionToRevoke(_ text: String, client: Client) async throws -> (SessionRecord, SessionRefresh.Classified)? {
        guard let presented = OpaqueToken(text) else {
            // Not a refresh token: an access token, whose session ends with it.
            do {
                let caller = try await SessionService(env: env).authenticate(text, as: .access)
                return caller.app.id == client.app.id && caller.session.clientId == client.id ? (caller.session, .current) : nil
            } catch is AuthError {
                return nil
            }
        }
        guard let session = try await env.store.session(id: presented.id), session.appId == client.app.id,
            session.clientId == client.id, session.revokedAt == nil
        else { return nil }
        let classified = try await SessionRefresh(env: env).classify(presented.hash, in: session)
        return classified == .unknown ? nil : (session, classified)
    }
}
