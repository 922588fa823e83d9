import Foundation
internal import GatehouseWire

/// The sign-in options a flow carries to its token request.
struct SignInOptions: Sendable {
    var scopes: [String]?
    var claimsRequest: String?
}

/// Sign-in: a code was emailed; submit it, or ask for another.
///
/// After a ``VerifyCodeError`` other than ``VerifyCodeError/isBrowserRequired`` call ``submitCode(_:)`` again on
/// the same object.
public final class SignInCodeRequiredState: Sendable {
    let context: FlowContext
    let options: SignInOptions
    let continuationToken: String

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, options: SignInOptions, continuationToken: String) {
        self.context = context
        self.options = options
        self.continuationToken = continuationToken
    }

    // MARK: Resend

    /// Sends a new code (`oauth2/v2.0/challenge`); the previous one stops working.
    ///
    /// - Throws: ``ResendCodeError``. Unless it is ``ResendCodeError/isBrowserRequired`` or says the flow has ended (an
    ///   expired flow, too many wrong codes), this state may still take the previous code.
    public func resendCode() async throws(ResendCodeError) -> CodeSent<SignInCodeRequiredState> {
        do throws(NativeAuthFailure) {
            let sent = try await context.engine.codeChallenge(.signInChallenge, continuationToken: continuationToken, correlationId: correlationId)
            return CodeSent(
                newState: SignInCodeRequiredState(context: context, options: options, continuationToken: sent.continuationToken),
                sentTo: sent.sentTo,
                channelTargetType: sent.channel,
                codeLength: sent.codeLength
            )
        } catch {
            throw error.isRedirect
                ? ResendCodeError(.browserRequired, error) : ResendCodeError(.generalError, error, keepsState: error.keepsState(otherwise: true))
        }
    }

    /// Delegate form of ``resendCode()``.
    public func resendCode(delegate: any SignInResendCodeDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(ResendCodeError) {
                let sent = try await self.resendCode()
                DelegateCall.optional(delegate, .onSignInResendCodeCodeRequired) {
                    delegate.onSignInResendCodeCodeRequired(
                        newState: sent.newState,
                        sentTo: sent.sentTo,
                        channelTargetType: sent.channelTargetType,
                        codeLength: sent.codeLength
                    )
                } otherwise: { message in
                    delegate.onSignInResendCodeError(error: ResendCodeError(general: message, correlationId: self.correlationId), newState: nil)
                }
            } catch {
                delegate.onSignInResendCodeError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }

    // MARK: Submit

    /// Submits the emailed code (`oauth2/v2.0/token`, `grant_type=oob`) and caches the account.
    ///
    /// - Throws: ``VerifyCodeError``. Unless it is ``VerifyCodeError/isBrowserRequired`` or says the flow has ended
    ///   (expired, too many wrong codes, a disabled account), submit another code on this state.
    public func submitCode(_ code: String) async throws(VerifyCodeError) -> NativeAuthUserAccountResult {
        guard !code.isEmpty else {
            throw VerifyCodeError(local: .invalidCode, NativeAuthErrorText.invalidCode, correlationId: correlationId, keepsState: true)
        }
        let engine = context.engine
        let fields = NativeAuthEngine.tokenForm(
            engine.configuration,
            grant: .oob,
            continuationToken: continuationToken,
            secret: ("oob", code),
            scopes: options.scopes,
            claims: options.claimsRequest
        )
        do throws(NativeAuthFailure) {
            return try await engine.signIn(fields, username: context.username, scopes: options.scopes, correlationId: correlationId)
        } catch {
            if error.isRedirect { throw VerifyCodeError(.browserRequired, error) }
            if error.isInvalidCode { throw VerifyCodeError(.invalidCode, error, fixedText: NativeAuthErrorText.invalidCode, keepsState: true) }
            throw VerifyCodeError(.generalError, error, keepsState: error.keepsState(otherwise: true))
        }
    }

    /// Delegate form of ``submitCode(_:)``.
    public func submitCode(code: String, delegate: any SignInVerifyCodeDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(VerifyCodeError) {
                let result = try await self.submitCode(code)
                DelegateCall.optional(delegate, .onSignInCompleted) {
                    delegate.onSignInCompleted(result: result)
                } otherwise: { message in
                    delegate.onSignInVerifyCodeError(error: VerifyCodeError(general: message, correlationId: self.correlationId), newState: nil)
                }
            } catch {
                delegate.onSignInVerifyCodeError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }
}

/// Sign-in: the account has a password; submit it.
///
/// After a ``PasswordRequiredError`` other than ``PasswordRequiredError/isBrowserRequired`` call
/// ``submitPassword(_:)`` again on the same object.
public final class SignInPasswordRequiredState: Sendable {
    let context: FlowContext
    let options: SignInOptions
    let continuationToken: String

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, options: SignInOptions, continuationToken: String) {
        self.context = context
        self.options = options
        self.continuationToken = continuationToken
    }

    /// Submits the password (`oauth2/v2.0/token`, `grant_type=password`) and caches the account.
    ///
    /// - Throws: ``PasswordRequiredError``; ``PasswordRequiredError/isInvalidPassword`` when it is empty or wrong.
    public func submitPassword(_ password: String) async throws(PasswordRequiredError) -> NativeAuthUserAccountResult {
        guard !password.isEmpty else {
            throw PasswordRequiredError(local: .invalidPassword, NativeAuthErrorText.invalidPassword, correlationId: correlationId, keepsState: true)
        }
        do throws(NativeAuthFailure) {
            return try await context.passwordGrant(continuationToken: continuationToken, password: password, options: options)
        } catch {
            if error.isRedirect { throw PasswordRequiredError(.browserRequired, error) }
            if error.isInvalidGrant(code: NativeAuthErrorCode.invalidCredentials) {
                throw PasswordRequiredError(.invalidPassword, error, fixedText: NativeAuthErrorText.invalidPassword, keepsState: true)
            }
            throw PasswordRequiredError(.generalError, error, keepsState: error.keepsState(otherwise: true))
        }
    }

    /// Delegate form of ``submitPassword(_:)``.
    public func submitPassword(password: String, delegate: any SignInPasswordRequiredDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(PasswordRequiredError) {
                let result = try await self.submitPassword(password)
                DelegateCall.optional(delegate, .onSignInCompleted) {
                    delegate.onSignInCompleted(result: result)
                } otherwise: { message in
                    delegate.onSignInPasswordRequiredError(
                        error: PasswordRequiredError(general: message, correlationId: self.correlationId),
                        newState: nil
                    )
                }
            } catch {
                delegate.onSignInPasswordRequiredError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }
}

extension FlowContext {
    /// The `password` grant.
    func passwordGrant(continuationToken: String, password: String, options: SignInOptions) async throws(NativeAuthFailure)
        -> NativeAuthUserAccountResult
    {
        let fields = NativeAuthEngine.tokenForm(
            engine.configuration,
            grant: .password,
            continuationToken: continuationToken,
            username: username,
            secret: ("password", password),
            scopes: options.scopes,
            claims: options.claimsRequest
        )
        return try await engine.signIn(fields, username: username, scopes: options.scopes, correlationId: correlationId)
    }
}
