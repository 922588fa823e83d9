import Foundation
import GatehouseDomain
import GatehouseWire
import Hummingbird
import Logging

/// The Client API v2.0 (spec `client-api-v2.md`): provider routes under `/api/client/v2.0/app/{appId}`, session,
/// profile, delete and api_keys under `/api/client/v2.0/auth`, where the app comes from the token.
struct ClientAPIRoutes {
    let env: AuthEnvironment

    /// The request's services get the environment with the client's origin.
    private func sessions(_ context: GatehouseRequestContext) -> SessionService { SessionService(env: env.serving(context.origin)) }

    func register(on router: Router<GatehouseRequestContext>) {
        let app = router.group("api/client/v2.0/app/:appId")
        app.get("location", use: location)
        let local = app.group("auth/providers/local-userpass")
        local.post("register", use: emailPassword(RegisterRequest.self, answer: .created) { service, appId, body in
            try await service.register(appId: appId, email: body.email, password: body.password)
        })
        local.post("confirm", use: emailPassword(ConfirmRequest.self) { service, appId, body in
            try await service.confirm(appId: appId, token: body.token, tokenId: body.tokenId)
        })
        local.post("confirm/send", use: emailPassword(EmailRequest.self) { service, appId, body in
            try await service.resendConfirmation(appId: appId, email: body.email)
        })
        local.post("confirm/call", use: emailPassword(EmailRequest.self) { service, appId, body in
            try await service.retryCustomConfirmation(appId: appId, email: body.email)
        })
        local.post("reset/call", use: emailPassword(CallResetFunctionRequest.self) { service, appId, body in
            try await service.callResetFunction(appId: appId, email: body.email, password: body.password, arguments: body.arguments ?? [])
        })
        local.post("reset/send", use: emailPassword(EmailRequest.self) { service, appId, body in
            try await service.sendPasswordReset(appId: appId, email: body.email)
        })
        local.post("email/undo", use: undoEmailChange)
        local.post("reset", use: emailPassword(ResetPasswordRequest.self) { service, appId, body in
            try await service.resetPassword(appId: appId, token: body.token, tokenId: body.tokenId, password: body.password)
        })
        app.post("auth/providers/:provider/login", use: login)

        let auth = router.group("api/client/v2.0/auth")
        auth.post("session", use: refresh)
        auth.delete("session", use: logOut)
        auth.get("profile", use: profile)
        auth.delete("sessions", use: logOutEverywhere)
        auth.get("sessions", use: listSessions)
        auth.delete("sessions/:sessionId", use: endSession)
        auth.post("reauthenticate", use: reauthenticate)
        auth.post("reauthenticate/send", use: sendReauthenticationCode)
        auth.post("email", use: requestEmailChange)
        auth.post("email/confirm", use: confirmEmailChange)
        auth.post("password", use: changePassword)
        auth.delete("identities/:identityId", use: unlinkIdentity)
        auth.delete("delete", use: deleteUser)

        // User API keys, with the refresh token (spec §3.9).
        let keys = auth.group("api_keys")
        keys.post(use: createAPIKey)
        keys.get(use: listAPIKeys)
        keys.get(":keyId", use: fetchAPIKey)
        keys.delete(":keyId", use: deleteAPIKey)
        keys.put(":keyId/enable", use: enableAPIKey)
        keys.put(":keyId/disable", use: disableAPIKey)
    }

    private func appId(_ context: GatehouseRequestContext) throws -> String {
        try context.parameters.require("appId")
    }

    @Sendable func location(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        _ = try env.app(try appId(context))
        let base = env.publicURL
        let ws = base.hasPrefix("https://") ? "wss://" + base.dropFirst(8) : "ws://" + base.dropFirst(base.hasPrefix("http://") ? 7 : 0)
        return try JSONResponse.make(
            LocationResponse(deploymentModel: "LOCAL", location: env.configuration.server.location, hostname: base, wsHostname: String(ws))
        )
    }

    /// A `local-userpass` route whose answer clients ignore: checks the app (404 before reading the body),
    /// decodes `Body`, runs `action`, answers `{}`.
    private func emailPassword<Body: Decodable>(
        _: Body.Type,
        answer status: HTTPResponse.Status = .ok,
        _ action: @escaping @Sendable (EmailPasswordService, String, Body) async throws -> Void
    ) -> @Sendable (Request, GatehouseRequestContext) async throws -> Response {
        { [env] request, context in
            let id = try context.parameters.require("appId")
            _ = try env.app(id)
            let body = try await request.decodeClientAPIBody(Body.self, context: context)
            try await action(EmailPasswordService(env: env.serving(context.origin)), id, body)
            return try JSONResponse.empty(status)
        }
    }

    /// `POST …/auth/providers/{provider}/login`, and with `?link=true` (and the user's access token) the same
    /// credentials linked to the logged-in user instead (spec §3.2, §3.3). The route decodes the provider's body into
    /// a ``LoginCredential``; ``LoginService`` does the rest.
    @Sendable func login(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let app = try env.app(try appId(context))
        let provider = try context.parameters.require("provider")
        let logins = LoginService(env: env.serving(context.origin))
        if request.uri.queryParameters.get("link") == "true" {
            let caller = try await sessions(context).authenticate(try request.bearerToken(), as: .access)
            guard caller.app.id == app.id else { throw AuthError.invalidSession("invalid session: the token is for another app") }
            // Before the credential is read: a key session learns nothing about the credential it sent.
            let manager = try caller.manager(to: "link an identity")
            try logins.requireEnabled(provider, app: app)
            let (credential, _) = try await Self.credential(provider, request: request, context: context)
            return try JSONResponse.make(SessionResponse(accessToken: try await logins.link(credential, to: manager)))
        }
        try logins.requireEnabled(provider, app: app)
        let (credential, options) = try await Self.credential(provider, request: request, context: context)
        let result = try await logins.logIn(credential, app: app, device: options?.device ?? [:])
        return JSONResponse.make(
            .ok,
            json: LoginResponse(accessToken: result.accessToken, refreshToken: result.refreshToken, userId: result.userId, deviceId: result.deviceId).json()
        )
    }

    /// The credential and options of a login body, in the shape of each provider (spec §3.2).
    private static func credential(
        _ provider: String, request: Request, context: GatehouseRequestContext
    ) async throws -> (LoginCredential, LoginOptions?) {
        switch provider {
        case EmailPasswordService.providerType:
            let body = try await request.decodeClientAPIBody(EmailPasswordLoginRequest.self, context: context)
            return (.emailPassword(username: body.username, password: body.password), body.options)
        case AnonymousService.providerType:
            return (.anonymous, try await request.decodeClientAPIBody(AnonymousLoginRequest.self, context: context).options)
        case APIKeyService.providerType:
            let body = try await request.decodeClientAPIBody(APIKeyLoginRequest.self, context: context)
            return (.apiKey(body.key), body.options)
        case CustomTokenProvider.providerType:
            let body = try await request.decodeClientAPIBody(CustomTokenLoginRequest.self, context: context)
            return (.customToken(body.token), body.options)
        case GoogleProvider.providerType:
            let body = try await request.decodeClientAPIBody(GoogleLoginRequest.self, context: context)
            switch (body.idToken, body.authCode) {
            case (let token?, nil): return (.googleIDToken(token), body.options)
            case (nil, let code?): return (.googleAuthCode(code), body.options)
            case (nil, nil): throw ClientAPIError.missingParameter("id_token")
            default: throw ClientAPIError.invalidParameter("give either id_token or authCode, not both")
            }
        case AppleProvider.providerType:
            let body = try await request.decodeClientAPIBody(AppleLoginRequest.self, context: context)
            return (.appleIDToken(body.idToken), body.options)
        case FacebookProvider.providerType:
            let body = try await request.decodeClientAPIBody(FacebookLoginRequest.self, context: context)
            return (.facebookAccessToken(body.accessToken), body.options)
        case FunctionRunner.providerType:
            // The body is the payload itself (Realm sends no `provider` key here); `options` is Gatehouse's.
            var payload = try await request.decodeClientAPIBody([String: JSONValue].self, context: context)
            var options: LoginOptions?
            if let sent = payload.removeValue(forKey: "options") {
                guard let decoded = try? JSONDecoder().decode(LoginOptions.self, from: JSONEncoder().encode(sent)) else {
                    throw ClientAPIError.invalidParameter("parameter 'options' must be an object like {\"device\": {…}}")
                }
                options = decoded
            }
            return (.function(payload: payload), options)
        default:
            throw AuthError.providerNotEnabled(String(provider.prefix(64)))
        }
    }

    @Sendable func refresh(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let token = try await sessions(context).refresh(try request.bearerToken())
        // `SessionResponse`, written by hand: every refresh answers it (the test of the route decodes it as one).
        var body = Array(#"{"access_token":"#.utf8)
        JSONText.appendString(token, to: &body)
        body.append(UInt8(ascii: "}"))
        return JSONResponse.make(.created, json: body)
    }

    @Sendable func logOut(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await sessions(context).logOut(try request.bearerToken())
        return JSONResponse.noContent()
    }

    /// `DELETE auth/sessions` (a Gatehouse extension): with an access token, ends every session of its user; with
    /// `?except=current`, every one but the caller's.
    @Sendable func logOutEverywhere(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        switch request.uri.queryParameters.get("except") {
        case nil: try await sessions(context).logOutEverywhere(try request.bearerToken())
        case "current":
            let account = account(context)
            try await account.endOtherSessions(try await account.manager(try request.bearerToken(), to: "end the user's other sessions"))
        default: throw ClientAPIError.invalidParameter("parameter 'except' must be 'current'")
        }
        return JSONResponse.noContent()
    }

    // MARK: Account self-service (Gatehouse extensions)

    private func account(_ context: GatehouseRequestContext) -> AccountService { AccountService(env: env.serving(context.origin)) }

    @Sendable func listSessions(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        let sessions = try await account.sessions(try await account.manager(try request.bearerToken(), to: "list the user's sessions"))
        return try JSONResponse.make(sessions.map { session in
            let record = session.record
            return SessionInfo(
                id: record.id, current: session.isCurrent, kind: record.kind.rawValue, amr: record.methods.map(\.rawValue),
                authTime: Self.seconds(record.provenAt ?? record.createdAt), createdAt: Self.seconds(record.createdAt),
                lastUsedAt: Self.seconds(record.lastActiveAt), expiresAt: Self.seconds(record.expiresAt), deviceId: record.deviceId,
                device: record.device, clientId: record.clientId
            )
        })
    }

    private static func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970) }

    @Sendable func endSession(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        let manager = try await account.manager(try request.bearerToken(), to: "end a session")
        try await account.endSession(manager, id: try context.parameters.require("sessionId"))
        return JSONResponse.noContent()
    }

    @Sendable func reauthenticate(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        // The token before the body.
        let manager = try await account.manager(try request.bearerToken(), to: "reauthenticate")
        let body = try await request.decodeClientAPIBody(ReauthenticateRequest.self, context: context)
        switch (body.password, body.code) {
        case (let password?, nil): try await account.reauthenticate(manager, password: password)
        case (nil, let code?): try await account.reauthenticate(manager, code: code)
        case (nil, nil): throw ClientAPIError.missingParameter("password")
        default: throw ClientAPIError.invalidParameter("give either password or code, not both")
        }
        return JSONResponse.noContent()
    }

    @Sendable func sendReauthenticationCode(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        try await account.sendReauthenticationCode(try await account.manager(try request.bearerToken(), to: "reauthenticate"))
        return JSONResponse.noContent()
    }

    @Sendable func requestEmailChange(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        let manager = try await account.manager(try request.bearerToken(), to: "change the email address")
        let body = try await request.decodeClientAPIBody(ChangeEmailRequest.self, context: context)
        try await account.requestEmailChange(manager, to: body.email, currentPassword: body.currentPassword)
        return JSONResponse.noContent()
    }

    @Sendable func confirmEmailChange(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        let manager = try await account.manager(try request.bearerToken(), to: "change the email address")
        let body = try await request.decodeClientAPIBody(ConfirmEmailChangeRequest.self, context: context)
        try await account.confirmEmailChange(manager, code: body.code)
        return JSONResponse.noContent()
    }

    /// `POST …/local-userpass/email/undo`: the link the old address got after a change (no token: the link is the
    /// proof).
    @Sendable func undoEmailChange(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let appId = try context.parameters.require("appId")
        _ = try env.app(appId)
        let body = try await request.decodeClientAPIBody(ConfirmRequest.self, context: context)
        try await account(context).undoEmailChange(appId: appId, token: body.token, tokenId: body.tokenId)
        return try JSONResponse.empty(.ok)
    }

    @Sendable func changePassword(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        let manager = try await account.manager(try request.bearerToken(), to: "change the password")
        let body = try await request.decodeClientAPIBody(ChangePasswordRequest.self, context: context)
        try await account.changePassword(manager, to: body.password, currentPassword: body.currentPassword)
        return JSONResponse.noContent()
    }

    @Sendable func unlinkIdentity(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let account = account(context)
        let manager = try await account.manager(try request.bearerToken(), to: "unlink an identity")
        try await account.unlink(
            manager, identityId: try context.parameters.require("identityId"), providerType: request.uri.queryParameters.get("provider_type")
        )
        return JSONResponse.noContent()
    }

    @Sendable func profile(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let profile = try await sessions(context).profile(try request.bearerToken())
        return JSONResponse.make(
            .ok,
            json: ProfileResponse(
                userId: profile.userId, domainId: profile.domainId,
                identities: profile.identities.map { ProfileIdentity(id: $0.id, providerType: $0.providerType, providerId: $0.providerId) },
                data: profile.data, type: profile.isServerUser ? "server" : "normal"
            ).json()
        )
    }

    @Sendable func deleteUser(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await sessions(context).deleteUser(try request.bearerToken())
        return JSONResponse.noContent()
    }

    // MARK: API keys

    private func apiKeys(_ context: GatehouseRequestContext) -> APIKeyService { APIKeyService(env: env.serving(context.origin)) }

    private func keyId(_ context: GatehouseRequestContext) throws -> String {
        try context.parameters.require("keyId")
    }

    /// The caller behind the refresh token, checked before the body is read.
    private func keyOwner(_ request: Request, _ context: GatehouseRequestContext) async throws -> SessionService.Caller {
        try await apiKeys(context).caller(refreshToken: try request.bearerToken())
    }

    /// The `auth/api_keys` body of a key.
    private static func body(_ key: APIKeyService.KeyView) -> APIKeyResponse {
        APIKeyResponse(id: key.id, name: key.name, key: key.secret, disabled: key.disabled)
    }

    @Sendable func createAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let caller = try await keyOwner(request, context)
        let body = try await request.decodeClientAPIBody(CreateAPIKeyRequest.self, context: context)
        return try JSONResponse.make(.created, Self.body(try await apiKeys(context).create(caller: caller, name: body.name)))
    }

    @Sendable func listAPIKeys(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try JSONResponse.make(try await apiKeys(context).list(caller: try await keyOwner(request, context)).map(Self.body))
    }

    @Sendable func fetchAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try JSONResponse.make(Self.body(try await apiKeys(context).fetch(caller: try await keyOwner(request, context), id: try keyId(context))))
    }

    @Sendable func deleteAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await apiKeys(context).delete(caller: try await keyOwner(request, context), id: try keyId(context))
        return JSONResponse.noContent()
    }

    @Sendable func enableAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await apiKeys(context).setDisabled(caller: try await keyOwner(request, context), id: try keyId(context), disabled: false)
        return JSONResponse.noContent()
    }

    @Sendable func disableAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await apiKeys(context).setDisabled(caller: try await keyOwner(request, context), id: try keyId(context), disabled: true)
        return JSONResponse.noContent()
    }
}
