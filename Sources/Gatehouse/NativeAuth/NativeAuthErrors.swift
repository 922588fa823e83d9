import Foundation
internal import GatehouseWire

/// What every native auth error has (MSAL's `MSALNativeAuthError`). Each flow step throws (or hands its delegate)
/// its own error type with `is…` properties for the cases an app can act on; everything else is a general error,
/// for which every `is…` property is false.
///
/// ```swift
/// do {
///     let next = try await client.signUp(username: email, password: password)
/// } catch where error.isUserAlreadyExists {
///     // offer to sign in instead
/// } catch {
///     show(error.errorDescription)
/// }
/// ```
public protocol NativeAuthError: LocalizedError, Sendable, CustomStringConvertible {
    /// The server's `error_description` when it sent one, otherwise a fixed text such as "User already exists".
    var errorDescription: String? { get }
    /// The id that ties the requests of one flow together (the `client-request-id` header).
    var correlationId: UUID { get }
    /// The server's `error_codes` (Entra's AADSTS numbers, or Gatehouse's own); empty for local errors.
    var errorCodes: [Int] { get }
    /// The server's `error_uri`, if any.
    var errorUri: String? { get }
    /// The server asked for the web fallback (`challenge_type: redirect`): finish in a browser.
    var isBrowserRequired: Bool { get }
}

/// The shared fields of every error.
struct NativeAuthErrorInfo: Sendable, Hashable {
    var description: String
    var correlationId: UUID
    var errorCodes: [Int] = []
    var errorUri: String?
}

/// Why one request (or a local check) failed, before a flow step turns it into its public error.
struct NativeAuthFailure: Error, Sendable {
    enum Reason: Sendable {
        /// HTTP 200 with `challenge_type: redirect`.
        case redirect(reason: String?)
        /// HTTP 400 or 401 with the native auth error body.
        case server(NativeAuthErrorBody)
        /// Anything else: another status, no answer, an unreadable answer, a local check.
        case general(String)
    }

    var reason: Reason
    var correlationId: UUID

    static func general(_ message: String, _ correlationId: UUID) -> NativeAuthFailure {
        NativeAuthFailure(reason: .general(message), correlationId: correlationId)
    }

    /// The server's error body, when there is one.
    var body: NativeAuthErrorBody? {
        if case .server(let body) = reason { return body }
        return nil
    }

    var isRedirect: Bool {
        if case .redirect = reason { return true }
        return false
    }

    /// An error with `name` (and, if given, `suberror`).
    func isServerError(_ name: NativeAuthErrorName, suberror: NativeAuthSuberror? = nil) -> Bool {
        guard let body, body.error == name.rawValue else { return false }
        return suberror == nil || body.suberror == suberror?.rawValue
    }

    /// `invalid_grant` with a `password_*` suberror.
    var isPasswordPolicy: Bool {
        guard isServerError(.invalidGrant), let suberror = body?.suberror else { return false }
        return NativeAuthSuberror(rawValue: suberror)?.isPasswordPolicy == true
    }

    /// `invalid_grant` / `invalid_oob_value`.
    var isInvalidCode: Bool { isServerError(.invalidGrant, suberror: .invalidOOBValue) }

    /// `invalid_request`, first code 90100, about the username.
    var isInvalidUsername: Bool {
        guard isServerError(.invalidRequest), let body, body.errorCodes.first == NativeAuthErrorCode.invalidRequestParameter else {
            return false
        }
        return body.errorDescription.range(of: "username parameter is empty or not valid", options: .caseInsensitive) != nil
    }

    /// `invalid_grant` whose first code is `code`.
    func isInvalidGrant(code: Int) -> Bool { isServerError(.invalidGrant) && body?.errorCodes.first == code }

    /// Whether the state that sent the request may send it again, by what the server answered; `otherwise`, the step's
    /// own rule (MSAL's), decides the answers that say neither.
    ///
    /// - Refused before it touched the flow: `slow_down` (a code asked for too soon, too many emails or requests, login
    ///   delays). The state is as it was: send again after `retry_after` seconds.
    /// - The flow has ended: a redirect, an expired or unknown continuation token (the flow moved on, or it is old), too
    ///   many wrong answers in the flow, a disabled account. Nothing sent on the state can succeed any more.
    func keepsState(otherwise: Bool) -> Bool {
        if isServerError(.slowDown) { return true }
        if isRedirect || isServerError(.expiredToken) { return false }
        let ended = [
            NativeAuthErrorCode.tooManyAttempts, NativeAuthErrorCode.invalidContinuationToken, NativeAuthErrorCode.expiredToken,
            NativeAuthErrorCode.userDisabled,
        ]
        if let code = body?.errorCodes.first, ended.contains(code) { return false }
        return otherwise
    }

    /// The public fields, with `fixedText` when the server gave no description.
    func info(_ fixedText: String) -> NativeAuthErrorInfo {
        switch reason {
        case .redirect(let reason):
            let text = "The server requires a browser to finish this flow (web fallback)"
            return NativeAuthErrorInfo(description: reason.map { "\(text): \($0)" } ?? text, correlationId: correlationId)
        case .server(let body):
            return NativeAuthErrorInfo(
                description: body.errorDescription.isEmpty ? fixedText : body.errorDescription,
                correlationId: correlationId,
                errorCodes: body.errorCodes,
                errorUri: body.errorURI
            )
        case .general(let message):
            return NativeAuthErrorInfo(description: message, correlationId: correlationId)
        }
    }
}

/// Fixed texts, used when the server sent no `error_description`.
enum NativeAuthErrorText {
    static let general = "An unexpected error happened"
    static let userAlreadyExists = "User already exists"
    static let invalidPassword = "Invalid password"
    static let invalidUsername = "Invalid username"
    static let userNotFound = "User does not exist"
    static let invalidCredentials = "Invalid credentials"
    static let userDoesNotHavePassword = "User does not have a password"
    static let invalidCode = "Invalid code"
    static let refreshTokenExpired = "Refresh token is expired"
    static let invalidScope = "Invalid scope"
    static let signInNotAvailable = "Sign In is not available at this point, please use the standalone sign in methods"

    /// For an optional delegate method the app did not implement.
    static func delegateNotImplemented(_ method: String) -> String {
        "Gatehouse has called the delegate method \(method) that has not been implemented"
    }
}

/// The shape shared by the error types: a kind, the public fields, and whether the step that failed left its
/// state usable (the delegate then gets that state back as `newState`).
protocol NativeAuthErrorStorage: NativeAuthError {
    associatedtype Kind: Hashable, Sendable
    var kind: Kind { get }
    var info: NativeAuthErrorInfo { get }
    static var generalKind: Kind { get }
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool)
}

extension NativeAuthErrorStorage {
    /// A general error with `message`.
    init(general message: String, correlationId: UUID, keepsState: Bool = false) {
        self.init(kind: Self.generalKind, info: NativeAuthErrorInfo(description: message, correlationId: correlationId), keepsState: keepsState)
    }

    /// An error found before any request (an empty username, password or code).
    init(local kind: Kind, _ text: String, correlationId: UUID, keepsState: Bool = false) {
        self.init(kind: kind, info: NativeAuthErrorInfo(description: text, correlationId: correlationId), keepsState: keepsState)
    }

    /// `failure` as `kind` (a redirect is always `browserRequired`, decided by the caller).
    init(_ kind: Kind, _ failure: NativeAuthFailure, fixedText: String = NativeAuthErrorText.general, keepsState: Bool = false) {
        self.init(kind: kind, info: failure.info(fixedText), keepsState: keepsState)
    }

    var typeName: String { String(describing: Self.self) }
}

// MARK: - Public error types

/// The error of ``NativeAuthClient/signUp(parameters:delegate:)``.
public struct SignUpStartError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, userAlreadyExists, invalidPassword, invalidUsername, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
    /// An account with this username exists (`user_already_exists`).
    public var isUserAlreadyExists: Bool { kind == .userAlreadyExists }
    /// The password is empty or fails the password policy (`invalid_grant` with a `password_*` suberror).
    public var isInvalidPassword: Bool { kind == .invalidPassword }
    /// The username is empty or not a valid address.
    public var isInvalidUsername: Bool { kind == .invalidUsername }
}

/// The error of ``NativeAuthClient/signIn(parameters:delegate:)``.
public struct SignInStartError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, userNotFound, invalidCredentials, invalidUsername, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
    /// No account has this username (`user_not_found`, or code 50034).
    public var isUserNotFound: Bool { kind == .userNotFound }
    /// The username and password do not match (code 50126), or the password was empty.
    public var isInvalidCredentials: Bool { kind == .invalidCredentials }
    /// The username is empty or not a valid address.
    public var isInvalidUsername: Bool { kind == .invalidUsername }
}

/// The error of ``NativeAuthClient/resetPassword(parameters:delegate:)``.
public struct ResetPasswordStartError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, userDoesNotHavePassword, userNotFound, invalidUsername, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
    /// The account signs in with codes only (code 500222).
    public var isUserDoesNotHavePassword: Bool { kind == .userDoesNotHavePassword }
    /// No account has this username (`user_not_found`).
    public var isUserNotFound: Bool { kind == .userNotFound }
    /// The username is empty or not a valid address.
    public var isInvalidUsername: Bool { kind == .invalidUsername }
}

/// The error of `submitCode` in every flow. After ``isInvalidCode`` the state is kept: submit another code on the
/// same state object.
public struct VerifyCodeError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, invalidCode, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
    /// The code is empty, wrong or expired (`invalid_grant` / `invalid_oob_value`).
    public var isInvalidCode: Bool { kind == .invalidCode }
}

/// The error of `submitPassword` in every flow. After ``isInvalidPassword`` the state is kept: submit another
/// password on the same state object.
public struct PasswordRequiredError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, invalidPassword, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
    /// The password is empty, fails the policy, or (at sign-in) is wrong.
    public var isInvalidPassword: Bool { kind == .invalidPassword }
}

/// The error of ``NativeAuthUserAccountResult/getAccessToken(parameters:delegate:)``.
public struct RetrieveAccessTokenError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, refreshTokenExpired, invalidScope, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
    /// The refresh token has expired (`expired_refresh_token`): sign in again.
    public var isRefreshTokenExpired: Bool { kind == .refreshTokenExpired }
    /// A requested scope is not allowed (`invalid_scope`).
    public var isInvalidScope: Bool { kind == .invalidScope }
}

/// The error of `resendCode` in every flow.
public struct ResendCodeError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
}

/// The error of ``SignUpAttributesRequiredState/submitAttributes(attributes:delegate:)``.
public struct AttributesRequiredError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
}

/// The error of ``SignInAfterSignUpState/signIn(parameters:delegate:)``.
public struct SignInAfterSignUpError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
}

/// The error of ``SignInAfterResetPasswordState/signIn(parameters:delegate:)``.
public struct SignInAfterResetPasswordError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable { case browserRequired, generalError }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    public var isBrowserRequired: Bool { kind == .browserRequired }
}
