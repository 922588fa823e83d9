/// How a user proves who they are, one case per login provider, encoded exactly as App Services clients
/// encode them (spec §3.2).
public enum Credentials: Sendable, Hashable {
    /// A new anonymous user (a logged-in anonymous user of this app is reused).
    case anonymous
    /// Email and password; the email travels as `username`.
    case emailPassword(email: String, password: String)
    /// A user API key.
    case userAPIKey(String)
    /// A server API key.
    case serverAPIKey(String)
    /// A payload for the app's custom authentication function.
    case function(payload: Document)
    /// A JWT from the app's own backend.
    case jwt(token: String)
    /// A Facebook access token.
    case facebook(accessToken: String)
    /// A Google server auth code.
    case google(serverAuthCode: String)
    /// A Google ID token.
    case googleId(token: String)
    /// A Sign in with Apple ID token.
    case apple(idToken: String)

    /// The provider path segment.
    public var provider: String {
        switch self {
        case .anonymous: "anon-user"
        case .emailPassword: "local-userpass"
        case .userAPIKey, .serverAPIKey: "api-key"
        case .function: "custom-function"
        case .jwt: "custom-token"
        case .facebook: "oauth2-facebook"
        case .google, .googleId: "oauth2-google"
        case .apple: "oauth2-apple"
        }
    }

    /// The login body without `options`.
    public var body: [String: JSONValue] {
        switch self {
        case .anonymous: ["provider": "anon-user"]
        case .emailPassword(let email, let password): ["provider": "local-userpass", "username": .string(email), "password": .string(password)]
        case .userAPIKey(let key), .serverAPIKey(let key): ["provider": "api-key", "key": .string(key)]
        case .function(let payload): AnyBSON.extendedJSON(payload).objectValue ?? [:]
        case .jwt(let token): ["provider": "custom-token", "token": .string(token)]
        case .facebook(let token): ["provider": "oauth2-facebook", "accessToken": .string(token)]
        case .google(let code): ["provider": "oauth2-google", "authCode": .string(code)]
        case .googleId(let token): ["provider": "oauth2-google", "id_token": .string(token)]
        case .apple(let token): ["provider": "oauth2-apple", "id_token": .string(token)]
        }
    }
}

/// Printing a credential (`print`, `dump`, string interpolation, a debugger's summary) names its provider and, for
/// email and password, the email: a password, key, token or function payload is never written out, so a log line
/// or a crash report that shows a credential shows no secret.
extension Credentials: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        switch self {
        case .anonymous: "Credentials.anonymous"
        case .emailPassword(let email, _): "Credentials.emailPassword(email: \(email), password: \(redacted))"
        case .userAPIKey: "Credentials.userAPIKey(\(redacted))"
        case .serverAPIKey: "Credentials.serverAPIKey(\(redacted))"
        case .function(let payload): "Credentials.function(payload: \(payload.count) fields, \(redacted))"
        case .jwt: "Credentials.jwt(token: \(redacted))"
        case .facebook: "Credentials.facebook(accessToken: \(redacted))"
        case .google: "Credentials.google(serverAuthCode: \(redacted))"
        case .googleId: "Credentials.googleId(token: \(redacted))"
        case .apple: "Credentials.apple(idToken: \(redacted))"
        }
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        switch self {
        case .emailPassword(let email, _): Mirror(self, children: ["email": email, "password": redacted], displayStyle: .enum)
        case .anonymous: Mirror(self, children: [], displayStyle: .enum)
        default: Mirror(self, children: ["provider": provider, "secret": redacted], displayStyle: .enum)
        }
    }
}
