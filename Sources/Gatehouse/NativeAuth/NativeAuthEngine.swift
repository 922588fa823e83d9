import Foundation
internal import GatehouseWire

/// The machinery every native auth flow shares: the configuration, the HTTP calls with their retry and error
/// classification, the form fields every request carries, and the signed-in account — a user of ``core``, the same
/// store and single-flight refresher an ``App`` uses.
final class NativeAuthEngine: Sendable {
    let configuration: NativeAuthConfiguration
    /// The signed-in account's home: a user there, refreshed by the native `/token` grant.
    let core: AppCore

    /// `openid profile offline_access`, added to every token request's `scope`.
    static let oidcScopes = ["openid", "profile", "offline_access"]

    init(configuration: NativeAuthConfiguration) {
        self.configuration = configuration
        var appConfiguration = AppConfiguration(
            baseURL: configuration.baseURL,
            transport: configuration.transport,
            userStore: configuration.accountStore,
            requestTimeout: configuration.requestTimeout,
            refreshLeeway: configuration.refreshLeeway
        )
        appConfiguration.now = configuration.now
        // The grant captures the configuration, not the engine: the core outlives no engine and holds none.
        let grant: NativeClientBinding.Grant = { refreshToken, scopes, claims, correlationId in
            let fields = Self.tokenForm(
                configuration, grant: .refreshToken, secret: ("refresh_token", refreshToken), scopes: scopes, claims: claims
            )
            return try await Self.post(configuration, .token, fields, correlationId: correlationId, as: NativeAuthTokenResponse.self)
        }
        core = AppCore(appId: configuration.appId, configuration: appConfiguration, native: NativeClientBinding(clientId: configuration.clientId, grant: grant))
    }

    // MARK: Form fields

    /// `client_id`, then `fields`.
    func form(_ fields: [(String, String?)]) -> [(String, String)] { Self.form(configuration, fields) }

    static func form(_ configuration: NativeAuthConfiguration, _ fields: [(String, String?)]) -> [(String, String)] {
        [("client_id", configuration.clientId)] + fields.compactMap { name, value in value.map { (name, $0) } }
    }

    /// The configured challenge types plus `redirect`.
    var challengeType: String { configuration.challengeTypes.formValue }

    /// `capabilities`, when the app declared any.
    var capabilities: String? { configuration.capabilities.formValue }

    /// `scopes` plus `openid profile offline_access`, without duplicates, space-separated.
    static func scope(_ scopes: [String]?) -> String {
        var all: [String] = []
        for scope in (scopes ?? []) + oidcScopes where !scope.isEmpty && !all.contains(scope) { all.append(scope) }
        return all.joined(separator: " ")
    }

    /// The fields of an `oauth2/v2.0/token` request. `challenge_type` is left out of the `oob` grant, as MSAL does.
    /// Static, for the refresh grant the core runs without the engine.
    static func tokenForm(
        _ configuration: NativeAuthConfiguration,
        grant: NativeAuthGrantType,
        continuationToken: String? = nil,
        username: String? = nil,
        secret: (name: String, value: String)? = nil,
        scopes: [String]?,
        claims: String?
    ) -> [(String, String)] {
        var fields: [(String, String?)] = [("grant_type", grant.rawValue), ("continuation_token", continuationToken), ("username", username)]
        if let secret { fields.append((secret.name, secret.value)) }
        fields.append(("scope", Self.scope(scopes)))
        fields.append(("client_info", "true"))
        if grant != .oob && grant != .refreshToken { fields.append(("challenge_type", configuration.challengeTypes.formValue)) }
        fields.append(("claims", claims))
        return form(configuration, fields)
    }

    // MARK: HTTP

    /// POSTs `fields` to `endpoint` and returns the body of a 200 answer that is not the redirect fallback.
    ///
    /// Sent a second time, once, only when that cannot act twice or spend what the first try may have spent: a
    /// request that never reached the server (its connection could not be made) always; after a 5xx answer or a
    /// connection lost once the request was out, only a request the server is built to take again
    /// (``mayResend(_:_:)``). A step that spends its continuation token is not sent again then: the first try may
    /// have spent it (a second would be `invalid_grant`) or acted (signed in, reset the password), and the failure
    /// is the caller's to handle. A 400, 401 or 429 (a rate limit or login delay, whose body's `retry_after` says
    /// how long to wait) with the native auth error body becomes ``NativeAuthFailure/Reason/server(_:)``; any other
    /// status, or a body that cannot be read, a general failure.
    func post(_ endpoint: NativeAuthEndpoint, _ fields: [(String, String)], correlationId: UUID) async throws(NativeAuthFailure) -> Data {
        try await Self.post(configuration, endpoint, fields, correlationId: correlationId)
    }

    static func post(
        _ configuration: NativeAuthConfiguration,
        _ endpoint: NativeAuthEndpoint,
        _ fields: [(String, String)],
        correlationId: UUID
    ) async throws(NativeAuthFailure) -> Data {
        let address = configuration.baseURL + endpoint.path(appId: configuration.appId)
        guard let url = URL(string: address) else { throw .general("Invalid URL \(address)", correlationId) }
        let request = TransportRequest(
            method: "POST",
            url: url,
            headers: [
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
                "client-request-id": correlationId.uuidString,
            ],
            body: FormURLEncoding.encode(fields),
            timeout: configuration.requestTimeout
        )
        let resendable = mayResend(endpoint, fields)
        var attempt = 0
        while true {
            attempt += 1
            let response: TransportResponse
            do {
                response = try await configuration.transport.send(request)
            } catch {
                if attempt == 1 && !Task.isCancelled && (resendable || neverSent(error)) { continue }
                throw .general("The server could not be reached: \(error.localizedDescription)", correlationId)
            }
            let answerId = response.headers["client-request-id"].flatMap(UUID.init(uuidString:)) ?? correlationId
            switch response.statusCode {
            case 200..<300:
                if let fallback = try? JSONDecoder().decode(RedirectProbe.self, from: response.body),
                    fallback.challengeType == NativeAuthChallengeType.redirect.rawValue
                {
                    throw NativeAuthFailure(reason: .redirect(reason: fallback.redirectReason), correlationId: answerId)
                }
                return response.body
            case 400, 401, 429:
                guard let body = try? JSONDecoder().decode(NativeAuthErrorBody.self, from: response.body) else {
                    throw .general("Unexpected HTTP \(response.statusCode) answer: \(Self.excerpt(response.body))", answerId)
                }
                throw NativeAuthFailure(reason: .server(body), correlationId: answerId)
            case 500..<600 where attempt == 1 && resendable:
                continue
            default:
                throw .general("Unexpected HTTP \(response.statusCode) answer: \(Self.excerpt(response.body))", answerId)
            }
        }
    }

    /// Whether the server takes a second copy of this request without harm: a flow's start (a new flow; the first
    /// one, if it was made, expires unused), a revocation (ending a session twice ends it once), and a refresh (the
    /// previous refresh token within the app's reuse window answers the same new token: the retry the window exists
    /// for). Every other step spends its continuation token.
    static func mayResend(_ endpoint: NativeAuthEndpoint, _ fields: [(String, String)]) -> Bool {
        switch endpoint {
        case .signUpStart, .signInInitiate, .resetPasswordStart, .revoke: true
        case .token: fields.contains { $0 == ("grant_type", NativeAuthGrantType.refreshToken.rawValue) }
        default: false
        }
    }

    /// Whether `error` says the request never reached the server: no connection to it could be made. A timeout or a
    /// connection lost midway says nothing of whether the server acted.
    static func neverSent(_ error: any Error) -> Bool {
        guard let error = error as? URLError else { return false }
        return [.cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet].contains(error.code)
    }

    /// Asks the server to end the session of `refreshToken` (RFC 7009). Failures are ignored: the caller has already
    /// signed out locally, and a server that cannot be reached lets the token expire.
    func revoke(refreshToken: String) async {
        let fields = form([("token", refreshToken), ("token_type_hint", "refresh_token")])
        _ = try? await post(.revoke, fields, correlationId: UUID())
    }

    /// POSTs and decodes a 200 answer as `T`; an answer without a field `T` requires is a general failure.
    func post<T: Decodable>(
        _ endpoint: NativeAuthEndpoint,
        _ fields: [(String, String)],
        correlationId: UUID,
        as type: T.Type
    ) async throws(NativeAuthFailure) -> T {
        try await Self.post(configuration, endpoint, fields, correlationId: correlationId, as: type)
    }

    static func post<T: Decodable>(
        _ configuration: NativeAuthConfiguration,
        _ endpoint: NativeAuthEndpoint,
        _ fields: [(String, String)],
        correlationId: UUID,
        as type: T.Type
    ) async throws(NativeAuthFailure) -> T {
        let data = try await post(configuration, endpoint, fields, correlationId: correlationId)
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw .general("Unexpected answer from \(endpoint.rawValue): \(error)", correlationId)
        }
    }

    /// A `/challenge` answer that must be an emailed code: the next token, where it went, and how long it is.
    func codeChallenge(_ endpoint: NativeAuthEndpoint, continuationToken: String, correlationId: UUID) async throws(NativeAuthFailure) -> SentCode {
        let answer = try await post(
            endpoint,
            form([("continuation_token", continuationToken), ("challenge_type", challengeType)]),
            correlationId: correlationId,
            as: NativeAuthStepResponse.self
        )
        return try SentCode(answer, correlationId: correlationId)
    }

    private static func excerpt(_ body: Data) -> String {
        String(decoding: body.prefix(200), as: UTF8.self)
    }

    /// Enough of any 200 answer to recognise the redirect fallback.
    private struct RedirectProbe: Decodable {
        var challengeType: String?
        var redirectReason: String?
        enum CodingKeys: String, CodingKey {
            case challengeType = "challenge_type"
            case redirectReason = "redirect_reason"
        }
    }

    // MARK: Tokens

    /// Redeems a token grant and, on success, stores the account as the core's current user (replacing the account
    /// of an earlier native sign-in: MSAL keeps one) and returns it. The session it replaces is signed out as
    /// ``NativeAuthUserAccountResult/signOut()`` would: its refresh token, which this client forgets, is revoked on
    /// the server (else it would stay alive there with no one able to end it), and a replaced other account is
    /// reported with ``AuthEvent/signedOut(userId:)``.
    func signIn(
        _ fields: [(String, String)],
        username: String,
        scopes: [String]?,
        correlationId: UUID
    ) async throws(NativeAuthFailure) -> NativeAuthUserAccountResult {
        let answer = try await post(.token, fields, correlationId: correlationId, as: NativeAuthTokenResponse.self)
        let user = try StoredUser(
            signedIn: answer,
            clientId: configuration.clientId,
            username: username,
            requestedScopes: scopes,
            now: configuration.now(),
            correlationId: correlationId
        )
        let replaced: [StoredUser]
        do {
            replaced = try core.mutate { users in
                let isReplaced = { (stored: StoredUser) in stored.id == user.id || stored.native != nil }
                let replaced = users.users.filter(isReplaced)
                users.users.removeAll(where: isReplaced)
                users.users.append(user)
                users.currentUserId = user.id
                return replaced
            }
        } catch {
            throw .general("Cannot save the account: \(error)", correlationId)
        }
        for old in replaced where old.loggedIn {
            if old.id != user.id { core.events.emit(.signedOut(userId: old.id)) }
            if let refreshToken = old.refreshToken, refreshToken != user.refreshToken {
                Task { [self] in await revoke(refreshToken: refreshToken) }
            }
        }
        core.events.emit(.signedIn(userId: user.id))
        return NativeAuthUserAccountResult(user, session: user.native!, engine: self)
    }

    /// The signed-in native account: the current user if it is one, else the latest native sign-in still signed in.
    var currentAccount: NativeAuthUserAccountResult? {
        let found = core.read { users -> StoredUser? in
            if let current = users.currentUserId.flatMap(users.user), current.loggedIn, current.native != nil { return current }
            return users.users.filter { $0.loggedIn && $0.native != nil }.max { $0.lastLogin < $1.lastLogin }
        }
        guard let found, let session = found.native else { return nil }
        return NativeAuthUserAccountResult(found, session: session, engine: self)
    }

    // MARK: Access tokens

    /// The cached access token if it will do, otherwise a refreshed one, through the core's single-flight refresher.
    func accessToken(userId: String, request: GetAccessTokenParameters.Values) async throws(RetrieveAccessTokenError) -> NativeAuthTokenResult {
        let correlationId = request.correlationId ?? UUID()
        guard let user = core.read({ $0.user(userId) }), user.loggedIn, let session = user.native else {
            throw RetrieveAccessTokenError(general: "The account is signed out", correlationId: correlationId)
        }
        let scopes = request.scopes.map { $0.filter { !Self.oidcScopes.contains($0) } } ?? session.requestedScopes
        if !request.forceRefresh, request.claimsRequest == nil, core.hasFreshAccessToken(user), Set(scopes).isSubset(of: Set(session.grantedScopes)) {
            return Self.result(user, request: request, correlationId: correlationId)
        }
        let refreshed: StoredUser
        do {
            refreshed = try await core.refreshed(
                userId, scopes: scopes, claims: request.claimsRequest, correlationId: correlationId,
                // A forced refresh always asks; otherwise one that ended since the look above may already have done it.
                replacing: request.forceRefresh ? nil : (user.accessToken ?? "")
            )
        } catch let failure as NativeAuthFailure {
            throw Self.tokenError(failure)
        } catch {
            throw RetrieveAccessTokenError(general: "The refresh failed: \(error)", correlationId: correlationId)
        }
        return Self.result(refreshed, request: request, correlationId: correlationId)
    }

    private static func result(_ user: StoredUser, request: GetAccessTokenParameters.Values, correlationId: UUID) -> NativeAuthTokenResult {
        NativeAuthTokenResult(
            accessToken: user.accessToken ?? "",
            refreshToken: request.returnRefreshToken ? user.refreshToken : nil,
            scopes: user.native?.grantedScopes ?? [],
            expiresOn: user.native?.expiresOn,
            correlationId: correlationId
        )
    }

    private static func tokenError(_ failure: NativeAuthFailure) -> RetrieveAccessTokenError {
        if failure.isRedirect { return RetrieveAccessTokenError(.browserRequired, failure) }
        if failure.isServerError(.expiredRefreshToken) {
            return RetrieveAccessTokenError(.refreshTokenExpired, failure, fixedText: NativeAuthErrorText.refreshTokenExpired)
        }
        if failure.isServerError(.invalidScope) {
            return RetrieveAccessTokenError(.invalidScope, failure, fixedText: NativeAuthErrorText.invalidScope)
        }
        return RetrieveAccessTokenError(.generalError, failure)
    }
}

/// A `/challenge` answer that sent a code.
struct SentCode: Sendable {
    var continuationToken: String
    var sentTo: String
    var channel: NativeAuthChannelType
    var codeLength: Int

    /// Reads an `oob` challenge; the redirect was handled already, so anything else is unexpected.
    init(_ answer: NativeAuthStepResponse, correlationId: UUID) throws(NativeAuthFailure) {
        guard answer.challengeType == .oob else {
            throw .general("Unexpected challenge type \(answer.challengeType?.rawValue ?? "none"): expected oob", correlationId)
        }
        guard let token = answer.continuationToken, let label = answer.challengeTargetLabel, let channel = answer.challengeChannel,
            let length = answer.codeLength
        else {
            throw .general("The code challenge lacks continuation_token, challenge_target_label, challenge_channel or code_length", correlationId)
        }
        continuationToken = token
        sentTo = label
        self.channel = NativeAuthChannelType(value: channel)
        codeLength = length
    }
}
