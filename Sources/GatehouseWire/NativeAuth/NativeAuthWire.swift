import Foundation

/// The native auth API (spec `native-auth-api.md`): every request is a form-encoded POST to
/// `{baseURL}/native/{appId}/{endpoint}`; every answer is JSON in snake_case. Success and the `redirect` fallback
/// are HTTP 200; protocol errors are HTTP 400 with a ``NativeAuthErrorBody``.
public enum NativeAuthEndpoint: String, Sendable, CaseIterable {
    case signUpStart = "signup/v1.0/start"
    case signUpChallenge = "signup/v1.0/challenge"
    case signUpContinue = "signup/v1.0/continue"
    case signInInitiate = "oauth2/v2.0/initiate"
    case signInChallenge = "oauth2/v2.0/challenge"
    case token = "oauth2/v2.0/token"
    case resetPasswordStart = "resetpassword/v1.0/start"
    case resetPasswordChallenge = "resetpassword/v1.0/challenge"
    case resetPasswordContinue = "resetpassword/v1.0/continue"
    case resetPasswordSubmit = "resetpassword/v1.0/submit"
    case resetPasswordPollCompletion = "resetpassword/v1.0/poll_completion"
    /// Token revocation (RFC 7009): `token` (a refresh or access token) and `client_id`; 200 whatever the token.
    /// A Gatehouse addition: Entra has no native-auth revocation endpoint.
    case revoke = "oauth2/v2.0/revoke"

    /// The path under the server's base URL: `/native/{appId}/{endpoint}`.
    public func path(appId: String) -> String { "/native/\(appId)/\(rawValue)" }
}

/// The `challenge_type` values. Clients send a space-separated list that always includes `redirect`.
public enum NativeAuthChallengeType: String, Codable, Sendable, CaseIterable {
    /// An emailed one-time code ("out of band").
    case oob
    case password
    /// "Finish in a browser": the client cannot satisfy what the app requires.
    case redirect
}

/// `grant_type` values of `signup/v1.0/continue`, `resetpassword/v1.0/continue` and `oauth2/v2.0/token`.
public enum NativeAuthGrantType: String, Codable, Sendable, CaseIterable {
    case oob
    case password
    case attributes
    case continuationToken = "continuation_token"
    case refreshToken = "refresh_token"
}

/// The `error` strings of the native auth API. MSAL-based clients branch on them, so they are the spec's exactly.
public enum NativeAuthErrorName: String, Codable, Sendable, CaseIterable {
    case invalidRequest = "invalid_request"
    case invalidClient = "invalid_client"
    case unauthorizedClient = "unauthorized_client"
    case unsupportedChallengeType = "unsupported_challenge_type"
    case unsupportedGrantType = "unsupported_grant_type"
    case invalidGrant = "invalid_grant"
    case expiredToken = "expired_token"
    case expiredRefreshToken = "expired_refresh_token"
    case userAlreadyExists = "user_already_exists"
    case userNotFound = "user_not_found"
    case credentialRequired = "credential_required"
    case attributesRequired = "attributes_required"
    case verificationRequired = "verification_required"
    case invalidScope = "invalid_scope"
    /// Too many codes or code requests: wait `retry_after` seconds (Gatehouse; MSAL reports it as a general error).
    case slowDown = "slow_down"
}

/// The `suberror` strings.
public enum NativeAuthSuberror: String, Codable, Sendable, CaseIterable {
    case passwordTooWeak = "password_too_weak"
    case passwordTooShort = "password_too_short"
    case passwordTooLong = "password_too_long"
    case passwordRecentlyUsed = "password_recently_used"
    case passwordBanned = "password_banned"
    case passwordIsInvalid = "password_is_invalid"
    case attributeValidationFailed = "attribute_validation_failed"
    case invalidOOBValue = "invalid_oob_value"
    case nativeAuthAPIDisabled = "nativeauthapi_disabled"

    /// True for the password-policy suberrors (`password_*`).
    public var isPasswordPolicy: Bool { rawValue.hasPrefix("password_") }
}

/// The numeric `error_codes` clients branch on. The first group are Entra's AADSTS numbers as the spec lists them;
/// the second are Entra numbers for the same situations outside the spec; the last are Gatehouse's own (range
/// 9_900_000…), for answers Entra does not document.
public enum NativeAuthErrorCode {
    public static let userAlreadyExists = 1_003_037
    public static let credentialRequired = 55103
    public static let attributesRequired = 55106
    public static let expiredToken = 552_003
    public static let invalidContinuationToken = 55200
    public static let missingRedirectChallenge = 901_007
    public static let passwordTooWeak = 399_246
    public static let invalidCredentials = 50126
    public static let userNotFound = 50034
    public static let userHasNoPassword = 500_222
    public static let invalidRequestParameter = 90100

    public static let appNotFound = 90002
    public static let userDisabled = 50057
    public static let unsupportedGrantType = 70003
    public static let expiredRefreshToken = 700_082
    public static let invalidRefreshToken = 70008
    public static let unknownClient = 700_016

    public static let nativeAuthDisabled = 9_900_001
    public static let invalidOOBValue = 9_900_002
    public static let tooManyAttempts = 9_900_003
    public static let resendTooSoon = 9_900_004
    public static let attributeValidationFailed = 9_900_005
    public static let tooManyEmails = 9_900_006
    public static let invalidScope = 9_900_008
    /// HTTP 429 `slow_down`: too many requests from one address or for one username.
    public static let rateLimited = 9_900_009
    /// HTTP 429 `slow_down`: too many wrong passwords for this account lately; wait `retry_after` seconds.
    public static let loginDelayed = 9_900_010
    /// `invalid_grant` + `password_banned`: one of the most common passwords.
    public static let passwordBanned = 9_900_011
    /// `invalid_grant` + `password_is_invalid`: the password is the email address.
    public static let passwordIsEmail = 9_900_012
}

/// The body of every native auth error (HTTP 400): `error`, `error_description`, `error_codes`, `suberror` and the
/// fields some errors add.
public struct NativeAuthErrorBody: Codable, Hashable, Sendable {
    /// One of ``NativeAuthErrorName`` (kept as a string: clients must tolerate names they do not know).
    public var error: String
    public var errorDescription: String
    public var errorCodes: [Int]
    /// ISO 8601, UTC.
    public var timestamp: String?
    public var traceId: String?
    public var correlationId: String?
    public var errorURI: String?
    public var suberror: String?
    /// With `credential_required` and `attributes_required`: the token for the next step.
    public var continuationToken: String?
    /// With `attributes_required`.
    public var requiredAttributes: [NativeAuthRequiredAttribute]?
    /// With `verification_required`.
    public var unverifiedAttributes: [NativeAuthAttributeName]?
    /// With `attribute_validation_failed`.
    public var invalidAttributes: [NativeAuthAttributeName]?
    /// With `slow_down`: seconds to wait (also sent as the `Retry-After` header).
    public var retryAfter: Int?

    public init(
        error: String,
        errorDescription: String,
        errorCodes: [Int],
        timestamp: String? = nil,
        traceId: String? = nil,
        correlationId: String? = nil,
        errorURI: String? = nil,
        suberror: String? = nil,
        continuationToken: String? = nil,
        requiredAttributes: [NativeAuthRequiredAttribute]? = nil,
        unverifiedAttributes: [NativeAuthAttributeName]? = nil,
        invalidAttributes: [NativeAuthAttributeName]? = nil,
        retryAfter: Int? = nil
    ) {
        self.error = error
        self.errorDescription = errorDescription
        self.errorCodes = errorCodes
        self.timestamp = timestamp
        self.traceId = traceId
        self.correlationId = correlationId
        self.errorURI = errorURI
        self.suberror = suberror
        self.continuationToken = continuationToken
        self.requiredAttributes = requiredAttributes
        self.unverifiedAttributes = unverifiedAttributes
        self.invalidAttributes = invalidAttributes
        self.retryAfter = retryAfter
    }

    /// Lenient: only `error` is required, so a terse server's answer still maps to the right error.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        error = try c.decode(String.self, forKey: .error)
        errorDescription = try c.decodeIfPresent(String.self, forKey: .errorDescription) ?? ""
        errorCodes = try c.decodeIfPresent([Int].self, forKey: .errorCodes) ?? []
        timestamp = try c.decodeIfPresent(String.self, forKey: .timestamp)
        traceId = try c.decodeIfPresent(String.self, forKey: .traceId)
        correlationId = try c.decodeIfPresent(String.self, forKey: .correlationId)
        errorURI = try c.decodeIfPresent(String.self, forKey: .errorURI)
        suberror = try c.decodeIfPresent(String.self, forKey: .suberror)
        continuationToken = try c.decodeIfPresent(String.self, forKey: .continuationToken)
        requiredAttributes = try c.decodeIfPresent([NativeAuthRequiredAttribute].self, forKey: .requiredAttributes)
        unverifiedAttributes = try c.decodeIfPresent([NativeAuthAttributeName].self, forKey: .unverifiedAttributes)
        invalidAttributes = try c.decodeIfPresent([NativeAuthAttributeName].self, forKey: .invalidAttributes)
        retryAfter = try c.decodeIfPresent(Int.self, forKey: .retryAfter)
    }

    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
        case errorCodes = "error_codes"
        case timestamp
        case traceId = "trace_id"
        case correlationId = "correlation_id"
        case errorURI = "error_uri"
        case suberror
        case continuationToken = "continuation_token"
        case requiredAttributes = "required_attributes"
        case unverifiedAttributes = "unverified_attributes"
        case invalidAttributes = "invalid_attributes"
        case retryAfter = "retry_after"
    }
}

/// One entry of `required_attributes`.
public struct NativeAuthRequiredAttribute: Codable, Hashable, Sendable {
    public struct Options: Codable, Hashable, Sendable {
        public var regex: String?
        public init(regex: String? = nil) { self.regex = regex }
    }
    public var name: String
    /// `string` (the only type Gatehouse has today).
    public var type: String
    public var required: Bool
    public var options: Options?

    public init(name: String, type: String, required: Bool, options: Options? = nil) {
        self.name = name
        self.type = type
        self.required = required
        self.options = options
    }
}

/// One entry of `invalid_attributes` / `unverified_attributes`.
public struct NativeAuthAttributeName: Codable, Hashable, Sendable {
    public var name: String
    public init(name: String) { self.name = name }
}

/// A 200 answer of every flow endpoint except `/token`, `/submit` and `/poll_completion`: a continuation token,
/// a challenge, or the redirect fallback (`challenge_type: redirect`).
public struct NativeAuthStepResponse: Codable, Hashable, Sendable {
    public var continuationToken: String?
    public var challengeType: NativeAuthChallengeType?
    /// `prompt`: the user types the code.
    public var bindingMethod: String?
    /// `email`.
    public var challengeChannel: String?
    /// The masked address the code went to, like `a***e@e******e.com`.
    public var challengeTargetLabel: String?
    public var codeLength: Int?
    /// Seconds before a new code may be requested.
    public var interval: Int?
    /// Seconds the continuation token stays valid.
    public var expiresIn: Int?
    /// With `challenge_type: redirect`: why the browser is needed.
    public var redirectReason: String?

    public init(
        continuationToken: String? = nil,
        challengeType: NativeAuthChallengeType? = nil,
        bindingMethod: String? = nil,
        challengeChannel: String? = nil,
        challengeTargetLabel: String? = nil,
        codeLength: Int? = nil,
        interval: Int? = nil,
        expiresIn: Int? = nil,
        redirectReason: String? = nil
    ) {
        self.continuationToken = continuationToken
        self.challengeType = challengeType
        self.bindingMethod = bindingMethod
        self.challengeChannel = challengeChannel
        self.challengeTargetLabel = challengeTargetLabel
        self.codeLength = codeLength
        self.interval = interval
        self.expiresIn = expiresIn
        self.redirectReason = redirectReason
    }

    /// The redirect fallback.
    public static func redirect(reason: String) -> NativeAuthStepResponse {
        NativeAuthStepResponse(challengeType: .redirect, redirectReason: reason)
    }

    enum CodingKeys: String, CodingKey {
        case continuationToken = "continuation_token"
        case challengeType = "challenge_type"
        case bindingMethod = "binding_method"
        case challengeChannel = "challenge_channel"
        case challengeTargetLabel = "challenge_target_label"
        case codeLength = "code_length"
        case interval
        case expiresIn = "expires_in"
        case redirectReason = "redirect_reason"
    }
}

/// `resetpassword/v1.0/submit` 200.
public struct NativeAuthSubmitResponse: Codable, Hashable, Sendable {
    public var continuationToken: String
    /// Seconds between `poll_completion` calls.
    public var pollInterval: Int

    public init(continuationToken: String, pollInterval: Int) {
        self.continuationToken = continuationToken
        self.pollInterval = pollInterval
    }

    enum CodingKeys: String, CodingKey {
        case continuationToken = "continuation_token"
        case pollInterval = "poll_interval"
    }
}

/// `oauth2/v2.0/revoke` 200: an empty object, whatever the token was (RFC 7009 §2.2).
public struct NativeAuthRevokeResponse: Codable, Hashable, Sendable {
    public init() {}
}

/// `resetpassword/v1.0/poll_completion` 200.
public struct NativeAuthPollResponse: Codable, Hashable, Sendable {
    public enum Status: String, Codable, Sendable, CaseIterable {
        case succeeded, failed
        case notStarted = "not_started"
        case inProgress = "in_progress"
    }
    public var status: Status
    /// With `succeeded`: the token for sign-in after reset.
    public var continuationToken: String?
    public var expiresIn: Int?

    public init(status: Status, continuationToken: String? = nil, expiresIn: Int? = nil) {
        self.status = status
        self.continuationToken = continuationToken
        self.expiresIn = expiresIn
    }

    enum CodingKeys: String, CodingKey {
        case status
        case continuationToken = "continuation_token"
        case expiresIn = "expires_in"
    }
}

/// `oauth2/v2.0/token` 200.
public struct NativeAuthTokenResponse: Codable, Hashable, Sendable {
    /// `Bearer`.
    public var tokenType: String
    /// The granted scopes, space-separated.
    public var scope: String
    /// Seconds the access token is valid.
    public var expiresIn: Int
    /// The same ES256 JWT the Client API accepts.
    public var accessToken: String
    /// Opaque; rotated on every refresh grant. Present when `offline_access` was asked for.
    public var refreshToken: String?
    /// An ES256 JWT (``NativeAuthIDTokenClaims``). Present when `openid` was asked for.
    public var idToken: String?
    /// base64url of the JSON ``NativeAuthClientInfo``.
    public var clientInfo: String

    public init(
        tokenType: String = "Bearer",
        scope: String,
        expiresIn: Int,
        accessToken: String,
        refreshToken: String?,
        idToken: String?,
        clientInfo: String
    ) {
        self.tokenType = tokenType
        self.scope = scope
        self.expiresIn = expiresIn
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.clientInfo = clientInfo
    }

    enum CodingKeys: String, CodingKey {
        case tokenType = "token_type"
        case scope
        case expiresIn = "expires_in"
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case clientInfo = "client_info"
    }
}

/// The claims of a native auth `id_token`.
public struct NativeAuthIDTokenClaims: Codable, Hashable, Sendable {
    /// The server's public URL.
    public var iss: String
    /// The user id (the same id the Client API uses).
    public var sub: String
    /// The client id the token was issued to.
    public var aud: String
    public var exp: Int64
    public var iat: Int64
    /// The email address the user signs in with.
    public var preferredUsername: String
    public var email: String?
    /// The `displayName` attribute, when the user has one.
    public var name: String?
    /// The user id again, under the name MSAL reads (`oid`).
    public var oid: String
    /// The app id (MSAL's tenant id).
    public var tid: String
    /// How the session was proven, as RFC 8176 values (`pwd`, `otp`, …); absent when nothing was.
    public var amr: [String]? = nil
    /// When the user last proved a first-party credential in the session (seconds since 1970).
    public var authTime: Int64? = nil
    /// The session the token belongs to (the `sid` of its access tokens).
    public var sid: String? = nil

    public init(
        iss: String, sub: String, aud: String, exp: Int64, iat: Int64, preferredUsername: String, email: String?, name: String?,
        oid: String, tid: String
    ) {
        self.iss = iss
        self.sub = sub
        self.aud = aud
        self.exp = exp
        self.iat = iat
        self.preferredUsername = preferredUsername
        self.email = email
        self.name = name
        self.oid = oid
        self.tid = tid
    }

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, email, name, oid, tid, amr, sid
        case preferredUsername = "preferred_username"
        case authTime = "auth_time"
    }
}

/// The JSON inside `client_info`: the user id and the app id.
public struct NativeAuthClientInfo: Codable, Hashable, Sendable {
    public var uid: String
    public var utid: String
    public init(uid: String, utid: String) {
        self.uid = uid
        self.utid = utid
    }
}

/// `application/x-www-form-urlencoded`, the encoding of every native auth request.
public enum FormURLEncoding {
    /// Characters left as they are (RFC 3986 unreserved); everything else is percent-encoded, spaces as `%20`.
    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    /// Encodes pairs in order.
    public static func encode(_ fields: [(String, String)]) -> Data {
        let text = fields.map { name, value in escape(name) + "=" + escape(value) }.joined(separator: "&")
        return Data(text.utf8)
    }

    private static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// Decodes a body into its fields; `+` is a space. The last of repeated names wins (``pairs(_:)`` keeps them
    /// all). Nil when a name or value is not valid percent-encoded UTF-8.
    public static func decode(_ data: Data) -> [String: String]? {
        pairs(data).map { Dictionary($0, uniquingKeysWith: { _, last in last }) }
    }

    /// Decodes a body into its fields in order, repeated names included; `+` is a space. Nil when a name or value is
    /// not valid percent-encoded UTF-8.
    public static func pairs(_ data: Data) -> [(String, String)]? {
        guard let text = String(data: data, encoding: .utf8) else { return nil }
        var fields: [(String, String)] = []
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = unescape(parts[0]), let value = parts.count > 1 ? unescape(parts[1]) : "" else { return nil }
            fields.append((name, value))
        }
        return fields
    }

    private static func unescape(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
