import Crypto
import Foundation
import CryptoExtras

/// `providers.custom-token`: JWTs issued by the app's own backend (App Services' "Custom JWT").
public struct CustomTokenSettings: Sendable, Hashable {
    /// A key tokens may be signed with.
    public enum Key: Sendable, Hashable {
        /// `{ secret: "…" }`: HS256 with this shared secret (at least 32 bytes).
        case secret(String, kid: String?)
        /// `{ publicKey: "-----BEGIN PUBLIC KEY-----…" }`: RS256 (RSA, 2048 bits or more) or ES256 (P-256), by the key.
        case publicKey(String, kid: String?)
    }

    /// One claim copied into the user's profile `data`.
    public struct MetadataField: Sendable, Hashable {
        /// The claim, with dots for nested objects: `email`, `user.name`.
        public var name: String
        /// The profile key it lands under. Default: the last part of `name`.
        public var field: String
        /// Tokens without it are refused.
        public var required: Bool

        public init(name: String, field: String? = nil, required: Bool = false) {
            self.name = name
            self.field = field ?? String(name.split(separator: ".").last ?? Substring(name))
            self.required = required
        }
    }

    public var keys: [Key]
    /// A JWKS URL to take keys from, instead of or besides `keys`.
    public var jwksURL: String?
    /// Accepted `iss` values; any when empty.
    public var issuers: [String]
    /// Accepted `aud` values; any when empty.
    public var audiences: [String]
    public var metadataFields: [MetadataField]
    /// The longest a token may live, in seconds (`exp` − now and `exp` − `iat`); longer ones are refused.
    public var maxLifetime: Int

    public init(
        keys: [Key] = [], jwksURL: String? = nil, issuers: [String] = [], audiences: [String] = [], metadataFields: [MetadataField] = [],
        maxLifetime: Int = 86_400
    ) {
        self.keys = keys
        self.jwksURL = jwksURL
        self.issuers = issuers
        self.audiences = audiences
        self.metadataFields = metadataFields
        self.maxLifetime = maxLifetime
    }

    /// The configured keys, parsed. Throws a message for a key that is not usable.
    package func verificationKeys() throws -> [JWTVerificationKey] {
        try keys.map { key in
            switch key {
            case .secret(let secret, let kid):
                guard secret.utf8.count >= 32 else { throw ConfigurationError(key: "", message: "an HS256 secret needs at least 32 bytes") }
                return JWTVerificationKey(kid: kid, material: .hmac(SymmetricKey(data: Data(secret.utf8))))
            case .publicKey(let pem, let kid):
                if let rsa = try? _RSA.Signing.PublicKey(pemRepresentation: pem) { return JWTVerificationKey(kid: kid, material: .rsa(rsa)) }
                if let p256 = try? P256.Signing.PublicKey(pemRepresentation: pem) { return JWTVerificationKey(kid: kid, material: .p256(p256)) }
                throw ConfigurationError(key: "", message: "not a PEM public key of RSA (2048 bits or more) or P-256")
            }
        }
    }
}

/// An OpenID Connect identity provider whose ID tokens log users in: Google and Apple.
public struct OpenIDSettings: Sendable, Hashable {
    /// Accepted `aud` values: the OAuth client ids (Google) or bundle and service ids (Apple) of the app.
    public var clientIds: [String]
    /// Accepted `iss` values.
    public var issuers: [String]
    public var jwksURL: String

    public init(clientIds: [String], issuers: [String], jwksURL: String) {
        self.clientIds = clientIds
        self.issuers = issuers
        self.jwksURL = jwksURL
    }
}

/// `providers.oauth2-google`.
public struct GoogleSettings: Sendable, Hashable {
    public var openID: OpenIDSettings
    /// For server auth codes (`Credentials.google(serverAuthCode:)`): the web client id codes are issued to, its
    /// secret, and the redirect URI the app used (usually empty for iOS apps).
    public var serverClientId: String?
    public var clientSecret: String?
    public var redirectURI: String
    public var tokenURL: String

    public static let defaultIssuers = ["https://accounts.google.com", "accounts.google.com"]
    public static let defaultJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
    public static let defaultTokenURL = "https://oauth2.googleapis.com/token"

    public init(
        clientIds: [String], serverClientId: String? = nil, clientSecret: String? = nil, redirectURI: String = "",
        issuers: [String] = GoogleSettings.defaultIssuers, jwksURL: String = GoogleSettings.defaultJWKSURL,
        tokenURL: String = GoogleSettings.defaultTokenURL
    ) {
        openID = OpenIDSettings(clientIds: clientIds, issuers: issuers, jwksURL: jwksURL)
        self.serverClientId = serverClientId
        self.clientSecret = clientSecret
        self.redirectURI = redirectURI
        self.tokenURL = tokenURL
    }
}

/// `providers.oauth2-apple`.
public struct AppleSettings: Sendable, Hashable {
    public var openID: OpenIDSettings

    public static let defaultIssuer = "https://appleid.apple.com"
    public static let defaultJWKSURL = "https://appleid.apple.com/auth/keys"

    public init(clientIds: [String], issuer: String = AppleSettings.defaultIssuer, jwksURL: String = AppleSettings.defaultJWKSURL) {
        openID = OpenIDSettings(clientIds: clientIds, issuers: [issuer], jwksURL: jwksURL)
    }
}

/// `providers.oauth2-facebook`.
public struct FacebookSettings: Sendable, Hashable {
    /// The Facebook app's id and secret: access tokens are checked with `debug_token` using the app token.
    public var appId: String
    public var appSecret: String
    /// The Graph API base, with its version.
    public var graphURL: String

    public static let defaultGraphURL = "https://graph.facebook.com/v21.0"

    public init(appId: String, appSecret: String, graphURL: String = FacebookSettings.defaultGraphURL) {
        self.appId = appId
        self.appSecret = appSecret
        self.graphURL = graphURL
    }
}

/// A webhook Gatehouse calls: a confirmation or reset function, or the custom-function login.
public struct WebhookSettings: Sendable, Hashable {
    public var url: String
    /// `whsec_` and the base64 of at least 24 random bytes (Standard Webhooks).
    public var secret: String
    /// Seconds to wait for the answer, connecting included. Default 5.
    public var timeout: TimeInterval

    public init(url: String, secret: String, timeout: TimeInterval = 5) {
        self.url = url
        self.secret = secret
        self.timeout = timeout
    }
}
