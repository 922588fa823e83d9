/// Request and response bodies of the Client API v2.0 (spec §2–§3). Field names are the wire names.

/// `GET /api/client/v2.0/app/{appId}/location`.
public struct LocationResponse: Codable, Hashable, Sendable {
    public var deploymentModel: String
    public var location: String
    /// The public base URL (scheme, host, port; no path).
    public var hostname: String
    public var wsHostname: String

    public init(deploymentModel: String, location: String, hostname: String, wsHostname: String) {
        self.deploymentModel = deploymentModel
        self.location = location
        self.hostname = hostname
        self.wsHostname = wsHostname
    }

    enum CodingKeys: String, CodingKey {
        case deploymentModel = "deployment_model"
        case location, hostname
        case wsHostname = "ws_hostname"
    }
}

/// `local-userpass/register`.
public struct RegisterRequest: Codable, Hashable, Sendable {
    public var email: String
    public var password: String
    public init(email: String, password: String) {
        self.email = email
        self.password = password
    }
}

/// `local-userpass/confirm`.
public struct ConfirmRequest: Codable, Hashable, Sendable {
    public var token: String
    public var tokenId: String
    public init(token: String, tokenId: String) {
        self.token = token
        self.tokenId = tokenId
    }
}

/// `local-userpass/confirm/send`, `confirm/call` and `reset/send`.
public struct EmailRequest: Codable, Hashable, Sendable {
    public var email: String
    public init(email: String) { self.email = email }
}

/// `local-userpass/reset/call`: runs the reset function; `arguments` go to it, the password never does.
public struct CallResetFunctionRequest: Codable, Hashable, Sendable {
    public var email: String
    public var password: String
    public var arguments: [JSONValue]?
    public init(email: String, password: String, arguments: [JSONValue]? = nil) {
        self.email = email
        self.password = password
        self.arguments = arguments
    }
}

/// `local-userpass/reset`.
public struct ResetPasswordRequest: Codable, Hashable, Sendable {
    public var password: String
    public var token: String
    public var tokenId: String
    public init(password: String, token: String, tokenId: String) {
        self.password = password
        self.token = token
        self.tokenId = tokenId
    }
}

/// `local-userpass/reset/call`: the email, the new password, and arguments passed to the reset function.
public struct ResetPasswordCallRequest: Codable, Hashable, Sendable {
    public var email: String
    public var password: String
    public var arguments: [JSONValue]
    public init(email: String, password: String, arguments: [JSONValue]) {
        self.email = email
        self.password = password
        self.arguments = arguments
    }
}

/// `options` of a login body. `device` is opaque: the server keeps it with the session.
public struct LoginOptions: Codable, Hashable, Sendable {
    public var device: [String: JSONValue]?
    public init(device: [String: JSONValue]? = nil) { self.device = device }
}

/// `local-userpass/login`. The email travels as `username`.
public struct EmailPasswordLoginRequest: Codable, Hashable, Sendable {
    public var provider: String?
    public var username: String
    public var password: String
    public var options: LoginOptions?
    public init(username: String, password: String, options: LoginOptions? = nil) {
        self.provider = "local-userpass"
        self.username = username
        self.password = password
        self.options = options
    }
}

/// `anon-user/login`: only `options`.
public struct AnonymousLoginRequest: Codable, Hashable, Sendable {
    public var provider: String?
    public var options: LoginOptions?
    public init(options: LoginOptions? = nil) {
        self.provider = "anon-user"
        self.options = options
    }
}

/// `custom-token/login`: a JWT from the app's own backend.
public struct CustomTokenLoginRequest: Codable, Hashable, Sendable {
    public var provider: String?
    public var token: String
    public var options: LoginOptions?
    public init(token: String, options: LoginOptions? = nil) {
        self.provider = "custom-token"
        self.token = token
        self.options = options
    }
}

/// `oauth2-google/login`: an ID token, or a server auth code to exchange.
public struct GoogleLoginRequest: Codable, Hashable, Sendable {
    public var provider: String?
    public var idToken: String?
    public var authCode: String?
    public var options: LoginOptions?
    public init(idToken: String? = nil, authCode: String? = nil, options: LoginOptions? = nil) {
        self.provider = "oauth2-google"
        self.idToken = idToken
        self.authCode = authCode
        self.options = options
    }
    enum CodingKeys: String, CodingKey {
        case provider, authCode, options
        case idToken = "id_token"
    }
}

/// `oauth2-apple/login`: a Sign in with Apple ID token.
public struct AppleLoginRequest: Codable, Hashable, Sendable {
    public var provider: String?
    public var idToken: String
    public var options: LoginOptions?
    public init(idToken: String, options: LoginOptions? = nil) {
        self.provider = "oauth2-apple"
        self.idToken = idToken
        self.options = options
    }
    enum CodingKeys: String, CodingKey {
        case provider, options
        case idToken = "id_token"
    }
}

/// `oauth2-facebook/login`: a Facebook user access token.
public struct FacebookLoginRequest: Codable, Hashable, Sendable {
    public var provider: String?
    public var accessToken: String
    public var options: LoginOptions?
    public init(accessToken: String, options: LoginOptions? = nil) {
        self.provider = "oauth2-facebook"
        self.accessToken = accessToken
        self.options = options
    }
}

/// The answer to every login.
public struct LoginResponse: Codable, Hashable, Sendable {
    public var accessToken: String
    public var refreshToken: String
    /// 24 hex digits.
    public var userId: String
    /// 24 hex digits; identifies the session's device.
    public var deviceId: String

    public init(accessToken: String, refreshToken: String, userId: String, deviceId: String) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.userId = userId
        self.deviceId = deviceId
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case userId = "user_id"
        case deviceId = "device_id"
    }
}

/// `POST /api/client/v2.0/auth/session`: a new access token.
public struct SessionResponse: Codable, Hashable, Sendable {
    public var accessToken: String
    public init(accessToken: String) { self.accessToken = accessToken }
    enum CodingKeys: String, CodingKey { case accessToken = "access_token" }
}

/// One identity of a user, as the profile lists it.
public struct ProfileIdentity: Codable, Hashable, Sendable {
    /// The identity's id within its provider (for `local-userpass`, a 24-hex id).
    public var id: String
    /// `local-userpass`, `anon-user`, `api-key`, …
    public var providerType: String
    /// The id of the app's provider configuration.
    public var providerId: String

    public init(id: String, providerType: String, providerId: String) {
        self.id = id
        self.providerType = providerType
        self.providerId = providerId
    }

    enum CodingKeys: String, CodingKey {
        case id
        case providerType = "provider_type"
        case providerId = "provider_id"
    }
}

/// `GET /api/client/v2.0/auth/profile`.
public struct ProfileResponse: Codable, Hashable, Sendable {
    public var userId: String
    public var domainId: String
    public var identities: [ProfileIdentity]
    /// Profile data; well-known keys (`email`, `name`, …) are always strings.
    public var data: [String: JSONValue]
    /// `normal` for users; `server` for server API keys.
    public var type: String

    public init(userId: String, domainId: String, identities: [ProfileIdentity], data: [String: JSONValue], type: String) {
        self.userId = userId
        self.domainId = domainId
        self.identities = identities
        self.data = data
        self.type = type
    }

    enum CodingKeys: String, CodingKey {
        case userId = "user_id"
        case domainId = "domain_id"
        case identities, data, type
    }
}

/// `api-key/login`: a user or server API key.
public struct APIKeyLoginRequest: Codable, Hashable, Sendable {
    public var provider: String?
    /// The key's secret, as shown once when it was created.
    public var key: String
    public var options: LoginOptions?
    public init(key: String, options: LoginOptions? = nil) {
        self.provider = "api-key"
        self.key = key
        self.options = options
    }
}

/// `POST /api/client/v2.0/auth/api_keys`.
public struct CreateAPIKeyRequest: Codable, Hashable, Sendable {
    public var name: String
    public init(name: String) { self.name = name }
}

/// One API key as the `api_keys` routes answer it. `key` is present only in the answer to its creation.
public struct APIKeyResponse: Codable, Hashable, Sendable {
    /// 24 hex digits, a plain string (Realm clients refuse `{"$oid": …}` here).
    public var id: String
    public var name: String
    /// The secret; only in the answer to its creation.
    public var key: String?
    public var disabled: Bool

    public init(id: String, name: String, key: String? = nil, disabled: Bool) {
        self.id = id
        self.name = name
        self.key = key
        self.disabled = disabled
    }

    enum CodingKeys: String, CodingKey {
        case id = "_id"
        case name, key, disabled
    }
}

// MARK: Account self-service (Gatehouse extensions)

/// One session in the answer to `GET /api/client/v2.0/auth/sessions`. Times are Unix seconds.
public struct SessionInfo: Codable, Hashable, Sendable {
    /// The session's id (the `sid` claim of its tokens).
    public var id: String
    /// Whether it is the caller's own session.
    public var current: Bool
    /// `first-party`, `api-key` or `anonymous`.
    public var kind: String
    /// RFC 8176 methods that proved it: `pwd`, `otp`, `fed`, `apikey`.
    public var amr: [String]
    /// When it was last proven.
    public var authTime: Int64
    public var createdAt: Int64
    /// Its last login, refresh or rotation, to the minute.
    public var lastUsedAt: Int64
    public var expiresAt: Int64
    public var deviceId: String
    /// What the client said of its device at login, or the native client's id.
    public var device: [String: JSONValue]
    /// The native auth client it was issued to; nil for a Client API login.
    public var clientId: String?

    public init(
        id: String, current: Bool, kind: String, amr: [String], authTime: Int64, createdAt: Int64, lastUsedAt: Int64, expiresAt: Int64,
        deviceId: String, device: [String: JSONValue], clientId: String?
    ) {
        self.id = id
        self.current = current
        self.kind = kind
        self.amr = amr
        self.authTime = authTime
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.expiresAt = expiresAt
        self.deviceId = deviceId
        self.device = device
        self.clientId = clientId
    }

    enum CodingKeys: String, CodingKey {
        case id, current, kind, amr, device
        case authTime = "auth_time"
        case createdAt = "created_at"
        case lastUsedAt = "last_used_at"
        case expiresAt = "expires_at"
        case deviceId = "device_id"
        case clientId = "client_id"
    }
}

/// `POST /api/client/v2.0/auth/reauthenticate`: the account's password, or the code
/// `auth/reauthenticate/send` mailed for this session (one of the two).
public struct ReauthenticateRequest: Codable, Hashable, Sendable {
    public var password: String?
    public var code: String?
    public init(password: String) { self.password = password }
    public init(code: String) { self.code = code }
}

/// `POST /api/client/v2.0/auth/email`.
public struct ChangeEmailRequest: Codable, Hashable, Sendable {
    /// The new address.
    public var email: String
    /// The current password, needed when the session's proof is not recent.
    public var currentPassword: String?

    public init(email: String, currentPassword: String? = nil) {
        self.email = email
        self.currentPassword = currentPassword
    }
}

/// `POST /api/client/v2.0/auth/email/confirm`: the code the new address got.
public struct ConfirmEmailChangeRequest: Codable, Hashable, Sendable {
    public var code: String
    public init(code: String) { self.code = code }
}

/// `POST /api/client/v2.0/auth/password`.
public struct ChangePasswordRequest: Codable, Hashable, Sendable {
    /// The new password.
    public var password: String
    /// The current password, needed when the session's proof is not recent.
    public var currentPassword: String?

    public init(password: String, currentPassword: String? = nil) {
        self.password = password
        self.currentPassword = currentPassword
    }
}
