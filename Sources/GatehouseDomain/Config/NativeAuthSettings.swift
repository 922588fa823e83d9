import Foundation

/// `apps[].nativeAuth`: the native auth API (`/native/{appId}/…`) for one app. Its users are the app's
/// `local-userpass` users: an account made by native sign-up can sign in with the Client API and the other way
/// round (an account made without a password signs in with emailed codes only, until a password reset gives it one).
///
/// ```yaml
/// nativeAuth:
///   enabled: true
///   clientIds: ["ios-app"]
///   signUp: { methods: [emailOTP, emailPassword] }
///   attributes:
///     - { name: displayName, type: string, required: true }
///     - { name: country, type: string, required: false, regex: "^[A-Z]{2}$" }
///   code: { length: 8, ttl: 600, maxAttempts: 5, resendInterval: 60 }
///   continuationTokenTTL: 600
///   refreshTokenReuseWindow: 30
/// ```
public struct NativeAuthSettings: Sendable, Hashable {
    /// How a new account proves itself. The email address is always verified with a code.
    public enum SignUpMethod: String, Sendable, Hashable, CaseIterable {
        /// Code only: the account has no password and signs in with emailed codes.
        case emailOTP
        /// Code and password: the account must set a password, at `signup/start` or when asked
        /// (`credential_required`).
        case emailPassword
    }

    /// One profile field asked at sign-up. Values are strings; they land in the user's profile data.
    public struct Attribute: Sendable, Hashable {
        public var name: String
        /// `string`, the only type today.
        public var type: String
        public var required: Bool
        /// A regular expression the whole value must match.
        public var regex: String?
        public init(name: String, type: String = "string", required: Bool = false, regex: String? = nil) {
            self.name = name
            self.type = type
            self.required = required
            self.regex = regex
        }
    }

    /// `code`: the emailed one-time codes.
    public struct CodeSettings: Sendable, Hashable {
        /// Digits. Default 8 (4…10).
        public var length: Int
        /// Seconds a code stays valid. Default 600.
        public var ttl: Int
        /// Wrong codes (and wrong passwords) a flow survives; one more and it must start again. Resends do not
        /// reset the count. Default 5.
        public var maxAttempts: Int
        /// Seconds before a new code may be asked for. Default 60.
        public var resendInterval: Int
        public init(length: Int = 8, ttl: Int = 600, maxAttempts: Int = 5, resendInterval: Int = 60) {
            self.length = length
            self.ttl = ttl
            self.maxAttempts = maxAttempts
            self.resendInterval = resendInterval
        }
    }

    /// Off answers every request `invalid_client` / `nativeauthapi_disabled`. Default true once the key exists.
    public var enabled: Bool
    /// The `client_id`s accepted; any other is `unauthorized_client`. At least one.
    public var clientIds: [String]
    /// `signUp.methods`. Default both.
    public var signUpMethods: Set<SignUpMethod>
    /// `attributes`: asked at sign-up, by name.
    public var attributes: [Attribute]
    public var code: CodeSettings
    /// Seconds each continuation token stays valid. Default 600 (Entra's maximum).
    public var continuationTokenTTL: Int
    /// Seconds during which a just-rotated refresh token, used again, returns the same new token (a client that
    /// lost the answer retries). After the window, using it again revokes the session: it was stolen or replayed.
    /// 0: no retry, so a second use, even one racing the first, revokes the session. Default 30.
    public var refreshTokenReuseWindow: Int

    public init(
        enabled: Bool = true,
        clientIds: [String],
        signUpMethods: Set<SignUpMethod> = [.emailOTP, .emailPassword],
        attributes: [Attribute] = [],
        code: CodeSettings = .init(),
        continuationTokenTTL: Int = 600,
        refreshTokenReuseWindow: Int = 30
    ) {
        self.enabled = enabled
        self.clientIds = clientIds
        self.signUpMethods = signUpMethods
        self.attributes = attributes
        self.code = code
        self.continuationTokenTTL = continuationTokenTTL
        self.refreshTokenReuseWindow = refreshTokenReuseWindow
    }

    /// True when every account needs a password (sign-up with a code only is not offered).
    public var requiresPassword: Bool { !signUpMethods.contains(.emailOTP) }
}
