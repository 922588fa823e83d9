import GatehouseDomain
import GatehouseWire

/// A native auth protocol error: the fields of the HTTP 400 ``NativeAuthErrorBody`` (spec §1), named and numbered as
/// the spec's tables list them, because MSAL-based clients branch on them. The domain refuses with a
/// ``NativeFlowError``; ``init(_:)`` renders it here.
struct NativeAuthFailure: Error, Hashable, Sendable {
    var error: NativeAuthErrorName
    var description: String
    var codes: [Int]
    var suberror: NativeAuthSuberror? = nil
    /// With `credential_required` / `attributes_required`: the token of the next step.
    var continuationToken: String? = nil
    var requiredAttributes: [NativeAuthRequiredAttribute]? = nil
    var invalidAttributes: [String]? = nil
    /// With `slow_down`: seconds to wait.
    var retryAfter: Int? = nil

    // MARK: Requests and clients

    static func invalidRequest(_ description: String, code: Int = NativeAuthErrorCode.invalidRequestParameter) -> Self {
        Self(error: .invalidRequest, description: description, codes: [code])
    }

    /// A required form field is missing or empty. MSAL recognises the `username` and `client_id` wording.
    static func invalidParameter(_ name: String) -> Self {
        invalidRequest("AADSTS90100: \(name) parameter is empty or not valid.")
    }

    static func appNotFound(_ appId: String) -> Self {
        invalidRequest("no app with id '\(appId.prefix(128))' on this server", code: NativeAuthErrorCode.appNotFound)
    }

    static var nativeAuthDisabled: Self {
        Self(
            error: .invalidClient, description: "native authentication is not enabled for this app",
            codes: [NativeAuthErrorCode.nativeAuthDisabled], suberror: .nativeAuthAPIDisabled
        )
    }

    static var unauthorizedClient: Self {
        Self(
            error: .unauthorizedClient, description: "the client_id is not one of this app's native auth clients",
            codes: [NativeAuthErrorCode.unknownClient]
        )
    }

    static var missingRedirect: Self {
        Self(
            error: .unsupportedChallengeType,
            description: "AADSTS901007: challenge_type must include redirect, so that the client can fall back to a browser.",
            codes: [NativeAuthErrorCode.missingRedirectChallenge]
        )
    }

    // MARK: Continuation tokens

    /// Unknown, replayed, foreign (other app, client or flow) or wrong-endpoint continuation token.
    static func invalidContinuationToken(_ why: String = "the continuation token is not valid") -> Self {
        Self(error: .invalidGrant, description: "AADSTS55200: \(why).", codes: [NativeAuthErrorCode.invalidContinuationToken])
    }

    static var expiredContinuationToken: Self {
        Self(error: .expiredToken, description: "AADSTS552003: the continuation token has expired; start again.", codes: [NativeAuthErrorCode.expiredToken])
    }

    // MARK: Codes

    static func invalidCode(_ description: String = "the code is wrong") -> Self {
        Self(error: .invalidGrant, description: description, codes: [NativeAuthErrorCode.invalidOOBValue], suberror: .invalidOOBValue)
    }

    /// The flow used up its attempts: it is dead and must start again.
    static var tooManyAttempts: Self {
        Self(
            error: .invalidGrant, description: "too many wrong answers in this flow; start again",
            codes: [NativeAuthErrorCode.tooManyAttempts]
        )
    }

    static func resendTooSoon(retryAfter: Int) -> Self {
        Self(
            error: .slowDown, description: "a code was sent moments ago; wait \(retryAfter) seconds before asking for another",
            codes: [NativeAuthErrorCode.resendTooSoon], retryAfter: retryAfter
        )
    }

    static func tooManyEmails(retryAfter: Int) -> Self {
        Self(
            error: .slowDown, description: "too many emails to this address; try again in \(retryAfter) seconds",
            codes: [NativeAuthErrorCode.tooManyEmails], retryAfter: retryAfter
        )
    }

    /// Too many requests from this address or for this username (answered with HTTP 429).
    static func rateLimited(retryAfter: Int) -> Self {
        Self(
            error: .slowDown, description: "too many requests; try again in \(retryAfter) seconds",
            codes: [NativeAuthErrorCode.rateLimited], retryAfter: retryAfter
        )
    }

    /// Too many wrong passwords for this account lately (answered with HTTP 429).
    static func loginDelayed(retryAfter: Int) -> Self {
        Self(
            error: .slowDown, description: "too many failed sign-ins for this account; try again in \(retryAfter) seconds",
            codes: [NativeAuthErrorCode.loginDelayed], retryAfter: retryAfter
        )
    }

    // MARK: Accounts

    static var userAlreadyExists: Self {
        Self(error: .userAlreadyExists, description: "AADSTS1003037: an account with this email already exists.", codes: [NativeAuthErrorCode.userAlreadyExists])
    }

    static var userNotFound: Self {
        Self(error: .userNotFound, description: "AADSTS50034: no account with this email exists.", codes: [NativeAuthErrorCode.userNotFound])
    }

    static var userHasNoPassword: Self {
        invalidRequest("AADSTS500222: this account signs in with email codes and has no password to reset.", code: NativeAuthErrorCode.userHasNoPassword)
    }

    static var invalidCredentials: Self {
        Self(error: .invalidGrant, description: "AADSTS50126: invalid username or password.", codes: [NativeAuthErrorCode.invalidCredentials])
    }

    static var userDisabled: Self {
        Self(error: .invalidGrant, description: "AADSTS50057: the user account is disabled.", codes: [NativeAuthErrorCode.userDisabled])
    }

    /// A password that breaks the app's policy.
    static func password(_ violation: PasswordPolicy.Violation, policy: PasswordPolicy) -> Self {
        let (suberror, code): (NativeAuthSuberror, Int) =
            switch violation {
            case .tooShort: (.passwordTooShort, NativeAuthErrorCode.passwordTooWeak)
            case .tooLong: (.passwordTooLong, NativeAuthErrorCode.passwordTooWeak)
            case .banned: (.passwordBanned, NativeAuthErrorCode.passwordBanned)
            case .isEmail: (.passwordIsInvalid, NativeAuthErrorCode.passwordIsEmail)
            }
        return Self(error: .invalidGrant, description: policy.message(violation), codes: [code], suberror: suberror)
    }

    static func attributeValidationFailed(_ names: [String]) -> Self {
        Self(
            error: .invalidGrant, description: "invalid values for: \(names.joined(separator: ", "))",
            codes: [NativeAuthErrorCode.attributeValidationFailed], suberror: .attributeValidationFailed, invalidAttributes: names
        )
    }

    static func credentialRequired(continuationToken: String) -> Self {
        Self(
            error: .credentialRequired, description: "AADSTS55103: a password is required to finish signing up.",
            codes: [NativeAuthErrorCode.credentialRequired], continuationToken: continuationToken
        )
    }

    static func attributesRequired(_ attributes: [NativeAuthRequiredAttribute], continuationToken: String) -> Self {
        Self(
            error: .attributesRequired, description: "AADSTS55106: user attributes are required to finish signing up.",
            codes: [NativeAuthErrorCode.attributesRequired], continuationToken: continuationToken, requiredAttributes: attributes
        )
    }

    // MARK: Tokens

    static func unsupportedGrantType(_ grant: String) -> Self {
        Self(
            error: .unsupportedGrantType, description: "AADSTS70003: grant_type '\(grant.prefix(64))' is not supported here.",
            codes: [NativeAuthErrorCode.unsupportedGrantType]
        )
    }

    static func invalidRefreshToken(_ why: String) -> Self {
        Self(error: .invalidGrant, description: "AADSTS70008: \(why).", codes: [NativeAuthErrorCode.invalidRefreshToken])
    }

    static var expiredRefreshToken: Self {
        Self(
            error: .expiredRefreshToken, description: "AADSTS700082: the refresh token has expired; sign in again.",
            codes: [NativeAuthErrorCode.expiredRefreshToken]
        )
    }

    /// The envelope of a domain refusal.
    init(_ error: NativeFlowError) {
        self =
            switch error {
            case .invalidRequest(let text): .invalidRequest(text)
            case .invalidParameter(let name): .invalidParameter(name)
            case .appNotFound(let appId): .appNotFound(appId)
            case .nativeAuthDisabled: .nativeAuthDisabled
            case .unauthorizedClient: .unauthorizedClient
            case .missingRedirect: .missingRedirect
            case .invalidContinuationToken(let why): .invalidContinuationToken(why)
            case .expiredContinuationToken: .expiredContinuationToken
            case .invalidCode(let text): .invalidCode(text)
            case .tooManyAttempts: .tooManyAttempts
            case .resendTooSoon(let retryAfter): .resendTooSoon(retryAfter: retryAfter)
            case .tooManyEmails(let retryAfter): .tooManyEmails(retryAfter: retryAfter)
            case .userAlreadyExists: .userAlreadyExists
            case .userNotFound: .userNotFound
            case .userHasNoPassword: .userHasNoPassword
            case .invalidCredentials: .invalidCredentials
            case .userDisabled: .userDisabled
            case .password(let violation, let policy): .password(violation, policy: policy)
            case .attributeValidationFailed(let names): .attributeValidationFailed(names)
            case .credentialRequired(let token): .credentialRequired(continuationToken: token)
            case .attributesRequired(let attributes, let token): .attributesRequired(attributes, continuationToken: token)
            case .unsupportedGrantType(let grant): .unsupportedGrantType(grant)
            case .invalidRefreshToken(let why): .invalidRefreshToken(why)
            case .expiredRefreshToken: .expiredRefreshToken
            }
    }

    init(
        error: NativeAuthErrorName, description: String, codes: [Int], suberror: NativeAuthSuberror? = nil,
        continuationToken: String? = nil, requiredAttributes: [NativeAuthRequiredAttribute]? = nil,
        invalidAttributes: [String]? = nil, retryAfter: Int? = nil
    ) {
        self.error = error
        self.description = description
        self.codes = codes
        self.suberror = suberror
        self.continuationToken = continuationToken
        self.requiredAttributes = requiredAttributes
        self.invalidAttributes = invalidAttributes
        self.retryAfter = retryAfter
    }
}
