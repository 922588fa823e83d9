import GatehouseWire
import Hummingbird
import Logging

/// The Client API v2.0 (spec `client-api-v2.md`): provider routes under `/api/client/v2.0/app/{appId}`, session,
/// profile, delete and api_keys under `/api/client/v2.0/auth`, where the app comes from the token.
struct ClientAPIRoutes {
    let env: AuthEnvironment

    private var emailPassword: EmailPasswordService { EmailPasswordService(env: env) }
    private var sessions: SessionService { SessionService(env: env) }

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
        local.post("reset/send", use: emailPassword(EmailRequest.self) { service, appId, body in
            try await service.sendPasswordReset(appId: appId, email: body.email)
        })
        local.post("reset", use: emailPassword(ResetPasswordRequest.self) { service, appId, body in
            try await service.resetPassword(appId: appId, token: body.token, tokenId: body.tokenId, password: body.password)
        })
        app.post("auth/providers/:provider/login", use: login)

        let auth = router.group("api/client/v2.0/auth")
        auth.post("session", use: refresh)
        auth.delete("session", use: logOut)
        auth.get("profile", use: profile)
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
            try await action(EmailPasswordService(env: env), id, body)
            return try JSONResponse.empty(status)
        }
    }

    @Sendable func login(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let id = try appId(context)
        let app = try env.app(id)
        let provider = try context.parameters.require("provider")
        let user: UserRecord
        let options: LoginOptions?
        // The key of an api-key login: the session ends when the key is disabled or deleted.
        var apiKeyId: String?
        switch provider {
        case EmailPasswordService.providerType:
            let body = try await request.decodeClientAPIBody(EmailPasswordLoginRequest.self, context: context)
            (user, _) = try await emailPassword.login(appId: app.id, username: body.username, password: body.password)
            options = body.options
        case AnonymousService.providerType:
            guard app.anonymousUsers else { throw AuthError.providerNotEnabled(provider) }
            options = try await request.decodeClientAPIBody(AnonymousLoginRequest.self, context: context).options
            (user, _) = try await AnonymousService(env: env).login(appId: app.id)
        case APIKeyService.providerType:
            guard app.apiKeys else { throw AuthError.providerNotEnabled(provider) }
            let body = try await request.decodeClientAPIBody(APIKeyLoginRequest.self, context: context)
            let key: APIKeyRecord
            (user, key) = try await APIKeyService(env: env).login(appId: app.id, key: body.key)
            options = body.options
            apiKeyId = key.id
        default:
            throw AuthError.providerNotEnabled(String(provider.prefix(64)))
        }
        let result = try await sessions.startSession(for: user, app: app, device: options?.device ?? [:], apiKeyId: apiKeyId)
        return try JSONResponse.make(
            LoginResponse(accessToken: result.accessToken, refreshToken: result.refreshToken, userId: result.userId, deviceId: result.deviceId)
        )
    }

    @Sendable func refresh(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let token = try await sessions.refresh(try request.bearerToken())
        return try JSONResponse.make(.created, SessionResponse(accessToken: token))
    }

    @Sendable func logOut(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await sessions.logOut(try request.bearerToken())
        return JSONResponse.noContent()
    }

    @Sendable func profile(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try JSONResponse.make(try await sessions.profile(try request.bearerToken()))
    }

    @Sendable func deleteUser(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await sessions.deleteUser(try request.bearerToken())
        return JSONResponse.noContent()
    }

    // MARK: API keys

    private var apiKeys: APIKeyService { APIKeyService(env: env) }

    private func keyId(_ context: GatehouseRequestContext) throws -> String {
        try context.parameters.require("keyId")
    }

    /// The caller behind the refresh token, checked before the body is read.
    private func keyOwner(_ request: Request) async throws -> SessionService.Caller {
        try await apiKeys.caller(refreshToken: try request.bearerToken())
    }

    @Sendable func createAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let caller = try await keyOwner(request)
        let body = try await request.decodeClientAPIBody(CreateAPIKeyRequest.self, context: context)
        return try JSONResponse.make(.created, try await apiKeys.create(caller: caller, name: body.name))
    }

    @Sendable func listAPIKeys(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try JSONResponse.make(try await apiKeys.list(caller: try await keyOwner(request)))
    }

    @Sendable func fetchAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try JSONResponse.make(try await apiKeys.fetch(caller: try await keyOwner(request), id: try keyId(context)))
    }

    @Sendable func deleteAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await apiKeys.delete(caller: try await keyOwner(request), id: try keyId(context))
        return JSONResponse.noContent()
    }

    @Sendable func enableAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await apiKeys.setDisabled(caller: try await keyOwner(request), id: try keyId(context), disabled: false)
        return JSONResponse.noContent()
    }

    @Sendable func disableAPIKey(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await apiKeys.setDisabled(caller: try await keyOwner(request), id: try keyId(context), disabled: true)
        return JSONResponse.noContent()
    }
}
