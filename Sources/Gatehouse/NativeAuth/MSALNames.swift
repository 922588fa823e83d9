import Foundation

// MSAL's names for the native auth API, so that code written for MSAL iOS's native authentication (2.x) compiles
// against Gatehouse once `import MSAL` becomes `import Gatehouse` and the client is built with the server's URL where
// MSAL takes a tenant. A name qualified with the module (`MSAL.SignUpStartError`) works as it is (the `MSAL` namespace
// below) and as `Gatehouse.SignUpStartError`: the states, delegates and errors already have MSAL's names, and these
// are typealiases.
//
// Gatehouse's own names stay the primary ones (DocC, error messages, new code): they read as Swift without a vendor
// prefix, and the types are Swift value types and Sendable classes where MSAL's are `NSObject` subclasses — an MSAL
// name as the primary one would promise an Objective-C class that is not there. Where MSAL's shape cannot be kept,
// the difference is written down in docs/migrating.md ("From MSAL native auth").

/// MSAL's `MSALNativeAuthPublicClientApplication`: ``NativeAuthClient``.
public typealias MSALNativeAuthPublicClientApplication = NativeAuthClient
/// MSAL's `MSALNativeAuthPublicClientApplicationConfig`: ``NativeAuthConfiguration``.
public typealias MSALNativeAuthPublicClientApplicationConfig = NativeAuthConfiguration
/// MSAL's `MSALNativeAuthChallengeTypes`: ``NativeAuthChallengeTypes``.
public typealias MSALNativeAuthChallengeTypes = NativeAuthChallengeTypes
/// MSAL's `MSALNativeAuthCapabilities`: ``NativeAuthCapabilities``.
public typealias MSALNativeAuthCapabilities = NativeAuthCapabilities
/// MSAL's `MSALNativeAuthChannelType`: ``NativeAuthChannelType``.
public typealias MSALNativeAuthChannelType = NativeAuthChannelType
/// MSAL's `MSALNativeAuthRequiredAttribute`: ``RequiredAttribute``.
public typealias MSALNativeAuthRequiredAttribute = RequiredAttribute
/// MSAL's `MSALNativeAuthUserAccountResult`: ``NativeAuthUserAccountResult``.
public typealias MSALNativeAuthUserAccountResult = NativeAuthUserAccountResult
/// MSAL's `MSALNativeAuthTokenResult`: ``NativeAuthTokenResult``.
public typealias MSALNativeAuthTokenResult = NativeAuthTokenResult
/// MSAL's `MSALAccount`, as native auth hands it out (`result.account`): ``NativeAuthAccount``.
public typealias MSALAccount = NativeAuthAccount
/// MSAL's `MSALNativeAuthError`, the base of every native auth error: ``NativeAuthError``.
public typealias MSALNativeAuthError = NativeAuthError
/// MSAL's `MSALNativeAuthSignUpParameters`: ``SignUpParameters``.
public typealias MSALNativeAuthSignUpParameters = SignUpParameters
/// MSAL's `MSALNativeAuthSignInParameters`: ``SignInParameters``.
public typealias MSALNativeAuthSignInParameters = SignInParameters
/// MSAL's `MSALNativeAuthResetPasswordParameters`: ``ResetPasswordParameters``.
public typealias MSALNativeAuthResetPasswordParameters = ResetPasswordParameters
/// MSAL's `MSALNativeAuthSignInAfterSignUpParameters`: ``SignInAfterSignUpParameters``.
public typealias MSALNativeAuthSignInAfterSignUpParameters = SignInAfterSignUpParameters
/// MSAL's `MSALNativeAuthSignInAfterResetPasswordParameters`: ``SignInAfterResetPasswordParameters``.
public typealias MSALNativeAuthSignInAfterResetPasswordParameters = SignInAfterResetPasswordParameters
/// MSAL's `MSALNativeAuthGetAccessTokenParameters`: ``GetAccessTokenParameters``.
public typealias MSALNativeAuthGetAccessTokenParameters = GetAccessTokenParameters

/// MSAL's `MSALNativeAuthGenericError`, the base of the errors that have no `is…` helper of their own beyond
/// `isBrowserRequired`: ``ResendCodeError``, ``AttributesRequiredError``, ``SignInAfterSignUpError`` and
/// ``SignInAfterResetPasswordError`` (`error as? MSALNativeAuthGenericError`).
public protocol NativeAuthGenericError: NativeAuthError {}
/// MSAL's `MSALNativeAuthGenericError`: ``NativeAuthGenericError``.
public typealias MSALNativeAuthGenericError = NativeAuthGenericError

extension ResendCodeError: NativeAuthGenericError {}
extension AttributesRequiredError: NativeAuthGenericError {}
extension SignInAfterSignUpError: NativeAuthGenericError {}
extension SignInAfterResetPasswordError: NativeAuthGenericError {}

/// MSAL's `MSALNativeAuthBaseState`: what every state of a flow is (a variable's type, an `as?` target).
public protocol MSALNativeAuthBaseState: AnyObject, Sendable {}
/// MSAL's `SignUpBaseState`: a state of sign-up.
public protocol SignUpBaseState: MSALNativeAuthBaseState {}
/// MSAL's `SignInBaseState`: a state of sign-in.
public protocol SignInBaseState: MSALNativeAuthBaseState {}
/// MSAL's `ResetPasswordBaseState`: a state of password reset.
public protocol ResetPasswordBaseState: MSALNativeAuthBaseState {}
/// MSAL's `SignInAfterPreviousFlowBaseState`: the sign-in that ends a sign-up or a reset.
public protocol SignInAfterPreviousFlowBaseState: MSALNativeAuthBaseState {}

extension SignUpCodeRequiredState: SignUpBaseState {}
extension SignUpPasswordRequiredState: SignUpBaseState {}
extension SignUpAttributesRequiredState: SignUpBaseState {}
extension SignInCodeRequiredState: SignInBaseState {}
extension SignInPasswordRequiredState: SignInBaseState {}
extension ResetPasswordCodeRequiredState: ResetPasswordBaseState {}
extension ResetPasswordRequiredState: ResetPasswordBaseState {}
extension SignInAfterSignUpState: SignInAfterPreviousFlowBaseState {}
extension SignInAfterResetPasswordState: SignInAfterPreviousFlowBaseState {}

/// The `MSAL.` qualifier of code written for MSAL (`func onSignInStartError(error: MSAL.SignInStartError)`, as in
/// Microsoft's tutorials): with `import Gatehouse`, `MSAL.X` names Gatehouse's `X`, so such code compiles unchanged.
public enum MSAL {
    /// MSAL's `MSALNativeAuthPublicClientApplication`: ``NativeAuthClient``.
    public typealias MSALNativeAuthPublicClientApplication = Gatehouse.NativeAuthClient
    /// MSAL's `MSALNativeAuthPublicClientApplicationConfig`: ``NativeAuthConfiguration``.
    public typealias MSALNativeAuthPublicClientApplicationConfig = Gatehouse.NativeAuthConfiguration
    /// MSAL's `MSALNativeAuthChallengeTypes`: ``NativeAuthChallengeTypes``.
    public typealias MSALNativeAuthChallengeTypes = Gatehouse.NativeAuthChallengeTypes
    /// MSAL's `MSALNativeAuthCapabilities`: ``NativeAuthCapabilities``.
    public typealias MSALNativeAuthCapabilities = Gatehouse.NativeAuthCapabilities
    /// MSAL's `MSALNativeAuthChannelType`: ``NativeAuthChannelType``.
    public typealias MSALNativeAuthChannelType = Gatehouse.NativeAuthChannelType
    /// MSAL's `MSALNativeAuthRequiredAttribute`: ``RequiredAttribute``.
    public typealias MSALNativeAuthRequiredAttribute = Gatehouse.RequiredAttribute
    /// MSAL's `MSALNativeAuthUserAccountResult`: ``NativeAuthUserAccountResult``.
    public typealias MSALNativeAuthUserAccountResult = Gatehouse.NativeAuthUserAccountResult
    /// MSAL's `MSALNativeAuthTokenResult`: ``NativeAuthTokenResult``.
    public typealias MSALNativeAuthTokenResult = Gatehouse.NativeAuthTokenResult
    /// MSAL's `MSALAccount`: ``NativeAuthAccount``.
    public typealias MSALAccount = Gatehouse.NativeAuthAccount
    /// MSAL's `MSALNativeAuthError`: ``NativeAuthError``.
    public typealias MSALNativeAuthError = Gatehouse.NativeAuthError
    /// MSAL's `MSALNativeAuthGenericError`: ``NativeAuthGenericError``.
    public typealias MSALNativeAuthGenericError = Gatehouse.NativeAuthGenericError
    /// MSAL's `MSALNativeAuthSignUpParameters`: ``SignUpParameters``.
    public typealias MSALNativeAuthSignUpParameters = Gatehouse.SignUpParameters
    /// MSAL's `MSALNativeAuthSignInParameters`: ``SignInParameters``.
    public typealias MSALNativeAuthSignInParameters = Gatehouse.SignInParameters
    /// MSAL's `MSALNativeAuthResetPasswordParameters`: ``ResetPasswordParameters``.
    public typealias MSALNativeAuthResetPasswordParameters = Gatehouse.ResetPasswordParameters
    /// MSAL's `MSALNativeAuthSignInAfterSignUpParameters`: ``SignInAfterSignUpParameters``.
    public typealias MSALNativeAuthSignInAfterSignUpParameters = Gatehouse.SignInAfterSignUpParameters
    /// MSAL's `MSALNativeAuthSignInAfterResetPasswordParameters`: ``SignInAfterResetPasswordParameters``.
    public typealias MSALNativeAuthSignInAfterResetPasswordParameters = Gatehouse.SignInAfterResetPasswordParameters
    /// MSAL's `MSALNativeAuthGetAccessTokenParameters`: ``GetAccessTokenParameters``.
    public typealias MSALNativeAuthGetAccessTokenParameters = Gatehouse.GetAccessTokenParameters
    /// MSAL's `MSALNativeAuthBaseState`: ``MSALNativeAuthBaseState``.
    public typealias MSALNativeAuthBaseState = Gatehouse.MSALNativeAuthBaseState
    /// MSAL's `SignUpBaseState`: ``SignUpBaseState``.
    public typealias SignUpBaseState = Gatehouse.SignUpBaseState
    /// MSAL's `SignInBaseState`: ``SignInBaseState``.
    public typealias SignInBaseState = Gatehouse.SignInBaseState
    /// MSAL's `ResetPasswordBaseState`: ``ResetPasswordBaseState``.
    public typealias ResetPasswordBaseState = Gatehouse.ResetPasswordBaseState
    /// MSAL's `SignInAfterPreviousFlowBaseState`: ``SignInAfterPreviousFlowBaseState``.
    public typealias SignInAfterPreviousFlowBaseState = Gatehouse.SignInAfterPreviousFlowBaseState

    /// MSAL's `SignUpCodeRequiredState`: ``SignUpCodeRequiredState``.
    public typealias SignUpCodeRequiredState = Gatehouse.SignUpCodeRequiredState
    /// MSAL's `SignUpPasswordRequiredState`: ``SignUpPasswordRequiredState``.
    public typealias SignUpPasswordRequiredState = Gatehouse.SignUpPasswordRequiredState
    /// MSAL's `SignUpAttributesRequiredState`: ``SignUpAttributesRequiredState``.
    public typealias SignUpAttributesRequiredState = Gatehouse.SignUpAttributesRequiredState
    /// MSAL's `SignInAfterSignUpState`: ``SignInAfterSignUpState``.
    public typealias SignInAfterSignUpState = Gatehouse.SignInAfterSignUpState
    /// MSAL's `SignInCodeRequiredState`: ``SignInCodeRequiredState``.
    public typealias SignInCodeRequiredState = Gatehouse.SignInCodeRequiredState
    /// MSAL's `SignInPasswordRequiredState`: ``SignInPasswordRequiredState``.
    public typealias SignInPasswordRequiredState = Gatehouse.SignInPasswordRequiredState
    /// MSAL's `ResetPasswordCodeRequiredState`: ``ResetPasswordCodeRequiredState``.
    public typealias ResetPasswordCodeRequiredState = Gatehouse.ResetPasswordCodeRequiredState
    /// MSAL's `ResetPasswordRequiredState`: ``ResetPasswordRequiredState``.
    public typealias ResetPasswordRequiredState = Gatehouse.ResetPasswordRequiredState
    /// MSAL's `SignInAfterResetPasswordState`: ``SignInAfterResetPasswordState``.
    public typealias SignInAfterResetPasswordState = Gatehouse.SignInAfterResetPasswordState

    /// MSAL's `SignUpStartError`: ``SignUpStartError``.
    public typealias SignUpStartError = Gatehouse.SignUpStartError
    /// MSAL's `SignInStartError`: ``SignInStartError``.
    public typealias SignInStartError = Gatehouse.SignInStartError
    /// MSAL's `ResetPasswordStartError`: ``ResetPasswordStartError``.
    public typealias ResetPasswordStartError = Gatehouse.ResetPasswordStartError
    /// MSAL's `VerifyCodeError`: ``VerifyCodeError``.
    public typealias VerifyCodeError = Gatehouse.VerifyCodeError
    /// MSAL's `PasswordRequiredError`: ``PasswordRequiredError``.
    public typealias PasswordRequiredError = Gatehouse.PasswordRequiredError
    /// MSAL's `RetrieveAccessTokenError`: ``RetrieveAccessTokenError``.
    public typealias RetrieveAccessTokenError = Gatehouse.RetrieveAccessTokenError
    /// MSAL's `ResendCodeError`: ``ResendCodeError``.
    public typealias ResendCodeError = Gatehouse.ResendCodeError
    /// MSAL's `AttributesRequiredError`: ``AttributesRequiredError``.
    public typealias AttributesRequiredError = Gatehouse.AttributesRequiredError
    /// MSAL's `SignInAfterSignUpError`: ``SignInAfterSignUpError``.
    public typealias SignInAfterSignUpError = Gatehouse.SignInAfterSignUpError
    /// MSAL's `SignInAfterResetPasswordError`: ``SignInAfterResetPasswordError``.
    public typealias SignInAfterResetPasswordError = Gatehouse.SignInAfterResetPasswordError

    /// MSAL's `SignUpStartDelegate`: ``SignUpStartDelegate``.
    public typealias SignUpStartDelegate = Gatehouse.SignUpStartDelegate
    /// MSAL's `SignUpVerifyCodeDelegate`: ``SignUpVerifyCodeDelegate``.
    public typealias SignUpVerifyCodeDelegate = Gatehouse.SignUpVerifyCodeDelegate
    /// MSAL's `SignUpResendCodeDelegate`: ``SignUpResendCodeDelegate``.
    public typealias SignUpResendCodeDelegate = Gatehouse.SignUpResendCodeDelegate
    /// MSAL's `SignUpPasswordRequiredDelegate`: ``SignUpPasswordRequiredDelegate``.
    public typealias SignUpPasswordRequiredDelegate = Gatehouse.SignUpPasswordRequiredDelegate
    /// MSAL's `SignUpAttributesRequiredDelegate`: ``SignUpAttributesRequiredDelegate``.
    public typealias SignUpAttributesRequiredDelegate = Gatehouse.SignUpAttributesRequiredDelegate
    /// MSAL's `SignInAfterSignUpDelegate`: ``SignInAfterSignUpDelegate``.
    public typealias SignInAfterSignUpDelegate = Gatehouse.SignInAfterSignUpDelegate
    /// MSAL's `SignInStartDelegate`: ``SignInStartDelegate``.
    public typealias SignInStartDelegate = Gatehouse.SignInStartDelegate
    /// MSAL's `SignInPasswordRequiredDelegate`: ``SignInPasswordRequiredDelegate``.
    public typealias SignInPasswordRequiredDelegate = Gatehouse.SignInPasswordRequiredDelegate
    /// MSAL's `SignInVerifyCodeDelegate`: ``SignInVerifyCodeDelegate``.
    public typealias SignInVerifyCodeDelegate = Gatehouse.SignInVerifyCodeDelegate
    /// MSAL's `SignInResendCodeDelegate`: ``SignInResendCodeDelegate``.
    public typealias SignInResendCodeDelegate = Gatehouse.SignInResendCodeDelegate
    /// MSAL's `ResetPasswordStartDelegate`: ``ResetPasswordStartDelegate``.
    public typealias ResetPasswordStartDelegate = Gatehouse.ResetPasswordStartDelegate
    /// MSAL's `ResetPasswordVerifyCodeDelegate`: ``ResetPasswordVerifyCodeDelegate``.
    public typealias ResetPasswordVerifyCodeDelegate = Gatehouse.ResetPasswordVerifyCodeDelegate
    /// MSAL's `ResetPasswordResendCodeDelegate`: ``ResetPasswordResendCodeDelegate``.
    public typealias ResetPasswordResendCodeDelegate = Gatehouse.ResetPasswordResendCodeDelegate
    /// MSAL's `ResetPasswordRequiredDelegate`: ``ResetPasswordRequiredDelegate``.
    public typealias ResetPasswordRequiredDelegate = Gatehouse.ResetPasswordRequiredDelegate
    /// MSAL's `SignInAfterResetPasswordDelegate`: ``SignInAfterResetPasswordDelegate``.
    public typealias SignInAfterResetPasswordDelegate = Gatehouse.SignInAfterResetPasswordDelegate
    /// MSAL's `CredentialsDelegate`: ``CredentialsDelegate``.
    public typealias CredentialsDelegate = Gatehouse.CredentialsDelegate
}

extension NativeAuthChallengeTypes {
    /// MSAL's spelling of ``oob``: `[.OOB, .password]`.
    public static let OOB = oob
}

/// A native auth client that cannot be built from what it was given: the message says what to change.
public struct NativeAuthConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
}

extension NativeAuthConfiguration {
    /// MSAL's `init(clientId:tenantSubdomain:challengeTypes:)`, with the server's native auth URL where MSAL takes a
    /// tenant: the URL `gatehouse serve` prints for the app (`https://auth.example.com/native/my-app`), that is the
    /// server's base URL, `/native/`, and the app id.
    ///
    /// - Throws: ``NativeAuthConfigurationError`` when the URL is not `http(s)://HOST[/PATH]/native/APP_ID`, or the
    ///   client id is empty.
    public init(clientId: String, serverURL: String, challengeTypes: NativeAuthChallengeTypes) throws(NativeAuthConfigurationError) {
        let (baseURL, appId) = try Self.split(serverURL: serverURL)
        guard !clientId.isEmpty else { throw NativeAuthConfigurationError(description: "the client id is empty") }
        self.init(baseURL: baseURL, appId: appId, clientId: clientId, challengeTypes: challengeTypes)
    }

    /// `https://host/prefix/native/app` → (`https://host/prefix`, `app`).
    static func split(serverURL: String) throws(NativeAuthConfigurationError) -> (baseURL: String, appId: String) {
        let trimmed = serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL
        guard let components = URLComponents(string: trimmed), ["http", "https"].contains(components.scheme?.lowercased() ?? ""),
            components.host?.isEmpty == false, components.query == nil, components.fragment == nil
        else {
            throw NativeAuthConfigurationError(description: "expected the server's native auth URL, like https://auth.example.com/native/my-app; found \(serverURL)")
        }
        let path = components.path.split(separator: "/", omittingEmptySubsequences: false)
        guard path.count >= 3, path[path.count - 2] == "native", let appId = path.last, !appId.isEmpty else {
            throw NativeAuthConfigurationError(
                description: "the URL must end in /native/APP_ID (the address `gatehouse serve` prints for the app); found \(serverURL)"
            )
        }
        var base = components
        base.path = path.dropLast(2).joined(separator: "/")
        return (base.string ?? trimmed, String(appId))
    }
}

extension NativeAuthClient {
    /// MSAL's `init(nativeAuthConfiguration:)`. Throws when the configuration cannot reach a server (its base URL
    /// is not `http(s)`, or the app or client id is empty), as MSAL throws for an authority it cannot use.
    public convenience init(nativeAuthConfiguration: NativeAuthConfiguration) throws(NativeAuthConfigurationError) {
        guard let url = URLComponents(string: nativeAuthConfiguration.baseURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false
        else {
            throw NativeAuthConfigurationError(description: "the base URL must be http(s)://HOST[:PORT]; found \(nativeAuthConfiguration.baseURL)")
        }
        guard !nativeAuthConfiguration.appId.isEmpty, !nativeAuthConfiguration.clientId.isEmpty else {
            throw NativeAuthConfigurationError(description: "the app id and the client id must not be empty")
        }
        self.init(configuration: nativeAuthConfiguration)
    }

    /// MSAL's `init(clientId:tenantSubdomain:challengeTypes:redirectUri:)`, with the server's native auth URL where
    /// MSAL takes a tenant (see ``NativeAuthConfiguration/init(clientId:serverURL:challengeTypes:)``). `redirectUri`
    /// is accepted and unused: a client that cannot go on natively is told `isBrowserRequired`, and Gatehouse has no
    /// browser sign-in to send it to.
    public convenience init(
        clientId: String, serverURL: String, challengeTypes: NativeAuthChallengeTypes, redirectUri: String? = nil
    ) throws(NativeAuthConfigurationError) {
        try self.init(nativeAuthConfiguration: NativeAuthConfiguration(clientId: clientId, serverURL: serverURL, challengeTypes: challengeTypes))
    }
}
