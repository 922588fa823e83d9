import Foundation
internal import GatehouseWire

/// What every state of one flow shares: the engine, the correlation id and the username.
struct FlowContext: Sendable {
    let engine: NativeAuthEngine
    let correlationId: UUID
    let username: String
}

/// The answers of `signup/v1.0/continue` that move the flow on.
enum SignUpContinueOutcome: Sendable {
    case completed(SignInAfterSignUpState)
    case attributesRequired([RequiredAttribute], SignUpAttributesRequiredState)
    /// `credential_required`: the account needs a password; the token is for `signup/v1.0/challenge`.
    case credentialRequired(String)
}

extension FlowContext {
    /// POSTs to `signup/v1.0/continue`. A 200 completes the sign-up; `attributes_required` and
    /// `credential_required` (400s) move it on; any other failure is thrown.
    func signUpContinue(_ fields: [(String, String?)]) async throws(NativeAuthFailure) -> SignUpContinueOutcome {
        do {
            let answer = try await engine.post(.signUpContinue, engine.form(fields), correlationId: correlationId, as: NativeAuthStepResponse.self)
            return .completed(SignInAfterSignUpState(context: self, continuationToken: answer.continuationToken))
        } catch let failure {
            if failure.isServerError(.attributesRequired) {
                guard let body = failure.body, let token = body.continuationToken, let attributes = body.requiredAttributes, !attributes.isEmpty
                else {
                    throw .general("attributes_required without continuation_token or required_attributes", failure.correlationId)
                }
                return .attributesRequired(
                    attributes.map(RequiredAttribute.init),
                    SignUpAttributesRequiredState(context: self, continuationToken: token)
                )
            }
            if failure.isServerError(.credentialRequired) {
                guard let token = failure.body?.continuationToken else {
                    throw .general("credential_required without continuation_token", failure.correlationId)
                }
                return .credentialRequired(token)
            }
            throw failure
        }
    }

    /// The names of `invalid_attributes`, or nil when the failure is not `attribute_validation_failed` with them.
    static func invalidAttributes(_ failure: NativeAuthFailure) -> [String]? {
        guard failure.isServerError(.invalidGrant, suberror: .attributeValidationFailed), let names = failure.body?.invalidAttributes else {
            return nil
        }
        return names.map(\.name)
    }
}

/// Sign-up: a code was emailed; submit it, or ask for another.
///
/// A state holds the continuation token of its step and never changes. After an error that keeps the state (the
/// delegate gets it back as `newState`; in the async form, ``VerifyCodeError/isInvalidCode``), call the method
/// again on the same object.
public final class SignUpCodeRequiredState: Sendable {
    let context: FlowContext
    let continuationToken: String

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, continuationToken: String) {
        self.context = context
        self.continuationToken = continuationToken
    }

    // MARK: Resend

    /// Sends a new code (`signup/v1.0/challenge`); the previous one stops working.
    ///
    /// - Returns: the state that takes the new code, and where it went.
    /// - Throws: ``ResendCodeError``. Unless it is ``ResendCodeError/isBrowserRequired``, this state may still
    ///   take the previous code when the server rejected the resend with a known error or as too soon (`slow_down`),
    ///   not when the flow has expired.
    public func resendCode() async throws(ResendCodeError) -> CodeSent<SignUpCodeRequiredState> {
        do throws(NativeAuthFailure) {
            let sent = try await context.engine.codeChallenge(.signUpChallenge, continuationToken: continuationToken, correlationId: correlationId)
            return CodeSent(
                newState: SignUpCodeRequiredState(context: context, continuationToken: sent.continuationToken),
                sentTo: sent.sentTo,
                channelTargetType: sent.channel,
                codeLength: sent.codeLength
            )
        } catch {
            // MSAL keeps the state after the errors it knows from signup/challenge; a redirect or an unknown error
            // ends the flow (and so does an answer that says the flow has ended: ``NativeAuthFailure/keepsState(otherwise:)``).
            let known: [NativeAuthErrorName] = [.invalidRequest, .unauthorizedClient, .unsupportedChallengeType]
            let keeps = error.keepsState(otherwise: known.contains { error.isServerError($0) })
            throw error.isRedirect ? ResendCodeError(.browserRequired, error) : ResendCodeError(.generalError, error, keepsState: keeps)
        }
    }

    /// Delegate form of ``resendCode()``.
    public func resendCode(delegate: any SignUpResendCodeDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(ResendCodeError) {
                let sent = try await self.resendCode()
                DelegateCall.optional(delegate, .onSignUpResendCodeCodeRequired) {
                    delegate.onSignUpResendCodeCodeRequired(
                        newState: sent.newState,
                        sentTo: sent.sentTo,
                        channelTargetType: sent.channelTargetType,
                        codeLength: sent.codeLength
                    )
                } otherwise: { message in
                    delegate.onSignUpResendCodeError(error: ResendCodeError(general: message, correlationId: self.correlationId), newState: nil)
                }
            } catch {
                delegate.onSignUpResendCodeError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }

    // MARK: Submit

    /// Submits the emailed code (`signup/v1.0/continue`, `grant_type=oob`). When the account also needs a password,
    /// the SDK asks the server for the password step before returning ``SignUpVerifyCodeResult/passwordRequired(_:)``.
    ///
    /// - Throws: ``VerifyCodeError``. After ``VerifyCodeError/isInvalidCode`` submit another code on this state.
    public func submitCode(_ code: String) async throws(VerifyCodeError) -> SignUpVerifyCodeResult {
        guard !code.isEmpty else {
            throw VerifyCodeError(local: .invalidCode, NativeAuthErrorText.invalidCode, correlationId: correlationId, keepsState: true)
        }
        do throws(NativeAuthFailure) {
            switch try await context.signUpContinue([
                ("continuation_token", continuationToken), ("grant_type", NativeAuthGrantType.oob.rawValue), ("oob", code),
            ]) {
            case .completed(let state):
                return .completed(state)
            case .attributesRequired(let attributes, let state):
                return .attributesRequired(attributes, state)
            case .credentialRequired(let token):
                let engine = context.engine
                let answer = try await engine.post(
                    .signUpChallenge,
                    engine.form([("continuation_token", token), ("challenge_type", engine.challengeType)]),
                    correlationId: correlationId,
                    as: NativeAuthStepResponse.self
                )
                guard answer.challengeType == .password, let next = answer.continuationToken else {
                    throw .general("Unexpected challenge type \(answer.challengeType?.rawValue ?? "none"): expected password", correlationId)
                }
                return .passwordRequired(SignUpPasswordRequiredState(context: context, continuationToken: next))
            }
        } catch {
            if error.isRedirect { throw VerifyCodeError(.browserRequired, error) }
            if error.isInvalidCode { throw VerifyCodeError(.invalidCode, error, fixedText: NativeAuthErrorText.invalidCode, keepsState: true) }
            throw VerifyCodeError(.generalError, error, keepsState: error.keepsState(otherwise: false))
        }
    }

    /// Delegate form of ``submitCode(_:)``.
    public func submitCode(code: String, delegate: any SignUpVerifyCodeDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(VerifyCodeError) {
                let result = try await self.submitCode(code)
                let fallback = { (message: String) in
                    delegate.onSignUpVerifyCodeError(error: VerifyCodeError(general: message, correlationId: self.correlationId), newState: nil)
                }
                switch result {
                case .completed(let state):
                    DelegateCall.signUpCompleted(delegate, state, otherwise: fallback)
                case .passwordRequired(let state):
                    DelegateCall.optional(delegate, .onSignUpPasswordRequired, { delegate.onSignUpPasswordRequired(newState: state) }, otherwise: fallback)
                case .attributesRequired(let attributes, let state):
                    DelegateCall.signUpAttributesRequired(delegate, attributes, state, otherwise: fallback)
                }
            } catch {
                delegate.onSignUpVerifyCodeError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }
}

/// Sign-up: the account needs a password.
///
/// After ``PasswordRequiredError/isInvalidPassword`` call ``submitPassword(_:)`` again on the same object.
public final class SignUpPasswordRequiredState: Sendable {
    let context: FlowContext
    let continuationToken: String

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, continuationToken: String) {
        self.context = context
        self.continuationToken = continuationToken
    }

    /// Submits the password (`signup/v1.0/continue`, `grant_type=password`).
    ///
    /// - Throws: ``PasswordRequiredError``. After ``PasswordRequiredError/isInvalidPassword`` (empty, or refused by
    ///   the password policy) submit another password on this state.
    public func submitPassword(_ password: String) async throws(PasswordRequiredError) -> SignUpPasswordRequiredResult {
        guard !password.isEmpty else {
            throw PasswordRequiredError(local: .invalidPassword, NativeAuthErrorText.invalidPassword, correlationId: correlationId, keepsState: true)
        }
        do throws(NativeAuthFailure) {
            switch try await context.signUpContinue([
                ("continuation_token", continuationToken), ("grant_type", NativeAuthGrantType.password.rawValue), ("password", password),
            ]) {
            case .completed(let state): return .completed(state)
            case .attributesRequired(let attributes, let state): return .attributesRequired(attributes, state)
            case .credentialRequired: throw .general("Unexpected credential_required after a password", correlationId)
            }
        } catch {
            if error.isRedirect { throw PasswordRequiredError(.browserRequired, error) }
            if error.isPasswordPolicy {
                throw PasswordRequiredError(.invalidPassword, error, fixedText: NativeAuthErrorText.invalidPassword, keepsState: true)
            }
            throw PasswordRequiredError(.generalError, error, keepsState: error.keepsState(otherwise: false))
        }
    }

    /// Delegate form of ``submitPassword(_:)``.
    public func submitPassword(password: String, delegate: any SignUpPasswordRequiredDelegate) {
        DelegateCall.deliver(delegate) { delegate in
            do throws(PasswordRequiredError) {
                let result = try await self.submitPassword(password)
                let fallback = { (message: String) in
                    delegate.onSignUpPasswordRequiredError(
                        error: PasswordRequiredError(general: message, correlationId: self.correlationId),
                        newState: nil
                    )
                }
                switch result {
                case .completed(let state):
                    DelegateCall.signUpCompleted(delegate, state, otherwise: fallback)
                case .attributesRequired(let attributes, let state):
                    DelegateCall.signUpAttributesRequired(delegate, attributes, state, otherwise: fallback)
                }
            } catch {
                delegate.onSignUpPasswordRequiredError(error: error, newState: error.keepsState ? self : nil)
            }
        }
    }
}

/// Sign-up: the account needs more attributes.
public final class SignUpAttributesRequiredState: Sendable {
    let context: FlowContext
    let continuationToken: String

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, continuationToken: String) {
        self.context = context
        self.continuationToken = continuationToken
    }

    /// Submits attributes (`signup/v1.0/continue`, `grant_type=attributes`): JSON values by name.
    ///
    /// - Returns: completion, more required attributes (on a new state), or the names the server rejected (submit
    ///   corrected values on this same state).
    /// - Throws: ``AttributesRequiredError``; the flow is over.
    public func submitAttributes(_ attributes: [String: any Sendable]) async throws(AttributesRequiredError) -> SignUpAttributesRequiredResult {
        try await submitAttributes(AttributesJSON(attributes))
    }

    private func submitAttributes(_ attributes: AttributesJSON) async throws(AttributesRequiredError) -> SignUpAttributesRequiredResult {
        do throws(NativeAuthFailure) {
            let json = try attributes.field(correlationId: correlationId)
            switch try await context.signUpContinue([
                ("continuation_token", continuationToken), ("grant_type", NativeAuthGrantType.attributes.rawValue), ("attributes", json),
            ]) {
            case .completed(let state): return .completed(state)
            case .attributesRequired(let attributes, let state): return .attributesRequired(attributes, state)
            case .credentialRequired: throw .general("Unexpected credential_required after attributes", correlationId)
            }
        } catch {
            if let names = FlowContext.invalidAttributes(error) { return .attributesInvalid(names, self) }
            throw error.isRedirect ? AttributesRequiredError(.browserRequired, error) : AttributesRequiredError(.generalError, error)
        }
    }

    /// Delegate form of ``submitAttributes(_:)``, with MSAL's `[String: Any]`.
    public func submitAttributes(attributes: [String: Any], delegate: any SignUpAttributesRequiredDelegate) {
        let encoded = AttributesJSON(attributes)
        DelegateCall.deliver(delegate) { delegate in
            do throws(AttributesRequiredError) {
                let result = try await self.submitAttributes(encoded)
                let fallback = { (message: String) in
                    delegate.onSignUpAttributesRequiredError(error: AttributesRequiredError(general: message, correlationId: self.correlationId))
                }
                switch result {
                case .completed(let state):
                    DelegateCall.signUpCompleted(delegate, state, otherwise: fallback)
                case .attributesRequired(let attributes, let state):
                    DelegateCall.signUpAttributesRequired(delegate, attributes, state, otherwise: fallback)
                case .attributesInvalid(let names, let state):
                    DelegateCall.optional(
                        delegate, .onSignUpAttributesInvalidWithState, { delegate.onSignUpAttributesInvalid(attributeNames: names, newState: state) },
                        otherwise: fallback
                    )
                }
            } catch {
                delegate.onSignUpAttributesRequiredError(error: error)
            }
        }
    }
}

/// Sign-up is complete: sign the new account in without asking for anything again.
public final class SignInAfterSignUpState: Sendable {
    let context: FlowContext
    /// Nil when the server's last answer had none; ``signIn(parameters:)`` then fails without a request.
    let continuationToken: String?

    /// The flow's correlation id.
    public var correlationId: UUID { context.correlationId }

    init(context: FlowContext, continuationToken: String?) {
        self.context = context
        self.continuationToken = continuationToken
    }

    /// Signs in (`oauth2/v2.0/token`, `grant_type=continuation_token`) and caches the account.
    public func signIn(parameters: SignInAfterSignUpParameters = SignInAfterSignUpParameters()) async throws(SignInAfterSignUpError)
        -> NativeAuthUserAccountResult
    {
        try await signIn(options: parameters.snapshot)
    }

    private func signIn(options: SignInAfterFlowValues) async throws(SignInAfterSignUpError) -> NativeAuthUserAccountResult {
        do throws(NativeAuthFailure) {
            return try await context.signInAfterFlow(continuationToken: continuationToken, options: options)
        } catch {
            throw error.isRedirect ? SignInAfterSignUpError(.browserRequired, error) : SignInAfterSignUpError(.generalError, error)
        }
    }

    /// ``signIn(parameters:)`` with scopes.
    public func signIn(scopes: [String]?, claimsRequest: String? = nil) async throws(SignInAfterSignUpError) -> NativeAuthUserAccountResult {
        let parameters = SignInAfterSignUpParameters()
        parameters.scopes = scopes
        parameters.claimsRequest = claimsRequest
        return try await signIn(parameters: parameters)
    }

    /// Delegate form of ``signIn(parameters:)``.
    public func signIn(parameters: SignInAfterSignUpParameters, delegate: any SignInAfterSignUpDelegate) {
        let options = parameters.snapshot
        DelegateCall.deliver(delegate) { delegate in
            do throws(SignInAfterSignUpError) {
                let result = try await self.signIn(options: options)
                DelegateCall.optional(delegate, .onSignInCompleted) {
                    delegate.onSignInCompleted(result: result)
                } otherwise: { message in
                    delegate.onSignInAfterSignUpError(error: SignInAfterSignUpError(general: message, correlationId: self.correlationId))
                }
            } catch {
                delegate.onSignInAfterSignUpError(error: error)
            }
        }
    }

    /// MSAL 1.x form of ``signIn(parameters:delegate:)``.
    public func signIn(scopes: [String]? = nil, delegate: any SignInAfterSignUpDelegate) {
        let parameters = SignInAfterSignUpParameters()
        parameters.scopes = scopes
        signIn(parameters: parameters, delegate: delegate)
    }
}

extension FlowContext {
    /// The `continuation_token` grant that ends a sign-up or a reset.
    func signInAfterFlow(continuationToken: String?, options: SignInAfterFlowValues) async throws(NativeAuthFailure) -> NativeAuthUserAccountResult {
        guard let continuationToken else { throw .general(NativeAuthErrorText.signInNotAvailable, correlationId) }
        let fields = NativeAuthEngine.tokenForm(
            engine.configuration,
            grant: .continuationToken,
            continuationToken: continuationToken,
            username: username,
            scopes: options.scopes,
            claims: options.claimsRequest
        )
        return try await engine.signIn(fields, username: username, scopes: options.scopes, correlationId: correlationId)
    }
}
