import Foundation
internal import GatehouseWire

/// Sign-up, sign-in and password reset in the app's own UI, with the API of MSAL's native authentication
/// (`MSALNativeAuthPublicClientApplication`), against a Gatehouse server's `/native/{appId}/…` endpoints.
///
/// Every flow comes in two forms that share one implementation:
/// - **delegate** (as in MSAL): the call returns at once and the answer arrives on the main actor, through the
///   delegate protocol of the step;
/// - **async**: the call returns the next state as an enum and throws the step's typed error.
///
/// ```swift
/// let client = NativeAuthClient(configuration: .init(
///     baseURL: "https://auth.example.com", appId: "my-app", clientId: "ios-app", challengeTypes: [.oob, .password]
/// ))
/// switch try await client.signUp(username: email, password: password) {
/// case .codeRequired(let state, let sentTo, _, _):
///     let code = await askForCode(sentTo)
///     if case .completed(let next) = try await state.submitCode(code) {
///         let account = try await next.signIn()
///         let token = try await account.getAccessToken()
///     }
/// case .attributesInvalid(let names):
///     show(names)
/// }
/// ```
///
/// Each state object holds the continuation token of its step and does not change. When an error leaves a step
/// open (a wrong code, a weak password), the delegate gets the same state back as `newState`; with the async forms
/// simply call the method again on the state you hold.
///
/// One account is cached at a time (a new sign-in replaces it) in the configuration's `accountStore`, so a new
/// client with the same store finds it with ``getNativeAuthUserAccount(correlationId:)``.
public final class NativeAuthClient: Sendable {
    let engine: NativeAuthEngine

    /// - Parameter configuration: the server, the client id, what the app can handle, and where the account lives.
    public init(configuration: NativeAuthConfiguration) {
        engine = NativeAuthEngine(configuration: configuration)
    }

    /// The configuration the client was made with.
    public var configuration: NativeAuthConfiguration { engine.configuration }

    /// The App-style API over this client's sessions: the signed-in account is its ``App/currentUser`` (also
    /// ``NativeAuthUserAccountResult/user``), with profile, custom data, identity linking, user API keys and
    /// deletion, and ``App/authEvents()`` reports native sign-ins, refreshes and sign-outs. Both APIs share one
    /// store and one refresher, so a token one of them refreshes is the token the other uses.
    public var app: App { App(core: engine.core) }

    /// The cached account, if one is signed in; no request is made.
    ///
    /// - Parameter correlationId: unused (MSAL logs it).
    public func getNativeAuthUserAccount(correlationId: UUID? = nil) -> NativeAuthUserAccountResult? {
        engine.currentAccount
    }

    // MARK: - Sign-up

    /// Starts a sign-up (`signup/v1.0/start`) and has the code emailed (`signup/v1.0/challenge`).
    ///
    /// - Throws: ``SignUpStartError``: `isInvalidUsername` / `isInvalidPassword` for empty input (no request),
    ///   `isUserAlreadyExists`, `isInvalidPassword` for the password policy, `isBrowserRequired`.
    public func signUp(parameters: SignUpParameters) async throws(SignUpStartError) -> SignUpStartResult {
        let values = parameters.snapshot
        return try await signUp(values, correlationId: values.correlationId ?? UUID())
    }

    /// ``signUp(parameters:)`` with its fields as arguments.
    public func signUp(
        username: String,
        password: String? = nil,
        attributes: [String: any Sendable]? = nil,
        correlationId: UUID? = nil
    ) async throws(SignUpStartError) -> SignUpStartResult {
        try await signUp(
            .init(username: username, password: password, attributes: attributes.map { AttributesJSON($0) }),
            correlationId: correlationId ?? UUID()
        )
    }

    /// Delegate form of ``signUp(parameters:)``.
    public func signUp(parameters: SignUpParameters, delegate: any SignUpStartDelegate) {
        let values = parameters.snapshot
        let correlationId = values.correlationId ?? UUID()
        DelegateCall.deliver(delegate) { delegate in
            do throws(SignUpStartError) {
                let result = try await self.signUp(values, correlationId: correlationId)
                let fallback = { (message: String) in
                    delegate.onSignUpStartError(error: SignUpStartError(general: message, correlationId: correlationId))
                }
                switch result {
                case .codeRequired(let state, let sentTo, let channel, let length):
                    DelegateCall.optional(
                        delegate, .onSignUpCodeRequired,
                        { delegate.onSignUpCodeRequired(newState: state, sentTo: sentTo, channelTargetType: channel, codeLength: length) },
                        otherwise: fallback
                    )
                case .attributesInvalid(let names):
                    DelegateCall.optional(
                        delegate, .onSignUpAttributesInvalid, { delegate.onSignUpAttributesInvalid(attributeNames: names) }, otherwise: fallback
                    )
                }
            } catch {
                delegate.onSignUpStartError(error: error)
            }
        }
    }

    /// MSAL 1.x form of ``signUp(parameters:delegate:)``.
    public func signUp(
        username: String,
        password: String? = nil,
        attributes: [String: Any]? = nil,
        correlationId: UUID? = nil,
        delegate: any SignUpStartDelegate
    ) {
        let parameters = SignUpParameters(username: username)
        parameters.password = password
        parameters.attributes = attributes
        parameters.correlationId = correlationId
        signUp(parameters: parameters, delegate: delegate)
    }

    private func signUp(_ values: SignUpParameters.Values, correlationId: UUID) async throws(SignUpStartError) -> SignUpStartResult {
        guard !values.username.isEmpty else {
            throw SignUpStartError(local: .invalidUsername, NativeAuthErrorText.invalidUsername, correlationId: correlationId)
        }
        if let password = values.password, password.isEmpty {
            throw SignUpStartError(local: .invalidPassword, NativeAuthErrorText.invalidPassword, correlationId: correlationId)
        }
        let context = FlowContext(engine: engine, correlationId: correlationId, username: values.username)
        let token: String
        do throws(NativeAuthFailure) {
            var attributes: String?
            if let encoded = values.attributes { attributes = try encoded.field(correlationId: correlationId) }
            let answer = try await engine.post(
                .signUpStart,
                engine.form([
                    ("username", values.username), ("password", values.password), ("attributes", attributes),
                    ("challenge_type", engine.challengeType), ("capabilities", engine.capabilities),
                ]),
                correlationId: correlationId,
                as: NativeAuthStepResponse.self
            )
            guard let started = answer.continuationToken else { throw .general("signup/start answered without continuation_token", correlationId) }
            token = started
        } catch {
            if let names = FlowContext.invalidAttributes(error) { return .attributesInvalid(names) }
            if error.isRedirect { throw SignUpStartError(.browserRequired, error) }
            if error.isServerError(.userAlreadyExists) {
                throw SignUpStartError(.userAlreadyExists, error, fixedText: NativeAuthErrorText.userAlreadyExists)
            }
            if error.isPasswordPolicy { throw SignUpStartError(.invalidPassword, error, fixedText: NativeAuthErrorText.invalidPassword) }
            if error.isInvalidUsername { throw SignUpStartError(.invalidUsername, error, fixedText: NativeAuthErrorText.invalidUsername) }
            throw SignUpStartError(.generalError, error)
        }
        do throws(NativeAuthFailure) {
            let sent = try await engine.codeChallenge(.signUpChallenge, continuationToken: token, correlationId: correlationId)
            return .codeRequired(
                SignUpCodeRequiredState(context: context, continuationToken: sent.continuationToken),
                sentTo: sent.sentTo,
                channelTargetType: sent.channel,
                codeLength: sent.codeLength
            )
        } catch {
            throw error.isRedirect ? SignUpStartError(.browserRequired, error) : SignUpStartError(.generalError, error)
        }
    }

    // MARK: - Sign-in

    /// Starts a sign-in (`oauth2/v2.0/initiate`, `oauth2/v2.0/challenge`). With a password and an account that has
    /// one, it signs in at once (`oauth2/v2.0/token`, `grant_type=password`); an account without a password gets
    /// a code instead, and the password is ignored.
    ///
    /// - Throws: ``SignInStartError``: `isInvalidUsername` / `isInvalidCredentials` for empty input (no request),
    ///   `isUserNotFound`, `isInvalidCredentials` for a wrong password, `isBrowserRequired`.
    public func signIn(parameters: SignInParameters) async throws(SignInStartError) -> SignInStartResult {
        let values = parameters.snapshot
        return try await signIn(values, correlationId: values.correlationId ?? UUID())
    }

    /// ``signIn(parameters:)`` with its fields as arguments.
    public func signIn(
        username: String,
        password: String? = nil,
        scopes: [String]? = nil,
        claimsRequest: String? = nil,
        correlationId: UUID? = nil
    ) async throws(SignInStartError) -> SignInStartResult {
        try await signIn(
            .init(username: username, password: password, scopes: scopes, claimsRequest: claimsRequest),
            correlationId: correlationId ?? UUID()
        )
    }

    /// Delegate form of ``signIn(parameters:)``.
    public func signIn(parameters: SignInParameters, delegate: any SignInStartDelegate) {
        let values = parameters.snapshot
        let correlationId = values.correlationId ?? UUID()
        DelegateCall.deliver(delegate) { delegate in
            do throws(SignInStartError) {
                let result = try await self.signIn(values, correlationId: correlationId)
                let fallback = { (message: String) in
                    delegate.onSignInStartError(error: SignInStartError(general: message, correlationId: correlationId))
                }
                switch result {
                case .codeRequired(let state, let sentTo, let channel, let length):
                    DelegateCall.optional(
                        delegate, .onSignInCodeRequired,
                        { delegate.onSignInCodeRequired(newState: state, sentTo: sentTo, channelTargetType: channel, codeLength: length) },
                        otherwise: fallback
                    )
                case .passwordRequired(let state):
                    DelegateCall.optional(delegate, .onSignInPasswordRequired, { delegate.onSignInPasswordRequired(newState: state) }, otherwise: fallback)
                case .completed(let account):
                    DelegateCall.optional(delegate, .onSignInCompleted, { delegate.onSignInCompleted(result: account) }, otherwise: fallback)
                }
            } catch {
                delegate.onSignInStartError(error: error)
            }
        }
    }

    /// MSAL 1.x form of ``signIn(parameters:delegate:)``.
    public func signIn(
        username: String,
        password: String? = nil,
        scopes: [String]? = nil,
        correlationId: UUID? = nil,
        delegate: any SignInStartDelegate
    ) {
        let parameters = SignInParameters(username: username)
        parameters.password = password
        parameters.scopes = scopes
        parameters.correlationId = correlationId
        signIn(parameters: parameters, delegate: delegate)
    }

    private func signIn(_ values: SignInParameters.Values, correlationId: UUID) async throws(SignInStartError) -> SignInStartResult {
        guard !values.username.isEmpty else {
            throw SignInStartError(local: .invalidUsername, NativeAuthErrorText.invalidUsername, correlationId: correlationId)
        }
        if let password = values.password, password.isEmpty {
            throw SignInStartError(local: .invalidCredentials, NativeAuthErrorText.invalidCredentials, correlationId: correlationId)
        }
        let context = FlowContext(engine: engine, correlationId: correlationId, username: values.username)
        let options = SignInOptions(scopes: values.scopes, claimsRequest: values.claimsRequest)
        let token: String
        do throws(NativeAuthFailure) {
            let answer = try await engine.post(
                .signInInitiate,
                engine.form([("username", values.username), ("challenge_type", engine.challengeType), ("capabilities", engine.capabilities)]),
                correlationId: correlationId,
                as: NativeAuthStepResponse.self
            )
            guard let started = answer.continuationToken else { throw .general("initiate answered without continuation_token", correlationId) }
            token = started
        } catch {
            if error.isRedirect { throw SignInStartError(.browserRequired, error) }
            if error.isServerError(.userNotFound) { throw SignInStartError(.userNotFound, error, fixedText: NativeAuthErrorText.userNotFound) }
            if error.isInvalidUsername { throw SignInStartError(.invalidUsername, error, fixedText: NativeAuthErrorText.invalidUsername) }
            throw SignInStartError(.generalError, error)
        }
        do throws(NativeAuthFailure) {
            let answer = try await engine.post(
                .signInChallenge,
                engine.form([("continuation_token", token), ("challenge_type", engine.challengeType)]),
                correlationId: correlationId,
                as: NativeAuthStepResponse.self
            )
            if answer.challengeType == .password, let next = answer.continuationToken {
                guard let password = values.password else {
                    return .passwordRequired(SignInPasswordRequiredState(context: context, options: options, continuationToken: next))
                }
                return .completed(try await context.passwordGrant(continuationToken: next, password: password, options: options))
            }
            let sent = try SentCode(answer, correlationId: correlationId)
            return .codeRequired(
                SignInCodeRequiredState(context: context, options: options, continuationToken: sent.continuationToken),
                sentTo: sent.sentTo,
                channelTargetType: sent.channel,
                codeLength: sent.codeLength
            )
        } catch {
            if error.isRedirect { throw SignInStartError(.browserRequired, error) }
            if error.isInvalidGrant(code: NativeAuthErrorCode.invalidCredentials) {
                throw SignInStartError(.invalidCredentials, error, fixedText: NativeAuthErrorText.invalidCredentials)
            }
            if error.isInvalidGrant(code: NativeAuthErrorCode.userNotFound) {
                throw SignInStartError(.userNotFound, error, fixedText: NativeAuthErrorText.userNotFound)
            }
            throw SignInStartError(.generalError, error)
        }
    }

    // MARK: - Reset password

    /// Starts a password reset (`resetpassword/v1.0/start`) and has the code emailed
    /// (`resetpassword/v1.0/challenge`).
    ///
    /// - Throws: ``ResetPasswordStartError``: `isInvalidUsername` for an empty username (no request),
    ///   `isUserNotFound`, `isUserDoesNotHavePassword`, `isBrowserRequired`.
    public func resetPassword(parameters: ResetPasswordParameters) async throws(ResetPasswordStartError) -> CodeSent<ResetPasswordCodeRequiredState> {
        let values = parameters.snapshot
        return try await resetPassword(values, correlationId: values.correlationId ?? UUID())
    }

    /// ``resetPassword(parameters:)`` with its fields as arguments.
    public func resetPassword(username: String, correlationId: UUID? = nil) async throws(ResetPasswordStartError)
        -> CodeSent<ResetPasswordCodeRequiredState>
    {
        try await resetPassword(.init(username: username), correlationId: correlationId ?? UUID())
    }

    /// Delegate form of ``resetPassword(parameters:)``.
    public func resetPassword(parameters: ResetPasswordParameters, delegate: any ResetPasswordStartDelegate) {
        let values = parameters.snapshot
        let correlationId = values.correlationId ?? UUID()
        DelegateCall.deliver(delegate) { delegate in
            do throws(ResetPasswordStartError) {
                let sent = try await self.resetPassword(values, correlationId: correlationId)
                DelegateCall.optional(delegate, .onResetPasswordCodeRequired) {
                    delegate.onResetPasswordCodeRequired(
                        newState: sent.newState,
                        sentTo: sent.sentTo,
                        channelTargetType: sent.channelTargetType,
                        codeLength: sent.codeLength
                    )
                } otherwise: { message in
                    delegate.onResetPasswordStartError(error: ResetPasswordStartError(general: message, correlationId: correlationId))
                }
            } catch {
                delegate.onResetPasswordStartError(error: error)
            }
        }
    }

    /// MSAL 1.x form of ``resetPassword(parameters:delegate:)``.
    public func resetPassword(username: String, correlationId: UUID? = nil, delegate: any ResetPasswordStartDelegate) {
        let parameters = ResetPasswordParameters(username: username)
        parameters.correlationId = correlationId
        resetPassword(parameters: parameters, delegate: delegate)
    }

    private func resetPassword(
        _ values: ResetPasswordParameters.Values,
        correlationId: UUID
    ) async throws(ResetPasswordStartError) -> CodeSent<ResetPasswordCodeRequiredState> {
        guard !values.username.isEmpty else {
            throw ResetPasswordStartError(local: .invalidUsername, NativeAuthErrorText.invalidUsername, correlationId: correlationId)
        }
        let context = FlowContext(engine: engine, correlationId: correlationId, username: values.username)
        let token: String
        do throws(NativeAuthFailure) {
            let answer = try await engine.post(
                .resetPasswordStart,
                engine.form([("username", values.username), ("challenge_type", engine.challengeType), ("capabilities", engine.capabilities)]),
                correlationId: correlationId,
                as: NativeAuthStepResponse.self
            )
            guard let started = answer.continuationToken else {
                throw .general("resetpassword/start answered without continuation_token", correlationId)
            }
            token = started
        } catch {
            if error.isRedirect { throw ResetPasswordStartError(.browserRequired, error) }
            if error.isServerError(.userNotFound) { throw ResetPasswordStartError(.userNotFound, error, fixedText: NativeAuthErrorText.userNotFound) }
            if error.isServerError(.invalidRequest), error.body?.errorCodes.first == NativeAuthErrorCode.userHasNoPassword {
                throw ResetPasswordStartError(.userDoesNotHavePassword, error, fixedText: NativeAuthErrorText.userDoesNotHavePassword)
            }
            if error.isInvalidUsername { throw ResetPasswordStartError(.invalidUsername, error, fixedText: NativeAuthErrorText.invalidUsername) }
            throw ResetPasswordStartError(.generalError, error)
        }
        do throws(NativeAuthFailure) {
            let sent = try await engine.codeChallenge(.resetPasswordChallenge, continuationToken: token, correlationId: correlationId)
            return CodeSent(
                newState: ResetPasswordCodeRequiredState(context: context, continuationToken: sent.continuationToken),
                sentTo: sent.sentTo,
                channelTargetType: sent.channel,
                codeLength: sent.codeLength
            )
        } catch {
            throw error.isRedirect ? ResetPasswordStartError(.browserRequired, error) : ResetPasswordStartError(.generalError, error)
        }
    }
}
