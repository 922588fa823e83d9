import Foundation

// The delegate protocols of MSAL's native auth API, in MSAL's shape: class-bound protocols whose every method runs on
// the main actor (`@MainActor` on each requirement, not on the protocol, so a class that is not main-actor-bound can
// adopt them with `@MainActor` methods, as Microsoft's SwiftUI samples do).
//
// MSAL's "optional" methods (`@objc optional`) are protocol requirements here with default implementations. When
// the SDK needs one the app did not implement, the default reports it and the SDK calls the protocol's required
// error method with a general error, "Gatehouse has called the delegate method … that has not been implemented",
// as MSAL does. Methods that several protocols share (`onSignInCompleted(result:)`, `onSignUpCompleted(newState:)`,
// `onSignUpAttributesRequired(attributes:newState:)`) are declared once, in ``SignInCompletionDelegate`` and
// ``SignUpStepDelegate``, so that one type can adopt several delegate protocols without implementing them all.
//
// Unlike MSAL's Objective-C optionals, which are looked up on the object at run time, a Swift protocol's method is
// chosen where the class adopts the protocol: implement an optional method in the class that declares the conformance
// (or an extension of it). A subclass that adds the method, under a superclass that adopted the protocol without it,
// is not called: the superclass's conformance already chose the default.

/// Runs delegate methods and notices when an optional one fell back to its default implementation.
enum DelegateCall {
    /// The optional method the SDK called, and whether its default implementation ran on the delegate.
    @MainActor final class Missing {
        /// The delegate the SDK called.
        let delegate: ObjectIdentifier
        /// The method the SDK called.
        let expected: OptionalDelegateMethod
        var ranDefault = false

        init(delegate: AnyObject, expected: OptionalDelegateMethod) {
            self.delegate = ObjectIdentifier(delegate)
            self.expected = expected
        }
    }

    @TaskLocal static var missing: Missing?

    /// Runs after a delegate-form call has made its callback. Tests set it to notice a call that made none.
    @TaskLocal static var afterDelivery: (@MainActor @Sendable () -> Void)?

    /// Runs the work of a delegate-form call in a new task on the main actor; `body` calls `delegate`.
    ///
    /// Delegates need not be `Sendable` (MSAL's are any class, often a view model that is not main-actor-bound, whose
    /// callbacks are marked `@MainActor` one by one): the delegate is carried to the main actor and only used there,
    /// through its `@MainActor` requirements.
    static func deliver<Delegate>(_ delegate: Delegate, _ body: @escaping @MainActor @Sendable (Delegate) async -> Void) {
        let carried = MainActorCarried(delegate)
        Task { @MainActor in
            await body(carried.value)
            afterDelivery?()
        }
    }

    /// A value handed to the main actor and used only there.
    private struct MainActorCarried<Value>: @unchecked Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    /// Called by the default implementations, with the method they stand for and the delegate they ran on.
    ///
    /// Only the default of the method the SDK called, on the delegate it called, counts. A default that runs on
    /// another object (an app's method that hands the callback on to an object of its own that does not implement
    /// it), or for another method (an app's method that calls one of its own optional methods it did not implement),
    /// is not a method missing from what the SDK called: the app implemented that one, and gets one callback, not
    /// that one and an error besides.
    @MainActor static func notImplemented(_ method: OptionalDelegateMethod, _ delegate: AnyObject) {
        guard let missing, missing.expected == method, missing.delegate == ObjectIdentifier(delegate) else { return }
        missing.ranDefault = true
    }

    /// Calls the optional `method` of `delegate` through `call`; if its default implementation ran, calls `fallback`
    /// with the error message.
    @MainActor static func optional(
        _ delegate: AnyObject, _ method: OptionalDelegateMethod, _ call: () -> Void, otherwise fallback: (String) -> Void
    ) {
        let box = Missing(delegate: delegate, expected: method)
        $missing.withValue(box) { call() }
        if box.ranDefault { fallback(NativeAuthErrorText.delegateNotImplemented(method.rawValue)) }
    }
}

extension DelegateCall {
    /// ``SignUpStepDelegate/onSignUpCompleted(newState:)``, which every sign-up step's delegate shares.
    @MainActor static func signUpCompleted(_ delegate: any SignUpStepDelegate, _ state: SignInAfterSignUpState, otherwise fallback: (String) -> Void) {
        optional(delegate, .onSignUpCompleted, { delegate.onSignUpCompleted(newState: state) }, otherwise: fallback)
    }

    /// ``SignUpStepDelegate/onSignUpAttributesRequired(attributes:newState:)``, which every sign-up step's delegate
    /// shares.
    @MainActor static func signUpAttributesRequired(
        _ delegate: any SignUpStepDelegate, _ attributes: [RequiredAttribute], _ state: SignUpAttributesRequiredState,
        otherwise fallback: (String) -> Void
    ) {
        optional(delegate, .onSignUpAttributesRequired, { delegate.onSignUpAttributesRequired(attributes: attributes, newState: state) }, otherwise: fallback)
    }
}

/// The optional delegate methods, each named as Swift names it (`#function`): the SDK's call of one and that method's
/// default implementation name it alike (``DelegateCall/optional(_:_:_:otherwise:)``), and the error an app gets
/// when it did not implement the method quotes the name.
enum OptionalDelegateMethod: String {
    case onSignInCompleted = "onSignInCompleted(result:)"
    case onSignUpAttributesRequired = "onSignUpAttributesRequired(attributes:newState:)"
    case onSignUpCompleted = "onSignUpCompleted(newState:)"
    case onSignUpCodeRequired = "onSignUpCodeRequired(newState:sentTo:channelTargetType:codeLength:)"
    case onSignUpAttributesInvalid = "onSignUpAttributesInvalid(attributeNames:)"
    case onSignUpPasswordRequired = "onSignUpPasswordRequired(newState:)"
    case onSignUpResendCodeCodeRequired = "onSignUpResendCodeCodeRequired(newState:sentTo:channelTargetType:codeLength:)"
    case onSignUpAttributesInvalidWithState = "onSignUpAttributesInvalid(attributeNames:newState:)"
    case onResetPasswordCodeRequired = "onResetPasswordCodeRequired(newState:sentTo:channelTargetType:codeLength:)"
    case onPasswordRequired = "onPasswordRequired(newState:)"
    case onResetPasswordResendCodeRequired = "onResetPasswordResendCodeRequired(newState:sentTo:channelTargetType:codeLength:)"
    case onResetPasswordCompleted = "onResetPasswordCompleted(newState:)"
    case onSignInCodeRequired = "onSignInCodeRequired(newState:sentTo:channelTargetType:codeLength:)"
    case onSignInPasswordRequired = "onSignInPasswordRequired(newState:)"
    case onSignInResendCodeCodeRequired = "onSignInResendCodeCodeRequired(newState:sentTo:channelTargetType:codeLength:)"
    case onAccessTokenRetrieveCompleted = "onAccessTokenRetrieveCompleted(result:)"
    case onAccountSessionsRetrieved = "onAccountSessionsRetrieved(sessions:)"
    case onAccountUpdateCompleted = "onAccountUpdateCompleted()"
}

// MARK: - Shared methods

/// The method every sign-in delegate shares.
public protocol SignInCompletionDelegate: AnyObject {
    /// Optional. Signed in: the account and its tokens are cached.
    @MainActor func onSignInCompleted(result: NativeAuthUserAccountResult)
}

extension SignInCompletionDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignInCompleted(result: NativeAuthUserAccountResult) { DelegateCall.notImplemented(.onSignInCompleted, self) }
}

/// The methods the sign-up steps after the code share.
public protocol SignUpStepDelegate: AnyObject {
    /// Optional. The account needs these attributes: submit them on `newState`.
    @MainActor func onSignUpAttributesRequired(attributes: [RequiredAttribute], newState: SignUpAttributesRequiredState)
    /// Optional. The account exists: sign in with `newState`.
    @MainActor func onSignUpCompleted(newState: SignInAfterSignUpState)
}

extension SignUpStepDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignUpAttributesRequired(attributes: [RequiredAttribute], newState: SignUpAttributesRequiredState) {
        DelegateCall.notImplemented(.onSignUpAttributesRequired, self)
    }
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignUpCompleted(newState: SignInAfterSignUpState) { DelegateCall.notImplemented(.onSignUpCompleted, self) }
}

// MARK: - Sign-up

/// Receives the answer of ``NativeAuthClient/signUp(parameters:delegate:)``.
public protocol SignUpStartDelegate: AnyObject {
    /// Required. The sign-up could not start.
    @MainActor func onSignUpStartError(error: SignUpStartError)
    /// Optional. A code was emailed to `sentTo`: submit it on `newState`.
    @MainActor func onSignUpCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
    /// Optional. The server rejected these attributes; the flow is over.
    @MainActor func onSignUpAttributesInvalid(attributeNames: [String])
}

extension SignUpStartDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignUpCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int) {
        DelegateCall.notImplemented(.onSignUpCodeRequired, self)
    }
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignUpAttributesInvalid(attributeNames: [String]) { DelegateCall.notImplemented(.onSignUpAttributesInvalid, self) }
}

/// Receives the answer of ``SignUpCodeRequiredState/submitCode(code:delegate:)``.
public protocol SignUpVerifyCodeDelegate: SignUpStepDelegate {
    /// Required. `newState` is the same state when another code may be submitted on it (``VerifyCodeError/isInvalidCode``).
    @MainActor func onSignUpVerifyCodeError(error: VerifyCodeError, newState: SignUpCodeRequiredState?)
    /// Optional. The account needs a password: submit it on `newState`.
    @MainActor func onSignUpPasswordRequired(newState: SignUpPasswordRequiredState)
}

extension SignUpVerifyCodeDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignUpPasswordRequired(newState: SignUpPasswordRequiredState) { DelegateCall.notImplemented(.onSignUpPasswordRequired, self) }
}

/// Receives the answer of ``SignUpCodeRequiredState/resendCode(delegate:)``.
public protocol SignUpResendCodeDelegate: AnyObject {
    /// Required. `newState` is the same state when it can still be used.
    @MainActor func onSignUpResendCodeError(error: ResendCodeError, newState: SignUpCodeRequiredState?)
    /// Optional. A new code was sent (the old one no longer works): submit it on `newState`.
    @MainActor func onSignUpResendCodeCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
}

extension SignUpResendCodeDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignUpResendCodeCodeRequired(
        newState: SignUpCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    ) {
        DelegateCall.notImplemented(.onSignUpResendCodeCodeRequired, self)
    }
}

/// Receives the answer of ``SignUpPasswordRequiredState/submitPassword(password:delegate:)``.
public protocol SignUpPasswordRequiredDelegate: SignUpStepDelegate {
    /// Required. `newState` is the same state when another password may be submitted on it.
    @MainActor func onSignUpPasswordRequiredError(error: PasswordRequiredError, newState: SignUpPasswordRequiredState?)
}

/// Receives the answer of ``SignUpAttributesRequiredState/submitAttributes(attributes:delegate:)``.
public protocol SignUpAttributesRequiredDelegate: SignUpStepDelegate {
    /// Required. The flow is over.
    @MainActor func onSignUpAttributesRequiredError(error: AttributesRequiredError)
    /// Optional. The server rejected these attributes: submit corrected values on `newState` (the same state).
    @MainActor func onSignUpAttributesInvalid(attributeNames: [String], newState: SignUpAttributesRequiredState)
}

extension SignUpAttributesRequiredDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignUpAttributesInvalid(attributeNames: [String], newState: SignUpAttributesRequiredState) {
        DelegateCall.notImplemented(.onSignUpAttributesInvalidWithState, self)
    }
}

/// Receives the answer of ``SignInAfterSignUpState/signIn(parameters:delegate:)``.
public protocol SignInAfterSignUpDelegate: SignInCompletionDelegate {
    /// Required.
    @MainActor func onSignInAfterSignUpError(error: SignInAfterSignUpError)
}

// MARK: - Reset password

/// Receives the answer of ``NativeAuthClient/resetPassword(parameters:delegate:)``.
public protocol ResetPasswordStartDelegate: AnyObject {
    /// Required. The reset could not start.
    @MainActor func onResetPasswordStartError(error: ResetPasswordStartError)
    /// Optional. A code was emailed to `sentTo`: submit it on `newState`.
    @MainActor func onResetPasswordCodeRequired(
        newState: ResetPasswordCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    )
}

extension ResetPasswordStartDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onResetPasswordCodeRequired(
        newState: ResetPasswordCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    ) {
        DelegateCall.notImplemented(.onResetPasswordCodeRequired, self)
    }
}

/// Receives the answer of ``ResetPasswordCodeRequiredState/submitCode(code:delegate:)``.
public protocol ResetPasswordVerifyCodeDelegate: AnyObject {
    /// Required. `newState` is the same state when another code may be submitted on it.
    @MainActor func onResetPasswordVerifyCodeError(error: VerifyCodeError, newState: ResetPasswordCodeRequiredState?)
    /// Optional. The code was right: submit the new password on `newState`.
    @MainActor func onPasswordRequired(newState: ResetPasswordRequiredState)
}

extension ResetPasswordVerifyCodeDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onPasswordRequired(newState: ResetPasswordRequiredState) { DelegateCall.notImplemented(.onPasswordRequired, self) }
}

/// Receives the answer of ``ResetPasswordCodeRequiredState/resendCode(delegate:)``.
public protocol ResetPasswordResendCodeDelegate: AnyObject {
    /// Required.
    @MainActor func onResetPasswordResendCodeError(error: ResendCodeError, newState: ResetPasswordCodeRequiredState?)
    /// Optional. A new code was sent (the old one no longer works): submit it on `newState`.
    @MainActor func onResetPasswordResendCodeRequired(
        newState: ResetPasswordCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    )
}

extension ResetPasswordResendCodeDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onResetPasswordResendCodeRequired(
        newState: ResetPasswordCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    ) {
        DelegateCall.notImplemented(.onResetPasswordResendCodeRequired, self)
    }
}

/// Receives the answer of ``ResetPasswordRequiredState/submitPassword(password:delegate:)``.
public protocol ResetPasswordRequiredDelegate: AnyObject {
    /// Required. `newState` is the state to submit another password on, when that is possible.
    @MainActor func onResetPasswordRequiredError(error: PasswordRequiredError, newState: ResetPasswordRequiredState?)
    /// Optional. The password is changed: sign in with `newState`.
    @MainActor func onResetPasswordCompleted(newState: SignInAfterResetPasswordState)
}

extension ResetPasswordRequiredDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onResetPasswordCompleted(newState: SignInAfterResetPasswordState) { DelegateCall.notImplemented(.onResetPasswordCompleted, self) }
}

/// Receives the answer of ``SignInAfterResetPasswordState/signIn(parameters:delegate:)``.
public protocol SignInAfterResetPasswordDelegate: SignInCompletionDelegate {
    /// Required.
    @MainActor func onSignInAfterResetPasswordError(error: SignInAfterResetPasswordError)
}

// MARK: - Sign-in

/// Receives the answer of ``NativeAuthClient/signIn(parameters:delegate:)``.
public protocol SignInStartDelegate: SignInCompletionDelegate {
    /// Required. The sign-in could not start or the password was wrong.
    @MainActor func onSignInStartError(error: SignInStartError)
    /// Optional. A code was emailed to `sentTo`: submit it on `newState`.
    @MainActor func onSignInCodeRequired(newState: SignInCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
    /// Optional. The account has a password and none was given: submit it on `newState`.
    @MainActor func onSignInPasswordRequired(newState: SignInPasswordRequiredState)
}

extension SignInStartDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignInCodeRequired(newState: SignInCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int) {
        DelegateCall.notImplemented(.onSignInCodeRequired, self)
    }
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignInPasswordRequired(newState: SignInPasswordRequiredState) { DelegateCall.notImplemented(.onSignInPasswordRequired, self) }
}

/// Receives the answer of ``SignInPasswordRequiredState/submitPassword(password:delegate:)``.
public protocol SignInPasswordRequiredDelegate: SignInCompletionDelegate {
    /// Required. `newState` is the same state when another password may be submitted on it.
    @MainActor func onSignInPasswordRequiredError(error: PasswordRequiredError, newState: SignInPasswordRequiredState?)
}

/// Receives the answer of ``SignInCodeRequiredState/submitCode(code:delegate:)``.
public protocol SignInVerifyCodeDelegate: SignInCompletionDelegate {
    /// Required. `newState` is the same state when another code may be submitted on it.
    @MainActor func onSignInVerifyCodeError(error: VerifyCodeError, newState: SignInCodeRequiredState?)
}

/// Receives the answer of ``SignInCodeRequiredState/resendCode(delegate:)``.
public protocol SignInResendCodeDelegate: AnyObject {
    /// Required. `newState` is the same state when it can still be used.
    @MainActor func onSignInResendCodeError(error: ResendCodeError, newState: SignInCodeRequiredState?)
    /// Optional. A new code was sent (the old one no longer works): submit it on `newState`.
    @MainActor func onSignInResendCodeCodeRequired(newState: SignInCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
}

extension SignInResendCodeDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onSignInResendCodeCodeRequired(
        newState: SignInCodeRequiredState,
        sentTo: String,
        channelTargetType: NativeAuthChannelType,
        codeLength: Int
    ) {
        DelegateCall.notImplemented(.onSignInResendCodeCodeRequired, self)
    }
}

// MARK: - Tokens

/// Receives the answer of ``NativeAuthUserAccountResult/getAccessToken(parameters:delegate:)``.
public protocol CredentialsDelegate: AnyObject {
    /// Required.
    @MainActor func onAccessTokenRetrieveError(error: RetrieveAccessTokenError)
    /// Optional. The access token.
    @MainActor func onAccessTokenRetrieveCompleted(result: NativeAuthTokenResult)
}

extension CredentialsDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onAccessTokenRetrieveCompleted(result: NativeAuthTokenResult) { DelegateCall.notImplemented(.onAccessTokenRetrieveCompleted, self) }
}
