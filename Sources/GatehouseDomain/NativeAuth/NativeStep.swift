import Foundation

/// What a native auth step answers, in the domain's words; the native auth façade encodes it as the protocol's body.
package enum NativeStep: Sendable, Hashable {
    /// The flow moved on: the next step takes this token (`expiresIn` seconds, when the protocol says it).
    case next(continuationToken: String, expiresIn: Int? = nil)
    /// The client must send a password next.
    case passwordRequired(continuationToken: String)
    /// A code was emailed to the masked address (for an unknown address the same work ran, and none left).
    case codeSent(continuationToken: String, maskedAddress: String, codeLength: Int, resendInterval: Int)
    /// The client cannot do what the app needs, and must finish in a browser.
    case redirect(reason: String)
}

/// A password reset set the new password: poll for completion with this token.
package struct NativeResetSubmitted: Sendable, Hashable {
    package var continuationToken: String
    /// Seconds between polls.
    package var pollInterval: Int
}

/// A completed password reset: sign in with this token.
package struct NativeResetCompleted: Sendable, Hashable {
    package var continuationToken: String
    package var expiresIn: Int
}

/// The tokens of a sign-in or a refresh.
package struct NativeTokens: Sendable, Hashable {
    package var scopes: [String]
    /// Seconds the access token lives.
    package var expiresIn: Int
    package var accessToken: String
    /// With `offline_access`.
    package var refreshToken: String?
    /// With `openid`.
    package var idToken: String?
    package var userId: String
    /// The app (Entra's tenant).
    package var tenantId: String
}
