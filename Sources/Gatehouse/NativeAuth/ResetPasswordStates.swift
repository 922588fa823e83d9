import Foundation
internal import GatehouseWire

/// Password reset: a code was emailed; submit it, or ask for another.
///
/// After ``VerifyCodeError/isInvalidCode`` call ``submitCode(_:)`` again on the same object.
public final class ResetPasswordCodeRequiredState: Sendable {
    let context: FlowContext
    let continuationToken: String

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, continuationToken: String) {
        self.context = context
        self.continuationToken = continuationToken
    }

    // MARK: Resend

    /// Sends a new code (`resetpassword/v1.0/challenge`); the previous one stops working.
    ///
    /// - Throws: ``ResendCodeError``. As in MSAL the flow is over, with one exception: a resend refused for being too
    ///   soon or too many (`slow_down`) leaves this state as it was, taking the previous code (the delegate gets it back
    ///   as `newState`).
    public func resendCode() async throws(ResendCodeError) -> CodeSent<ResetPasswordCodeRequiredState> {
        do throws(NativeAuthFailure) {
            let sent = try await context.engine.codeChallenge(
                .resetPasswordChallenge,
                continuationToken: continuationToken,
                correlationId: correlationId
            )
            return CodeSent(
                newState: ResetPasswordCodeRequiredState(context: context, continuationToken: sent.continuationToken),
                sentTo: sent.sentTo,
                channelTargetType: sent.channel,
                codeLength: sent.codeLength
            )
        } catch {
            throw error.isRedirect
                ? ResendCodeError(.browserRequired, error) : ResendCodeError(.generalError, error, keepsState: error.keepsState(otherwise: false))
        }
    }

    /// Delegate form of ``resendCode()``.
    public func resendCode(delegate: any ResetPasswordResendCodeDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(ResendCodeError) {
                let sent = try await self.resendCode()
                DelegateCall.optional(delegate, .onResetPasswordResendCodeRequired) {
                    delegate.onResetPasswordResendCodeRequired(
                        newState: sent.newState,
                        sentTo: sent.sentTo,
                        channelTargetType: sent.channelTargetType,
                        codeLength: sent.codeLength
                    )
                } otherwise: { message in
                    delegate.onResetPasswordResendCodeError(
                        error: ResendCodeError(general: message, correlationId: self.correlationId),
                        newState: nil
                    )
                }
            } catch {
                delegate.onResetPasswordResendCodeError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }

    // MARK: Submit

    /// Submits the emailed code (`resetpassword/v1.0/continue`, `grant_type=oob`).
    ///
    /// - Returns: the state that takes the new password.
    /// - Throws: ``VerifyCodeError``. After ``VerifyCodeError/isInvalidCode`` submit another code on this state.
    public func submitCode(_ code: String) async throws(VerifyCodeError) -> ResetPasswordRequiredState {
        guard !code.isEmpty else {
            throw VerifyCodeError(local: .invalidCode, NativeAuthErrorText.invalidCode, correlationId: correlationId, keepsState: true)
        }
        do throws(NativeAuthFailure) {
            let engine = context.engine
            let answer = try await engine.post(
                .resetPasswordContinue,
                engine.form([("continuation_token", continuationToken), ("grant_type", NativeAuthGrantType.oob.rawValue), ("oob", code)]),
                correlationId: correlationId,
                as: NativeAuthStepResponse.self
            )
            guard let next = answer.continuationToken else {
                throw .general("resetpassword/continue answered without continuation_token", correlationId)
            }
            return ResetPasswordRequiredState(context: context, continuationToken: next)
        } catch {
            if error.isRedirect { throw VerifyCodeError(.browserRequired, error) }
            if error.isInvalidCode { throw VerifyCodeError(.invalidCode, error, fixedText: NativeAuthErrorText.invalidCode, keepsState: true) }
            throw VerifyCodeError(.generalError, error, keepsState: error.keepsState(otherwise: false))
        }
    }

    /// Delegate form of ``submitCode(_:)``.
    public func submitCode(code: String, delegate: any ResetPasswordVerifyCodeDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(VerifyCodeError) {
                let state = try await self.submitCode(code)
                DelegateCall.optional(delegate, .onPasswordRequired) {
                    delegate.onPasswordRequired(newState: state)
                } otherwise: { message in
                    delegate.onResetPasswordVerifyCodeError(
                        error: VerifyCodeError(general: message, correlationId: self.correlationId),
                        newState: nil
                    )
                }
            } catch {
                delegate.onResetPasswordVerifyCodeError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }
}

/// Password reset: the code was right; submit the new password.
///
/// After ``PasswordRequiredError/isInvalidPassword`` call ``submitPassword(_:)`` again on the same object. This is
/// the one state whose token can change: when the server accepted the submission but then refused the password
/// while completing it (reported by `poll_completion`), the state takes the token of that submission, which is the
/// one the next attempt must use.
public final class ResetPasswordRequiredState: Sendable {
    let context: FlowContext
    private let token: Locked<String>

    /// The token the next ``submitPassword(_:)`` sends.
    var continuationToken: String { token.withLock { $0 } }

    /// How many times `poll_completion` is asked again after its first answer (MSAL:
    /// `kNumberOfTimesToRetryPollCompletionCall`).
    static let pollRetries = 5

    /// The longest wait between two polls, whatever `poll_interval` says (Gatehouse says 1 second): a server that
    /// answers a day cannot hold the call for days.
    static let longestPollInterval = 10

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, continuationToken: String) {
        self.context = context
        token = Locked(continuationToken)
    }

    /// Sets the new password (`resetpassword/v1.0/submit`), then asks `resetpassword/v1.0/poll_completion` until
    /// the server reports the outcome: right away, then up to 5 more times, `poll_interval` seconds apart (or the
    /// `retry_after` of a poll refused as too soon; at most 10 seconds).
    ///
    /// - Returns: the state that signs the user in.
    /// - Throws: ``PasswordRequiredError``. After ``PasswordRequiredError/isInvalidPassword`` submit another password
    ///   on this state.
    public func submitPassword(_ password: String) async throws(PasswordRequiredError) -> SignInAfterResetPasswordState {
        guard !password.isEmpty else {
            throw PasswordRequiredError(local: .invalidPassword, NativeAuthErrorText.invalidPassword, correlationId: correlationId, keepsState: true)
        }
        let engine = context.engine
        let submitted: NativeAuthSubmitResponse
        do throws(NativeAuthFailure) {
            submitted = try await engine.post(
                .resetPasswordSubmit,
                engine.form([("continuation_token", continuationToken), ("new_password", password)]),
                correlationId: correlationId,
                as: NativeAuthSubmitResponse.self
            )
        } catch {
            throw Self.error(error)
        }
        var retries = Self.pollRetries
        while true {
            var wait = submitted.pollInterval
            do throws(NativeAuthFailure) {
                let poll = try await engine.post(
                    .resetPasswordPollCompletion,
                    engine.form([("continuation_token", submitted.continuationToken)]),
                    correlationId: correlationId,
                    as: NativeAuthPollResponse.self
                )
                switch poll.status {
                case .succeeded: return SignInAfterResetPasswordState(context: context, continuationToken: poll.continuationToken)
                case .failed: throw .general("The password reset failed", correlationId)
                case .inProgress, .notStarted: break
                }
            } catch {
                // A poll refused as too soon or too many (`slow_down`) was not looked at, and the submit may have set the
                // password: ask again after the wait it names, as one of the retries.
                guard error.isServerError(.slowDown) else {
                    if error.isPasswordPolicy { token.withLock { $0 = submitted.continuationToken } }
                    throw Self.error(error)
                }
                wait = error.body?.retryAfter ?? wait
            }
            guard retries > 0 else {
                throw PasswordRequiredError(general: "The password reset did not complete in time", correlationId: correlationId)
            }
            retries -= 1
            do {
                try await engine.configuration.sleep(TimeInterval(min(max(wait, 0), Self.longestPollInterval)))
            } catch {
                throw PasswordRequiredError(general: "The password reset was cancelled", correlationId: correlationId)
            }
        }
    }

    /// The error of a failed submit or poll. A password the policy refused may be replaced on this state (after a
    /// poll, under the token the submit answered with); a submit refused with `slow_down` keeps it as it was (a poll
    /// refused so is asked again, and never comes here); anything else ends the flow.
    private static func error(_ failure: NativeAuthFailure) -> PasswordRequiredError {
        if failure.isRedirect { return PasswordRequiredError(.browserRequired, failure) }
        if failure.isPasswordPolicy {
            return PasswordRequiredError(.invalidPassword, failure, fixedText: NativeAuthErrorText.invalidPassword, keepsState: true)
        }
        return PasswordRequiredError(.generalError, failure, keepsState: failure.keepsState(otherwise: false))
    }

    /// Delegate form of ``submitPassword(_:)``.
    public func submitPassword(password: String, delegate: any ResetPasswordRequiredDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(PasswordRequiredError) {
                let state = try await self.submitPassword(password)
                DelegateCall.optional(delegate, .onResetPasswordCompleted) {
                    delegate.onResetPasswordCompleted(newState: state)
                } otherwise: { message in
                    delegate.onResetPasswordRequiredError(
                        error: PasswordRequiredError(general: message, correlationId: self.correlationId),
                        newState: nil
                    )
                }
            } catch {
                delegate.onResetPasswordRequiredError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }
}

/// The password is reset: sign the user in with it without asking for anything again.
public final class SignInAfterResetPasswordState: Sendable {
    let context: FlowContext
    /// Nil when `poll_completion` sent none; ``signIn(parameters:)`` then fails without a request.
    let continuationToken: String?

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, continuationToken: String?) {
        self.context = context
        self.continuationToken = continuationToken
    }

    /// Signs in (`oauth2/v2.0/token`, `grant_type=continuation_token`) and caches the account.
    public func signIn(parameters: SignInAfterResetPasswordParameters = SignInAfterResetPasswordParameters())
        async throws(SignInAfterResetPasswordError)
        -> NativeAuthUserAccountResult
    {
        try await signIn(options: parameters.snapshot)
    }

    /// ``signIn(parameters:)`` with scopes.
    public func signIn(scopes: [String]?, claimsRequest: String? = nil) async throws(SignInAfterResetPasswordError) -> NativeAuthUserAccountResult {
        try await signIn(options: SignInAfterFlowValues(scopes: scopes, claimsRequest: claimsRequest))
    }

    private func signIn(options: SignInAfterFlowValues) async throws(SignInAfterResetPasswordError) -> NativeAuthUserAccountResult {
        do throws(NativeAuthFailure) {
            return try await context.signInAfterFlow(continuationToken: continuationToken, options: options)
        } catch {
            throw error.isRedirect ? SignInAfterResetPasswordError(.browserRequired, error) : SignInAfterResetPasswordError(.generalError, error)
        }
    }

    /// Delegate form of ``signIn(parameters:)``.
    public func signIn(parameters: SignInAfterResetPasswordParameters, delegate: any SignInAfterResetPasswordDelegate) {
        let options = parameters.snapshot
        DelegateCall.deliver(delegate) { delegate in
            do throws(SignInAfterResetPasswordError) {
                let result = try await self.signIn(options: options)
                DelegateCall.optional(delegate, .onSignInCompleted) {
                    delegate.onSignInCompleted(result: result)
                } otherwise: { message in
                    delegate.onSignInAfterResetPasswordError(
                        error: SignInAfterResetPasswordError(general: message, correlationId: self.correlationId)
                    )
                }
            } catch {
                delegate.onSignInAfterResetPasswordError(error: error)
            }
        }
    }

    /// MSAL 1.x form of ``signIn(parameters:delegate:)``.
    public func signIn(scopes: [String]? = nil, delegate: any SignInAfterResetPasswordDelegate) {
        let parameters = SignInAfterResetPasswordParameters()
        parameters.scopes = scopes
        signIn(parameters: parameters, delegate: delegate)
    }
}
