// Native auth code in the shapes of Microsoft's MSAL iOS documentation and samples (sign-up with a password and
// attributes, self-service password reset, sign-in, the cached account, access tokens, sign-out), written fresh for
// Gatehouse with only what a moving app changes: `import MSAL` is `import Gatehouse`, and the client is built with the
// server's native auth URL where MSAL takes a tenant subdomain. The names are MSAL's (`MSALNativeAuth…`), the
// `MSAL.` qualifier appears as `Gatehouse.`, and the view controllers are `@MainActor` classes (UIKit is not on
// Linux; the delegate methods are the ones an app's view controller implements).
//
// This target only has to compile for the promise to hold; the end-to-end tests also drive these classes against a
// live server (`SourceCompatibilityEndToEndTests`).
import Foundation
import Gatehouse

// MARK: - Sign-up with a password and attributes

@MainActor
public final class SignUpViewController {
    public var nativeAuth: MSALNativeAuthPublicClientApplication!
    public var verifyCodeState: SignUpCodeRequiredState?
    public var attributesState: SignUpAttributesRequiredState?
    public var accountResult: MSALNativeAuthUserAccountResult?
    public var accessToken: String?
    public var resultText = ""

    public init(serverURL: String, clientId: String) {
        do {
            nativeAuth = try MSALNativeAuthPublicClientApplication(clientId: clientId, serverURL: serverURL, challengeTypes: [.OOB, .password])
        } catch {
            resultText = "Unable to initialize MSAL \(error)"
        }
    }

    public func signUpPressed(email: String, password: String, country: String) {
        let parameters = MSALNativeAuthSignUpParameters(username: email)
        parameters.password = password
        parameters.attributes = ["country": country]
        nativeAuth.signUp(parameters: parameters, delegate: self)
    }

    public func submitCodePressed(code: String) {
        verifyCodeState?.submitCode(code: code, delegate: self)
    }

    public func resendCodePressed() {
        verifyCodeState?.resendCode(delegate: self)
    }
}

extension SignUpViewController: SignUpStartDelegate {
    public func onSignUpStartError(error: Gatehouse.SignUpStartError) {
        if error.isUserAlreadyExists {
            resultText = "Unable to sign up: User already exists"
        } else if error.isInvalidPassword {
            resultText = "Unable to sign up: The password is invalid"
        } else if error.isInvalidUsername {
            resultText = "Unable to sign up: The username is invalid"
        } else if error.isBrowserRequired {
            resultText = "Unable to sign up: a browser is required"
        } else {
            resultText = "Unexpected error signing up: \(error.errorDescription ?? "No error description")"
        }
    }

    public func onSignUpCodeRequired(
        newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: MSALNativeAuthChannelType, codeLength: Int
    ) {
        resultText = "Verification code sent to \(sentTo) (\(channelTargetType.isEmailType ? "email" : channelTargetType.value), \(codeLength) digits)"
        verifyCodeState = newState
    }

    public func onSignUpAttributesInvalid(attributeNames: [String]) {
        resultText = "Invalid attributes \(attributeNames)"
    }
}

extension SignUpViewController: SignUpVerifyCodeDelegate {
    public func onSignUpVerifyCodeError(error: VerifyCodeError, newState: SignUpCodeRequiredState?) {
        if error.isInvalidCode {
            resultText = "Invalid code"
            verifyCodeState = newState
        } else {
            resultText = "Unexpected error verifying code: \(error.errorDescription ?? "No error description")"
        }
    }

    public func onSignUpAttributesRequired(attributes: [MSALNativeAuthRequiredAttribute], newState: SignUpAttributesRequiredState) {
        resultText = "Attributes required: \(attributes.map(\.name))"
        attributesState = newState
    }

    public func onSignUpCompleted(newState: SignInAfterSignUpState) {
        resultText = "Signed up successfully!"
        let parameters = MSALNativeAuthSignInAfterSignUpParameters()
        parameters.scopes = ["openid", "offline_access"]
        newState.signIn(parameters: parameters, delegate: self)
    }
}

extension SignUpViewController: SignUpResendCodeDelegate {
    public func onSignUpResendCodeError(error: ResendCodeError, newState: SignUpCodeRequiredState?) {
        resultText = "Unexpected error while requesting new code: \(error.errorDescription ?? "No error description")"
    }

    public func onSignUpResendCodeCodeRequired(
        newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: MSALNativeAuthChannelType, codeLength: Int
    ) {
        resultText = "A new code was sent to \(sentTo)"
        verifyCodeState = newState
    }
}

extension SignUpViewController: SignInAfterSignUpDelegate {
    public func onSignInAfterSignUpError(error: SignInAfterSignUpError) {
        resultText = "Error signing in after signing up: \(error.errorDescription ?? "No error description")"
    }

    public func onSignInCompleted(result: MSALNativeAuthUserAccountResult) {
        resultText = "Signed in: \(result.account.username)"
        accountResult = result
        let parameters = MSALNativeAuthGetAccessTokenParameters()
        parameters.forceRefresh = false
        result.getAccessToken(parameters: parameters, delegate: self)
    }
}

extension SignUpViewController: CredentialsDelegate {
    public func onAccessTokenRetrieveCompleted(result: MSALNativeAuthTokenResult) {
        accessToken = result.accessToken
        resultText = "Access token expires on \(result.expiresOn.map { "\($0)" } ?? "-"), scopes \(result.scopes)"
    }

    public func onAccessTokenRetrieveError(error: RetrieveAccessTokenError) {
        resultText = "Error retrieving access token: \(error.errorDescription ?? "No error description")"
    }
}

// MARK: - Self-service password reset

@MainActor
public final class ResetPasswordViewController {
    public var nativeAuth: MSALNativeAuthPublicClientApplication!
    public var codeRequiredState: ResetPasswordCodeRequiredState?
    public var passwordRequiredState: ResetPasswordRequiredState?
    public var accountResult: MSALNativeAuthUserAccountResult?
    public var resultText = ""

    public init(serverURL: String, clientId: String) {
        do {
            let config = try MSALNativeAuthPublicClientApplicationConfig(clientId: clientId, serverURL: serverURL, challengeTypes: [.OOB, .password])
            nativeAuth = try MSALNativeAuthPublicClientApplication(nativeAuthConfiguration: config)
        } catch {
            resultText = "Unable to initialize MSAL \(error)"
        }
    }

    public func resetPasswordPressed(email: String) {
        let parameters = MSALNativeAuthResetPasswordParameters(username: email)
        nativeAuth.resetPassword(parameters: parameters, delegate: self)
    }

    public func submitCodePressed(code: String) {
        codeRequiredState?.submitCode(code: code, delegate: self)
    }

    public func submitPasswordPressed(password: String) {
        passwordRequiredState?.submitPassword(password: password, delegate: self)
    }
}

extension ResetPasswordViewController: ResetPasswordStartDelegate {
    public func onResetPasswordStartError(error: ResetPasswordStartError) {
        if error.isInvalidUsername {
            resultText = "Invalid username"
        } else if error.isUserNotFound {
            resultText = "User not found"
        } else if error.isUserDoesNotHavePassword {
            resultText = "User is not registered with a password"
        } else {
            resultText = "Error while resetting password: \(error.errorDescription ?? "No error description")"
        }
    }

    public func onResetPasswordCodeRequired(
        newState: ResetPasswordCodeRequiredState, sentTo: String, channelTargetType: MSALNativeAuthChannelType, codeLength: Int
    ) {
        resultText = "Verification code sent to \(sentTo)"
        codeRequiredState = newState
    }
}

extension ResetPasswordViewController: ResetPasswordVerifyCodeDelegate {
    public func onResetPasswordVerifyCodeError(error: VerifyCodeError, newState: ResetPasswordCodeRequiredState?) {
        if error.isInvalidCode {
            resultText = "Invalid code"
            codeRequiredState = newState
        } else {
            resultText = "Unexpected error verifying code: \(error.errorDescription ?? "No error description")"
        }
    }

    public func onPasswordRequired(newState: ResetPasswordRequiredState) {
        resultText = "Enter a new password"
        passwordRequiredState = newState
    }
}

extension ResetPasswordViewController: ResetPasswordRequiredDelegate {
    public func onResetPasswordRequiredError(error: PasswordRequiredError, newState: ResetPasswordRequiredState?) {
        if error.isInvalidPassword {
            resultText = "Invalid password"
            passwordRequiredState = newState
        } else {
            resultText = "Error setting password: \(error.errorDescription ?? "No error description")"
        }
    }

    public func onResetPasswordCompleted(newState: SignInAfterResetPasswordState) {
        resultText = "Password reset completed"
        newState.signIn(parameters: MSALNativeAuthSignInAfterResetPasswordParameters(), delegate: self)
    }
}

extension ResetPasswordViewController: SignInAfterResetPasswordDelegate {
    public func onSignInAfterResetPasswordError(error: SignInAfterResetPasswordError) {
        resultText = "Error signing in after password reset: \(error.errorDescription ?? "No error description")"
    }

    public func onSignInCompleted(result: MSALNativeAuthUserAccountResult) {
        resultText = "Signed in: \(result.account.username)"
        accountResult = result
    }
}

// MARK: - Sign-in, the cached account, sign-out

@MainActor
public final class SignInViewController {
    public var nativeAuth: MSALNativeAuthPublicClientApplication!
    public var accountResult: MSALNativeAuthUserAccountResult?
    public var resultText = ""

    public init(serverURL: String, clientId: String) {
        do {
            nativeAuth = try MSALNativeAuthPublicClientApplication(clientId: clientId, serverURL: serverURL, challengeTypes: [.password])
        } catch {
            resultText = "Unable to initialize MSAL \(error)"
        }
        // At launch: the account cached by an earlier sign-in, if any.
        accountResult = nativeAuth?.getNativeAuthUserAccount()
    }

    public func signInPressed(email: String, password: String) {
        let parameters = MSALNativeAuthSignInParameters(username: email)
        parameters.password = password
        parameters.scopes = ["openid", "offline_access"]
        nativeAuth.signIn(parameters: parameters, delegate: self)
    }

    public func signOutPressed() {
        accountResult?.signOut()
        accountResult = nil
        resultText = "Signed out"
    }
}

extension SignInViewController: SignInStartDelegate {
    public func onSignInStartError(error: Gatehouse.SignInStartError) {
        if error.isUserNotFound || error.isInvalidCredentials || error.isInvalidUsername {
            resultText = "Invalid username or password"
        } else {
            resultText = "Error while signing in: \(error.errorDescription ?? "No error description")"
        }
    }

    public func onSignInCompleted(result: MSALNativeAuthUserAccountResult) {
        resultText = "Signed in: \(result.account.username)"
        accountResult = result
    }
}

// MARK: - Sign-in with an emailed code, in the shape of Microsoft's SwiftUI sample

/// A view model that is not main-actor-bound, adopting the delegates in extensions with `@MainActor` methods, and
/// naming MSAL's types with the `MSAL.` qualifier, as Microsoft's SwiftUI tutorial writes them.
public final class SignInWithCodeModel {
    public let nativeAuth: MSALNativeAuthPublicClientApplication
    public var codeState: MSAL.SignInCodeRequiredState?
    public var accountResult: MSAL.MSALNativeAuthUserAccountResult?
    public var preferredUsername: String?
    public var accessToken: String?
    public var message = ""

    public init(serverURL: String, clientId: String) throws {
        let config = try MSALNativeAuthPublicClientApplicationConfig(clientId: clientId, serverURL: serverURL, challengeTypes: [.OOB])
        nativeAuth = try MSALNativeAuthPublicClientApplication(nativeAuthConfiguration: config)
    }

    @MainActor public func signIn(email: String) {
        nativeAuth.signIn(parameters: MSALNativeAuthSignInParameters(username: email), delegate: self)
    }

    @MainActor public func submit(code: String) {
        codeState?.submitCode(code: code, delegate: self)
    }

    @MainActor public func token() {
        let parameters = MSALNativeAuthGetAccessTokenParameters()
        parameters.forceRefresh = true
        accountResult?.getAccessToken(parameters: parameters, delegate: self)
    }
}

extension SignInWithCodeModel: SignInStartDelegate {
    @MainActor public func onSignInStartError(error: MSAL.SignInStartError) {
        message = error.isUserNotFound ? "No such user" : "Error: \(error.errorDescription ?? "none")"
    }

    @MainActor public func onSignInCodeRequired(
        newState: MSAL.SignInCodeRequiredState, sentTo: String, channelTargetType: MSAL.MSALNativeAuthChannelType, codeLength: Int
    ) {
        codeState = newState
        message = "A \(codeLength)-digit code went to \(sentTo) by \(channelTargetType.isEmailType ? "email" : "another channel")"
    }
}

extension SignInWithCodeModel: SignInVerifyCodeDelegate {
    @MainActor public func onSignInVerifyCodeError(error: MSAL.VerifyCodeError, newState: MSAL.SignInCodeRequiredState?) {
        if error.isInvalidCode, let newState { codeState = newState }
        message = "Wrong code"
    }

    @MainActor public func onSignInCompleted(result: MSAL.MSALNativeAuthUserAccountResult) {
        accountResult = result
        // "Read ID token claims", as the tutorial does.
        let claims = result.account.accountClaims
        preferredUsername = claims?["preferred_username"] as? String
        message = "Signed in"
    }
}

extension SignInWithCodeModel: CredentialsDelegate {
    @MainActor public func onAccessTokenRetrieveCompleted(result: MSAL.MSALNativeAuthTokenResult) {
        accessToken = result.accessToken
    }

    @MainActor public func onAccessTokenRetrieveError(error: MSAL.RetrieveAccessTokenError) {
        message = "Token error: \(error.errorDescription ?? "none")"
    }
}

/// Sign-up attributes typed `[String: Any]`, as MSAL's tutorial declares them.
@MainActor
public func signUpWithUntypedAttributes(_ nativeAuth: MSALNativeAuthPublicClientApplication, email: String, delegate: any SignUpStartDelegate) {
    let attributes: [String: Any] = ["displayName": "Ada", "age": 36]
    let parameters = MSALNativeAuthSignUpParameters(username: email)
    parameters.attributes = attributes
    nativeAuth.signUp(parameters: parameters, delegate: delegate)
}

// MARK: - Sign-up with an emailed code, then a password and attributes when the server asks for them

/// The "sign up with email one-time passcode" flow of MSAL's documentation: no password up front; the server asks
/// for one (and for attributes) after the code, each on its own state.
@MainActor
public final class SignUpWithCodeViewController {
    public let nativeAuth: MSALNativeAuthPublicClientApplication
    public var codeState: SignUpCodeRequiredState?
    public var passwordState: SignUpPasswordRequiredState?
    public var attributesState: SignUpAttributesRequiredState?
    public var signInState: SignInAfterSignUpState?
    public var resultText = ""

    public init(nativeAuth: MSALNativeAuthPublicClientApplication) {
        self.nativeAuth = nativeAuth
    }

    public func signUpPressed(email: String) {
        nativeAuth.signUp(parameters: MSALNativeAuthSignUpParameters(username: email), delegate: self)
    }

    public func codePressed(_ code: String) { codeState?.submitCode(code: code, delegate: self) }
    public func passwordPressed(_ password: String) { passwordState?.submitPassword(password: password, delegate: self) }
    public func attributesPressed(country: String) {
        attributesState?.submitAttributes(attributes: ["country": country], delegate: self)
    }
    public func signInPressed() {
        signInState?.signIn(parameters: MSALNativeAuthSignInAfterSignUpParameters(), delegate: self)
    }
}

extension SignUpWithCodeViewController: SignUpStartDelegate {
    public func onSignUpStartError(error: MSAL.SignUpStartError) { resultText = "Error: \(error.errorDescription ?? "")" }

    public func onSignUpCodeRequired(
        newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: MSALNativeAuthChannelType, codeLength: Int
    ) {
        codeState = newState
    }
}

extension SignUpWithCodeViewController: SignUpVerifyCodeDelegate {
    public func onSignUpVerifyCodeError(error: MSAL.VerifyCodeError, newState: SignUpCodeRequiredState?) {
        resultText = error.isInvalidCode ? "Invalid code" : "Error: \(error.errorDescription ?? "")"
    }

    public func onSignUpPasswordRequired(newState: SignUpPasswordRequiredState) { passwordState = newState }

    public func onSignUpAttributesRequired(attributes: [MSALNativeAuthRequiredAttribute], newState: SignUpAttributesRequiredState) {
        attributesState = newState
        resultText = "Needs: \(attributes.map(\.name).joined(separator: ", "))"
    }

    public func onSignUpCompleted(newState: SignInAfterSignUpState) { signInState = newState }
}

extension SignUpWithCodeViewController: SignUpPasswordRequiredDelegate {
    public func onSignUpPasswordRequiredError(error: MSAL.PasswordRequiredError, newState: SignUpPasswordRequiredState?) {
        resultText = error.isInvalidPassword ? "Invalid password" : "Error: \(error.errorDescription ?? "")"
    }
}

extension SignUpWithCodeViewController: SignUpAttributesRequiredDelegate {
    public func onSignUpAttributesRequiredError(error: MSAL.AttributesRequiredError) {
        resultText = "Error: \(error.errorDescription ?? "")"
    }

    public func onSignUpAttributesInvalid(attributeNames: [String], newState: SignUpAttributesRequiredState) {
        attributesState = newState
        resultText = "Invalid: \(attributeNames.joined(separator: ", "))"
    }
}

extension SignUpWithCodeViewController: SignInAfterSignUpDelegate {
    public func onSignInAfterSignUpError(error: MSAL.SignInAfterSignUpError) { resultText = "Error: \(error.errorDescription ?? "")" }

    public func onSignInCompleted(result: MSALNativeAuthUserAccountResult) { resultText = "Signed in: \(result.account.username)" }
}
