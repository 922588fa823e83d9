import GatehouseWire

/// Why a native auth step refused, in the domain's words. The native auth façade renders each case in the protocol's
/// envelope (`NativeFlowError` in GatehouseServer: the error name, AADSTS codes and suberror MSAL clients branch on).
package enum NativeFlowError: Error, Hashable, Sendable {
    // Requests and clients
    /// A malformed request; the text says what.
    case invalidRequest(String)
    /// A required field is missing or empty (`username`, `client_id`, …).
    case invalidParameter(String)
    case appNotFound(String)
    case nativeAuthDisabled
    case unauthorizedClient
    /// `challenge_type` lacks `redirect`.
    case missingRedirect

    // Continuation tokens
    /// Unknown, replayed, foreign or wrong-endpoint continuation token; the text says which.
    case invalidContinuationToken(String = "the continuation token is not valid")
    case expiredContinuationToken

    // Codes
    /// A wrong or expired code; the flow's token stays valid.
    case invalidCode(String = "the code is wrong")
    /// The flow used up its attempts: it is dead.
    case tooManyAttempts
    case resendTooSoon(retryAfter: Int)
    case tooManyEmails(retryAfter: Int)

    // Accounts
    case userAlreadyExists
    case userNotFound
    case userHasNoPassword
    case invalidCredentials
    case userDisabled
    /// A new password breaks the app's policy.
    case password(PasswordPolicy.Violation, policy: PasswordPolicy)
    case attributeValidationFailed([String])
    /// Sign-up needs a password next, with this step's token.
    case credentialRequired(continuationToken: String)
    /// Sign-up needs these attributes next, with this step's token.
    case attributesRequired([NativeAuthRequiredAttribute], continuationToken: String)

    // Tokens
    case unsupportedGrantType(String)
    case invalidRefreshToken(String)
    case expiredRefreshToken
}

extension NativeFlowError {
    /// The refusal of a step whose flow's basis ended (``NativeFlowRecord/userEpoch``): the client starts again.
    package static let flowEnded = NativeFlowError.invalidContinuationToken("the account changed since this flow began; start again")
}
