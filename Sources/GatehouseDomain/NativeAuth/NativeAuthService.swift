import Foundation
import GatehouseWire
import Logging

/// The parameters of one native auth request, as the façade decoded them (form encoding, empty values as absent).
/// Which a step requires, and in which order it checks them, is the step's to say: ``required(_:_:)``.
package struct NativeAuthRequest: Sendable, Hashable {
    package var clientId: String?
    package var username: String?
    package var challengeType: String?
    package var continuationToken: String?
    package var grantType: String?
    package var password: String?
    package var newPassword: String?
    package var oob: String?
    package var attributes: String?
    package var scope: String?
    package var refreshToken: String?
    package var token: String?

    package init(
        clientId: String? = nil, username: String? = nil, challengeType: String? = nil, continuationToken: String? = nil,
        grantType: String? = nil, password: String? = nil, newPassword: String? = nil, oob: String? = nil, attributes: String? = nil,
        scope: String? = nil, refreshToken: String? = nil, token: String? = nil
    ) {
        (self.clientId, self.username, self.challengeType, self.continuationToken) = (clientId, username, challengeType, continuationToken)
        (self.grantType, self.password, self.newPassword, self.oob) = (grantType, password, newPassword, oob)
        (self.attributes, self.scope, self.refreshToken, self.token) = (attributes, scope, refreshToken, token)
    }

    /// The parameter's value, or ``NativeFlowError/invalidParameter(_:)`` with its protocol name.
    package func required(_ parameter: KeyPath<NativeAuthRequest, String?>, _ name: String) throws(NativeFlowError) -> String {
        guard let value = self[keyPath: parameter] else { throw .invalidParameter(name) }
        return value
    }
}

/// The native auth API (spec `native-auth-api.md`): sign-up, sign-in and password reset in steps joined by
/// continuation tokens, over the same accounts as the Client API's `local-userpass` provider.
///
/// - Every step answers a new continuation token and kills the one it was given (``NativeFlowRecord``); a step that
///   fails on the user's input (a wrong code, a weak password, an invalid attribute) keeps it.
/// - Codes: ``NativeAuthSettings/CodeSettings``; sent through the outbox with the `one_time_code` template and
///   counted against the app's email send limit.
/// - Nothing is written to the accounts until a flow completes: a sign-up creates its account in the same
///   transaction that ends the flow.
/// - Unless the app sets `revealUserExistence`, sign-in and reset for an unknown address play along: a flow
///   is made, a code is "sent" (the same statements run and are undone), and every code then fails as
///   `invalid_oob_value`; a password sign-in does a dummy hash and fails as invalid credentials.
package struct NativeAuthService: Sendable {
    package let env: AuthEnvironment

    /// The app and client behind a request.
    package struct Client: Sendable {
        package var app: AppSettings
        package var settings: NativeAuthSettings
        package var id: String

        package init(app: AppSettings, settings: NativeAuthSettings, id: String) {
            self.app = app
            self.settings = settings
            self.id = id
        }
    }

    /// Resolves the app and checks that native auth is on and the `client_id` is one of its clients.
    package func client(appId: String, request: NativeAuthRequest) throws(NativeFlowError) -> Client {
        guard let app = env.configuration.app(id: appId) else { throw .appNotFound(appId) }
        guard let settings = app.nativeAuth, settings.enabled else { throw .nativeAuthDisabled }
        let clientId = try request.required(\.clientId, "client_id")
        guard settings.clientIds.contains(clientId) else { throw .unauthorizedClient }
        return Client(app: app, settings: settings, id: clientId)
    }

    /// The request's `challenge_type` list, which must include `redirect`. Unknown types are ignored.
    package func challengeTypes(_ request: NativeAuthRequest) throws(NativeFlowError) -> Set<NativeAuthChallengeType> {
        let types = Set(try request.required(\.challengeType, "challenge_type").split(whereSeparator: { $0 == " " || $0 == "," || $0 == "+" })
            .compactMap { NativeAuthChallengeType(rawValue: String($0)) })
        guard types.contains(.redirect) else { throw .missingRedirect }
        return types
    }

    package func username(_ request: NativeAuthRequest) throws(NativeFlowError) -> EmailAddress {
        guard let text = request.username, let email = EmailAddress(text) else { throw .invalidParameter("username") }
        return email
    }

    // MARK: Flows and their tokens

    /// A new flow at ``NativeFlowRecord/Step/started`` and its first token.
    package func startFlow(
        _ kind: NativeFlowRecord.Kind,
        client: Client,
        email: EmailAddress,
        userId: String?,
        challengeTypes: Set<NativeAuthChallengeType>,
        passwordHash: String? = nil,
        attributes: [String: String] = [:]
    ) async throws -> OpaqueToken {
        let now = env.clock.now
        let id = Secrets.objectID(at: now)
        let token = OpaqueToken.make(id: id)
        let flow = NativeFlowRecord(
            id: id, appId: client.app.id, clientId: client.id, kind: kind, step: .started, username: email.normalized,
            email: email.display, userId: userId, challengeTypes: challengeTypes, tokenHash: token.hash,
            tokenExpiresAt: now.addingTimeInterval(TimeInterval(client.settings.continuationTokenTTL)), codeHash: nil,
            codeExpiresAt: nil, codeSentAt: nil, attempts: 0, verified: false, passwordHash: passwordHash, attributes: attributes,
            createdAt: now
        )
        try await env.store.insertFlow(flow)
        return token
    }

    /// The flow behind the request's `continuation_token`, if the token is the flow's current one, unexpired, of
    /// this app and client, of one of `kinds`, and at one of `steps`.
    package func loadFlow(
        _ request: NativeAuthRequest,
        client: Client,
        kinds: Set<NativeFlowRecord.Kind>,
        steps: Set<NativeFlowRecord.Step>
    ) async throws -> (NativeFlowRecord, OpaqueToken) {
        let text = try request.required(\.continuationToken, "continuation_token")
        guard let token = OpaqueToken(text) else { throw NativeFlowError.invalidContinuationToken() }
        // Every step reads and writes the flow: counted per address and per flow before the token is looked up.
        try await env.checkRateLimit(.flow, app: client.app, identifier: token.id)
        guard let flow = try await env.store.flow(id: token.id),
            flow.appId == client.app.id, flow.clientId == client.id, kinds.contains(flow.kind),
            Secrets.constantTimeEquals(token.hash, flow.tokenHash)
        else { throw NativeFlowError.invalidContinuationToken() }
        guard flow.tokenExpiresAt > env.clock.now else { throw NativeFlowError.expiredContinuationToken }
        guard steps.contains(flow.step) else {
            throw NativeFlowError.invalidContinuationToken("the continuation token is not valid for this endpoint")
        }
        return (flow, token)
    }

    /// Moves `flow` to `step` with a new token, applying `effects` in the same transaction, if `token` is still the
    /// current one; otherwise (a racing request won, or it expired) `invalid_grant`.
    package func advance(
        _ flow: NativeFlowRecord,
        from token: OpaqueToken,
        to step: NativeFlowRecord.Step,
        client: Client,
        effects: [NativeFlowEffect] = [],
        ifEnded ended: NativeFlowError = .flowEnded
    ) async throws -> (NativeFlowRecord, OpaqueToken) {
        let now = env.clock.now
        let next = OpaqueToken.make(id: flow.id)
        var flow = flow
        flow.step = step
        flow.tokenHash = next.hash
        flow.tokenExpiresAt = now.addingTimeInterval(TimeInterval(client.settings.continuationTokenTTL))
        let advanced: Bool
        do {
            advanced = try await env.store.advanceFlow(flow, from: token.hash, now: now, effects: effects)
        } catch StoreError.conflict {
            throw NativeFlowError.userAlreadyExists
        } catch StoreError.sessionEnded {
            // Every session of the flow's user ended since the flow began (or since its credential was read), or its
            // address moved: the step is not taken (``NativeFlowRecord/userEpoch``).
            throw ended
        }
        guard advanced else { throw NativeFlowError.invalidContinuationToken("the continuation token was already used") }
        return (flow, next)
    }

    /// Counts one wrong-answer attempt before an answer is checked; `tooManyAttempts` once the flow used them all. A
    /// flow whose basis ended (``FlowAttemptCount/flowEnded``) is told to start again here, before its code or
    /// password is looked at: the answer is the same whatever the client sent, so a flow held past an ending tells
    /// no one whether a password was right, and costs the owner no attempts.
    /// - Returns: the flow's count of attempts with this one.
    @discardableResult
    package func recordAttempt(_ flow: NativeFlowRecord, token: OpaqueToken, client: Client) async throws -> Int {
        switch try await env.store.recordFlowAttempt(id: flow.id, tokenHash: token.hash, limit: client.settings.code.maxAttempts) {
        case .counted(let attempt):
            return attempt
        case .tokenSpent:
            throw NativeFlowError.invalidContinuationToken("the continuation token was already used")
        case .flowEnded:
            throw NativeFlowError.flowEnded
        case .exhausted:
            env.logger.notice("native auth flow out of attempts", metadata: ["app": "\(client.app.id)", "flow": "\(flow.id)"])
            throw NativeFlowError.tooManyAttempts
        }
    }

    // MARK: Codes

    /// Emails a new code (replacing any earlier one) and answers the `oob` challenge. For a flow without an
    /// account (an unknown address in sign-in or reset) the same work runs, but no email leaves and no code can
    /// match.
    package func sendCode(_ flow: NativeFlowRecord, token: OpaqueToken, client: Client) async throws -> NativeStep {
        let settings = client.settings
        let now = env.clock.now
        guard flow.attempts < settings.code.maxAttempts else { throw NativeFlowError.tooManyAttempts }
        if let sentAt = flow.codeSentAt {
            let wait = sentAt.addingTimeInterval(TimeInterval(settings.code.resendInterval)).timeIntervalSince(now)
            if wait > 0 { throw NativeFlowError.resendTooSoon(retryAfter: Int(wait.rounded(.up))) }
        }
        do {
            try await env.checkSendLimit(.oneTimeCode, app: client.app, address: flow.username)
        } catch AuthError.tooManyEmails(let retryAfter) {
            throw NativeFlowError.tooManyEmails(retryAfter: retryAfter)
        }
        // A sign-up for a taken address mails its owner a notice instead of a code, and no code can match: the caller
        // sees a sign-up like any other, the owner hears of it. (The same statements run either way, for every kind of
        // flow.) Mail about an account goes to its stored address, whatever spelling the caller typed.
        let account = try await env.store.emailAccount(appId: client.app.id, email: flow.username)
        let taken = flow.kind == .signUp && account?.confirmedAt != nil
        let real = (flow.kind == .signUp || flow.userId != nil) && !taken
        let recipient = account?.recipient ?? flow.email
        let code = OneTimeCode.generate(length: settings.code.length)
        var variables = MailVariables(appName: client.app.name, email: recipient)
        variables.code = code
        variables.expiresInMinutes = max(1, settings.code.ttl / 60)
        let mail = env.mail(taken ? .accountExists : .oneTimeCode, app: client.app, recipient: recipient, variables)
        if taken {
            env.logger.info("sign-up of a taken address", metadata: ["app": "\(client.app.id)", "via": "native auth"])
            await env.audit(.registrationRefused, app: client.app.id, detail: ["via": "native auth"])
        }
        var next = flow
        next.codeHash = real ? OneTimeCode.hash(code, flowId: flow.id) : Secrets.randomBytes(32)
        next.codeExpiresAt = now.addingTimeInterval(TimeInterval(settings.code.ttl))
        next.codeSentAt = now
        let (_, nextToken) = try await advance(next, from: token, to: .codeSent, client: client, effects: [.mail(mail, dryRun: !real && !taken)])
        return .codeSent(
            continuationToken: nextToken.encoded, maskedAddress: OneTimeCode.maskedAddress(flow.email), codeLength: settings.code.length,
            resendInterval: settings.code.resendInterval
        )
    }

    /// Checks the request's `oob` code against the flow's current code; counts the attempt first. Throws
    /// `invalid_oob_value` for a wrong or expired code (the token stays valid for another try or a resend).
    package func checkCode(_ flow: NativeFlowRecord, token: OpaqueToken, client: Client, request: NativeAuthRequest) async throws {
        let code = try request.required(\.oob, "oob")
        try await env.checkRateLimit(.code, app: client.app, identifier: flow.id)
        let attempt = try await recordAttempt(flow, token: token, client: client)
        /// A failed check is audited with its attempt's number as counted (racing guesses audit 1, 2, …, not the
        /// count they read); the one that used the flow's last attempt also records that the flow is spent.
        func failed(_ reason: String) async {
            await env.audit(.codeFailed, app: client.app.id, user: flow.userId, detail: ["flow": flow.kind.rawValue, "attempt": "\(attempt)", "reason": reason])
            if attempt >= client.settings.code.maxAttempts {
                await env.audit(.flowExhausted, app: client.app.id, user: flow.userId, detail: ["flow": flow.kind.rawValue])
            }
        }
        guard let expected = flow.codeHash, code.utf8.count <= 32,
            Secrets.constantTimeEquals(OneTimeCode.hash(code, flowId: flow.id), expected)
        else {
            await failed("wrong")
            throw NativeFlowError.invalidCode()
        }
        guard let expiry = flow.codeExpiresAt, expiry > env.clock.now else {
            await failed("expired")
            throw NativeFlowError.invalidCode("the code has expired; ask for a new one")
        }
    }

    // MARK: Passwords

    /// Checks `password` against the app's policy and hashes it.
    package func hashNewPassword(_ password: String, email: String, client: Client) async throws -> String {
        try checkNewPassword(password, email: email, client: client)
        return try await env.hasher.hash(password, parameters: client.app.passwordHash)
    }

    /// Refuses a password that breaks the app's policy, with the rule's suberror. `email`: the flow's (normalized).
    package func checkNewPassword(_ password: String, email: String, client: Client) throws(NativeFlowError) {
        let policy = client.app.passwordPolicy
        if let violation = policy.violation(password, email: email) { throw .password(violation, policy: policy) }
    }

    /// The request's `redirect` answer, logged: the client cannot do what the app needs.
    package func redirect(_ reason: String, client: Client) -> NativeStep {
        env.logger.info("native auth redirect", metadata: ["app": "\(client.app.id)", "reason": "\(reason)"])
        return .redirect(reason: reason)
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
