import Foundation
import GatehouseWire
import Logging

/// A credential someone presents to log in or to link, as a façade decoded it from its protocol's request.
package enum LoginCredential: Sendable {
    case emailPassword(username: String, password: String)
    case anonymous
    case apiKey(String)
    case customToken(String)
    case googleIDToken(String)
    case googleAuthCode(String)
    case appleIDToken(String)
    case facebookAccessToken(String)
    /// The custom function's payload (without Gatehouse's `options`).
    case function(payload: [String: JSONValue])

    /// The provider's name in the Client API (`local-userpass`, `api-key`, …).
    package var providerType: String {
        switch self {
        case .emailPassword: EmailPasswordService.providerType
        case .anonymous: AnonymousService.providerType
        case .apiKey: APIKeyService.providerType
        case .customToken: CustomTokenProvider.providerType
        case .googleIDToken, .googleAuthCode: GoogleProvider.providerType
        case .appleIDToken: AppleProvider.providerType
        case .facebookAccessToken: FacebookProvider.providerType
        case .function: FunctionRunner.providerType
        }
    }
}

/// Login and linking, for every credential and both protocols: the credential is proved (with its provider's
/// checks and the app's limits), the user found or created, and a failure audited, here and nowhere else; the
/// session is the ``SessionGate``'s to start, for the proof it makes of this. The security model's provenance rule
/// lives here: a session for user U starts only for a credential U held before this request (or for the user this
/// login creates).
package struct LoginService: Sendable {
    package let env: AuthEnvironment

    /// Who a proved credential stands for (the ``SessionGate`` makes a ``SessionProof`` of it).
    package struct Proof: Sendable {
        package var user: UserRecord
        /// The API key that logged in: the session it starts ends when the key is disabled or deleted.
        package var apiKeyId: String?

        package init(user: UserRecord, apiKeyId: String? = nil) {
            self.user = user
            self.apiKeyId = apiKeyId
        }
    }

    /// Proves `credential` for a login and starts a session for its user through the gate (Client API
    /// `auth/providers/{provider}/login`). A failure to prove is audited (`login_failed`), a success too.
    package func logIn(_ credential: LoginCredential, app: AppSettings, device: [String: JSONValue]) async throws -> LoginResult {
        let gate = SessionGate(env: env)
        return try await gate.startSession(try await gate.prove(credential, app: app), app: app, device: device)
    }

    /// Records a session started for `user` (`login_succeeded`) by a native sign-in (whose session is one of its flow's
    /// effects); a Client API login writes the same row with its session (``logIn(_:app:device:)``).
    func succeeded(user: UserRecord, app: AppSettings, detail: [String: String]) async {
        await env.audit(.loginSucceeded, app: app.id, user: user.id, detail: detail)
    }

    /// Throws ``AuthError/providerNotEnabled(_:)`` unless the app logs in with `provider` (a Client API provider
    /// name). Façades call it before they read a credential's body.
    package func requireEnabled(_ provider: String, app: AppSettings) throws(AuthError) {
        let enabled = switch provider {
        case EmailPasswordService.providerType: app.localUserpass != nil
        case AnonymousService.providerType: app.anonymousUsers
        case APIKeyService.providerType: app.apiKeys
        case CustomTokenProvider.providerType: app.customToken != nil
        case GoogleProvider.providerType: app.google != nil
        case AppleProvider.providerType: app.apple != nil
        case FacebookProvider.providerType: app.facebook != nil
        case FunctionRunner.providerType: app.customFunction != nil
        default: false
        }
        guard enabled else { throw .providerNotEnabled(String(provider.prefix(64))) }
    }

    /// The user `credential` stands for, created on a provider's first login, and a password's login backoff, whose
    /// counts its success ends (the caller ends them: ``SessionGate``). Counted against the app's login limits (per
    /// client address; passwords per username and client too, with the login backoff; keys per key and client).
    ///
    /// - Parameter via: which protocol asked, for the audit log (`native auth`; nil for the Client API).
    package func proving(_ credential: LoginCredential, app: AppSettings, via: String? = nil) async throws -> (Proof, LoginBackoff?) {
        do {
            try requireEnabled(credential.providerType, app: app)
            if case .emailPassword(let username, let password) = credential {
                // A login (either protocol) may migrate a user from the old system; a link never does.
                let proof = try await EmailPasswordService(env: env).prove(app: app, username: username, password: password, migrate: true)
                return (Proof(user: proof.user), proof.backoff)
            }
            // An anonymous login makes a user, as a registration does.
            let makesAUser = if case .anonymous = credential { true } else { false }
            try await env.checkRateLimit(makesAUser ? .registration : .login, app: app)
            switch credential {
            case .anonymous:
                return (Proof(user: try await AnonymousService(env: env).login(appId: app.id).0), nil)
            case .apiKey(let secret):
                let (user, key) = try await APIKeyService(env: env).login(appId: app.id, key: secret)
                return (Proof(user: user, apiKeyId: key.id), nil)
            default:
                return (Proof(user: try await IdentityService(env: env).logIn(try await identity(credential, app: app), app: app)), nil)
            }
        } catch let error as AuthError {
            switch error {
            case .invalidCredentials, .invalidCredential, .invalidAPIKey, .confirmationRequired, .userDisabled:
                var detail = ["provider": credential.providerType, "reason": "\(error)"]
                detail["via"] = via
                await env.audit(.loginFailed, app: app.id, detail: detail)
            default: break
            }
            throw error
        }
    }

    /// Proves `credential` and adds its identity to the manager's user (`login?link=true`): the caller proved both
    /// sides, its session (a first-party one: ``AccountManager``) and the credential, checked as a login checks it.
    /// Anonymous and API-key credentials cannot be linked. Returns a new access token for the session.
    ///
    /// Adding a credential asks for a recent proof of the session (``SessionGate/requireRecentProof(_:exemptingAnonymousUsers:)``),
    /// checked before the credential is: a stolen session older than the app's `recentProofWindow` cannot add a way
    /// in that outlives the owner's password reset. An anonymous user may always link: it is how it upgrades, and it
    /// has no credential to prove again; once upgraded, its sessions are held to the window like any other.
    package func link(_ credential: LoginCredential, to manager: AccountManager) async throws -> String {
        let app = manager.caller.app
        let proof = try await SessionGate(env: env).requireRecentProof(manager.caller, exemptingAnonymousUsers: true)
        try requireEnabled(credential.providerType, app: app)
        let identity: ExternalIdentity
        if case .emailPassword(let username, let password) = credential {
            // Counted per address and username inside, as a login.
            _ = try await EmailPasswordService(env: env).authenticate(app: app, username: username, password: password)
            guard let email = EmailAddress(username) else { throw AuthError.invalidCredentials }
            identity = ExternalIdentity(providerType: credential.providerType, externalId: email.normalized, data: [:])
        } else {
            // A link attempt counts as a login attempt, whatever its credential.
            try await env.checkRateLimit(.login, app: app)
            switch credential {
            case .anonymous: throw AuthError.cannotLinkAnonymous
            case .apiKey: throw AuthError.cannotLinkAPIKey
            default: identity = try await self.identity(credential, app: app)
            }
        }
        try await IdentityService(env: env).link(identity, to: manager, proof: proof)
        return try SessionService(env: env).accessToken(for: manager.caller.user, session: manager.caller.session, app: app)
    }

    /// The identity an external provider (or the custom function) vouches for. Throws
    /// ``AuthError/providerNotEnabled(_:)`` when the app does not use that provider.
    private func identity(_ credential: LoginCredential, app: AppSettings) async throws -> ExternalIdentity {
        let providers = ProviderServices(env: env)
        let off = AuthError.providerNotEnabled(credential.providerType)
        switch credential {
        case .customToken(let token):
            guard let settings = app.customToken else { throw off }
            return try await providers.customToken(settings, app: app).identity(token: token)
        case .googleIDToken(let token):
            guard let settings = app.google else { throw off }
            return try await providers.google(settings).identity(idToken: token)
        case .googleAuthCode(let code):
            guard let settings = app.google else { throw off }
            return try await providers.google(settings).identity(authCode: code)
        case .appleIDToken(let token):
            guard let settings = app.apple else { throw off }
            return try await providers.apple(settings).identity(idToken: token)
        case .facebookAccessToken(let token):
            guard let settings = app.facebook else { throw off }
            return try await providers.facebook(settings).identity(accessToken: token)
        case .function(let payload):
            guard let settings = app.customFunction else { throw off }
            return try await FunctionRunner(env: env).login(appId: app.id, payload: payload, settings: settings)
        case .emailPassword, .anonymous, .apiKey:
            preconditionFailure("\(credential.providerType) is not an external identity")
        }
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
