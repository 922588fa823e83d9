import Foundation

// Account self-service of a signed-in native-auth account: the Client API's account routes with the account's access
// token (one session store, one refresher), through the same ``AccountService`` the App-style ``User`` uses. Only
// the errors and the call forms are MSAL's: typed `async throws` and delegates on the main actor.

/// The error of the account self-service calls of ``NativeAuthUserAccountResult``
/// (``NativeAuthUserAccountResult/changePassword(to:currentPassword:)``, ``NativeAuthUserAccountResult/getSessions()``,
/// ``NativeAuthUserAccountResult/changeEmail(to:currentPassword:)``, …). A Gatehouse addition: MSAL's native auth has
/// no such calls.
public struct AccountManagementError: NativeAuthError, NativeAuthErrorStorage {
    enum Kind: Hashable, Sendable {
        case reauthenticationRequired, invalidCredentials, invalidCode, userAlreadyExists, invalidRequest, sessionNotFound
        case identityNotFound, forbidden, signInRequired, generalError
    }
    static var generalKind: Kind { .generalError }
    let kind: Kind
    let info: NativeAuthErrorInfo
    let keepsState: Bool
    init(kind: Kind, info: NativeAuthErrorInfo, keepsState: Bool) {
        self.kind = kind
        self.info = info
        self.keepsState = keepsState
    }

    /// An ``AppError`` or ``ClientError`` of the Client API as this error.
    init(_ error: any Error, correlationId: UUID) {
        let kind: Kind
        let text: String
        switch error {
        case let error as AppError:
            text = error.message
            switch error.code {
            case .reauthenticationRequired: kind = .reauthenticationRequired
            case .invalidPassword: kind = .invalidCredentials
            case .badRequest where error.isInvalidCode: kind = .invalidCode
            case .accountNameInUse: kind = .userAlreadyExists
            case .badRequest, .invalidParameter, .missingParameter: kind = .invalidRequest
            case .sessionNotFound: kind = .sessionNotFound
            case .identityNotFound: kind = .identityNotFound
            case .forbidden: kind = .forbidden
            case .invalidSession: kind = .signInRequired
            default: kind = .generalError
            }
        case ClientError.userNotLoggedIn, ClientError.userRemoved:
            kind = .signInRequired
            text = "The account is signed out"
        default:
            kind = .generalError
            text = (error as? any LocalizedError)?.errorDescription ?? String(describing: error)
        }
        self.init(kind: kind, info: NativeAuthErrorInfo(description: text, correlationId: correlationId), keepsState: false)
    }

    public var errorDescription: String? { info.description }
    public var correlationId: UUID { info.correlationId }
    public var errorCodes: [Int] { info.errorCodes }
    public var errorUri: String? { info.errorUri }
    public var description: String { "\(typeName).\(kind): \(info.description)" }
    /// Always false: these calls have no web fallback.
    public var isBrowserRequired: Bool { false }
    /// Changing a credential needs a recent proof of the password: call
    /// ``NativeAuthUserAccountResult/reauthenticate(password:)`` and try again (a password or email change also takes
    /// the current password instead).
    public var isReauthenticationRequired: Bool { kind == .reauthenticationRequired }
    /// The password given as the current one is not the account's (it counts as a failed sign-in).
    public var isInvalidCredentials: Bool { kind == .invalidCredentials }
    /// The mailed code is wrong, expired, used, replaced by a newer one or out of guesses, or was asked for in
    /// another session (``NativeAuthUserAccountResult/reauthenticate(code:)``,
    /// ``NativeAuthUserAccountResult/confirmEmailChange(code:)``): ask for it again, or send a new one.
    public var isInvalidCode: Bool { kind == .invalidCode }
    /// Another account confirmed the new address while the change waited for its code
    /// (``NativeAuthUserAccountResult/confirmEmailChange(code:)``; MSAL's name for an address that has an account).
    public var isUserAlreadyExists: Bool { kind == .userAlreadyExists }
    /// The server refused the request: a new password the app's policy refuses (``errorDescription`` names the
    /// rule), unlinking the account's last way to sign in, an account without a password (or without a confirmed
    /// address), a new address that is not one or is the account's already.
    public var isInvalidRequest: Bool { kind == .invalidRequest }
    /// No live session of the account has that id (it may have ended already).
    public var isSessionNotFound: Bool { kind == .sessionNotFound }
    /// The account has no such identity.
    public var isIdentityNotFound: Bool { kind == .identityNotFound }
    /// The session may not manage the account.
    public var isForbidden: Bool { kind == .forbidden }
    /// The account's session is over (signed out here, or ended on the server): sign in again.
    public var isSignInRequired: Bool { kind == .signInRequired }
}

// MARK: - Delegates

/// Receives the answer of ``NativeAuthUserAccountResult/getSessions(delegate:)``.
public protocol AccountSessionsDelegate: AnyObject {
    /// Required.
    @MainActor func onAccountSessionsError(error: AccountManagementError)
    /// Optional. The account's live sessions, newest first.
    @MainActor func onAccountSessionsRetrieved(sessions: [UserSession])
}

extension AccountSessionsDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onAccountSessionsRetrieved(sessions: [UserSession]) { DelegateCall.notImplemented(.onAccountSessionsRetrieved, self) }
}

/// Receives the answer of an account change of ``NativeAuthUserAccountResult``: changing the password or the email
/// address, reauthenticating (and sending its code), ending sessions, unlinking an identity.
public protocol AccountUpdateDelegate: AnyObject {
    /// Required.
    @MainActor func onAccountUpdateError(error: AccountManagementError)
    /// Optional. Done.
    @MainActor func onAccountUpdateCompleted()
}

extension AccountUpdateDelegate {
    /// Default: not implemented; the SDK reports a general error through the required error method.
    @MainActor public func onAccountUpdateCompleted() { DelegateCall.notImplemented(.onAccountUpdateCompleted, self) }
}

// MARK: - The calls

extension NativeAuthUserAccountResult {
    private var service: AccountService { AccountService(core: engine.core, userId: account.userId) }

    /// Runs `work` with errors as ``AccountManagementError``.
    private func run<T: Sendable>(_ work: @Sendable (AccountService) async throws -> T) async throws(AccountManagementError) -> T {
        do {
            return try await work(service)
        } catch {
            throw AccountManagementError(error, correlationId: UUID())
        }
    }

    /// Runs `work` for a delegate: its error through `failed`, its value through `completed`, which calls the optional
    /// `method` (when the app did not implement it, a general error through `failed`).
    private func deliver<Delegate: AnyObject, T: Sendable>(
        _ delegate: Delegate,
        _ work: @escaping @Sendable (AccountService) async throws -> T,
        completed method: OptionalDelegateMethod,
        _ completed: @escaping @MainActor @Sendable (Delegate, T) -> Void,
        failed: @escaping @MainActor @Sendable (Delegate, AccountManagementError) -> Void
    ) {
        let service = self.service
        DelegateCall.deliver(delegate) { delegate in
            let correlationId = UUID()
            do {
                let value = try await work(service)
                DelegateCall.optional(delegate, method) {
                    completed(delegate, value)
                } otherwise: { message in
                    failed(delegate, AccountManagementError(general: message, correlationId: correlationId))
                }
            } catch {
                failed(delegate, AccountManagementError(error, correlationId: correlationId))
            }
        }
    }

    private func deliverUpdate(_ delegate: any AccountUpdateDelegate, _ work: @escaping @Sendable (AccountService) async throws -> Void) {
        deliver(
            delegate, work, completed: .onAccountUpdateCompleted, { delegate, _ in delegate.onAccountUpdateCompleted() },
            failed: { $0.onAccountUpdateError(error: $1) }
        )
    }

    /// The account's live sessions on the server, newest first: this sign-in and every other device or app signed
    /// in as the user. ``UserSession/isCurrent`` marks this one; ``UserSession/clientId`` names the native-auth
    /// client of a native sign-in.
    ///
    /// - Throws: ``AccountManagementError``: `isSignInRequired` when the session is over.
    public func getSessions() async throws(AccountManagementError) -> [UserSession] {
        try await run { try await $0.sessions() }
    }

    /// Delegate form of ``getSessions()``.
    public func getSessions(delegate: any AccountSessionsDelegate) {
        deliver(
            delegate, { try await $0.sessions() }, completed: .onAccountSessionsRetrieved, { $0.onAccountSessionsRetrieved(sessions: $1) },
            failed: { $0.onAccountSessionsError(error: $1) }
        )
    }

    /// Ends one of the account's sessions (an ``UserSession/id`` from ``getSessions()``): its tokens stop working at
    /// once. Ending this sign-in's own session signs the account out here too.
    ///
    /// - Throws: ``AccountManagementError``: `isSessionNotFound` when no live session has that id.
    public func endSession(id: String) async throws(AccountManagementError) {
        try await run { try await $0.endSession(id: id) }
    }

    /// Delegate form of ``endSession(id:)``.
    public func endSession(id: String, delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.endSession(id: id) }
    }

    /// Ends every session of the account but this one ("sign out of all other devices"). ``signOut()`` ends this one.
    public func endOtherSessions() async throws(AccountManagementError) {
        try await run { try await $0.endOtherSessions() }
    }

    /// Delegate form of ``endOtherSessions()``.
    public func endOtherSessions(delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.endOtherSessions() }
    }

    /// Proves the account's password again in this session. Changing a credential needs a recent proof (within the
    /// app's window, five minutes by default): after an error with `isReauthenticationRequired`, ask for the
    /// password, call this, and try again.
    ///
    /// - Throws: ``AccountManagementError``: `isInvalidCredentials` when the password is wrong (it counts as a failed
    ///   sign-in); `isInvalidRequest` for an account without a password.
    public func reauthenticate(password: String) async throws(AccountManagementError) {
        try await run { try await $0.reauthenticate(password: password) }
    }

    /// Delegate form of ``reauthenticate(password:)``.
    public func reauthenticate(password: String, delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.reauthenticate(password: password) }
    }

    /// Mails a code to the account's address that proves this session again: pass it to ``reauthenticate(code:)``.
    /// The code has 8 digits and works for 10 minutes, five guesses, once, and only in this sign-in's session.
    ///
    /// - Throws: ``AccountManagementError``: `isInvalidRequest` for an account without a confirmed address.
    public func sendReauthenticationCode() async throws(AccountManagementError) {
        try await run { try await $0.sendReauthenticationCode() }
    }

    /// Delegate form of ``sendReauthenticationCode()``.
    public func sendReauthenticationCode(delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.sendReauthenticationCode() }
    }

    /// Proves this session again with the code ``sendReauthenticationCode()`` mailed: the other answer to an error
    /// with `isReauthenticationRequired` than ``reauthenticate(password:)``.
    ///
    /// - Throws: ``AccountManagementError``: `isInvalidCode` when the code is wrong, expired, used, replaced or out of
    ///   guesses, or was asked for in another session.
    public func reauthenticate(code: String) async throws(AccountManagementError) {
        try await run { try await $0.reauthenticate(code: code) }
    }

    /// Delegate form of ``reauthenticate(code:)``.
    public func reauthenticate(code: String, delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.reauthenticate(code: code) }
    }

    /// Asks to change the account's email address: an 8-digit code goes to `newEmail`, and
    /// ``confirmEmailChange(code:)`` with it, in this sign-in's session, makes the change. An address another account
    /// has already confirmed answers the same (its owner is mailed a notice, and no code is sent).
    ///
    /// Needs a recent proof, as ``changePassword(to:currentPassword:)`` does: pass `currentPassword`, or reauthenticate
    /// first.
    ///
    /// - Throws: ``AccountManagementError``: `isReauthenticationRequired`; `isInvalidCredentials` when
    ///   `currentPassword` is wrong; `isInvalidRequest` when `newEmail` is not an address or is the account's already.
    public func changeEmail(to newEmail: String, currentPassword: String? = nil) async throws(AccountManagementError) {
        try await run { try await $0.changeEmail(to: newEmail, currentPassword: currentPassword) }
    }

    /// Delegate form of ``changeEmail(to:currentPassword:)``.
    public func changeEmail(to newEmail: String, currentPassword: String? = nil, delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.changeEmail(to: newEmail, currentPassword: currentPassword) }
    }

    /// Changes the account's email address with the code ``changeEmail(to:currentPassword:)`` mailed to the new one.
    /// The new address signs in at once and the old one no longer does; the cached account's username and
    /// ``user``'s profile become the new address (this result's ``account`` stays as it was: read the account again
    /// with ``NativeAuthClient/getNativeAuthUserAccount(correlationId:)``). Sessions stay. The old address is mailed
    /// a link that undoes the change for 7 days (``EmailPasswordAuth/undoEmailChange(token:tokenId:)``).
    ///
    /// - Throws: ``AccountManagementError``: `isInvalidCode` when the code is wrong, expired, used, replaced or out
    ///   of guesses, or was asked for in another session; `isUserAlreadyExists` when another account confirmed the
    ///   address meanwhile.
    public func confirmEmailChange(code: String) async throws(AccountManagementError) {
        try await run { try await $0.confirmEmailChange(code: code) }
    }

    /// Delegate form of ``confirmEmailChange(code:)``.
    public func confirmEmailChange(code: String, delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.confirmEmailChange(code: code) }
    }

    /// Changes the account's password. Every other session of the user ends (other devices sign in again, with the
    /// new password); this one stays. The account's address is emailed a notice.
    ///
    /// Changing a credential needs a recent proof: pass `currentPassword`, or call ``reauthenticate(password:)``
    /// first; a sign-in older than the app's window (five minutes by default) is not one.
    ///
    /// - Throws: ``AccountManagementError``: `isReauthenticationRequired`; `isInvalidCredentials` when
    ///   `currentPassword` is wrong; `isInvalidRequest` when the policy refuses the new password (the description
    ///   names the rule) or the account has no password.
    public func changePassword(to newPassword: String, currentPassword: String? = nil) async throws(AccountManagementError) {
        try await run { try await $0.changePassword(to: newPassword, currentPassword: currentPassword) }
    }

    /// Delegate form of ``changePassword(to:currentPassword:)``.
    public func changePassword(to newPassword: String, currentPassword: String? = nil, delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.changePassword(to: newPassword, currentPassword: currentPassword) }
    }

    /// Removes one of the account's identities (``User/identities`` of ``user``): that credential no longer signs in
    /// as this user. Needs a recent proof, as ``changePassword(to:currentPassword:)`` does.
    ///
    /// - Throws: ``AccountManagementError``: `isInvalidRequest` when it is the account's last way to sign in;
    ///   `isIdentityNotFound`; `isReauthenticationRequired`.
    public func unlinkIdentity(_ identity: UserIdentity) async throws(AccountManagementError) {
        try await run { try await $0.unlinkIdentity(id: identity.identifier, providerType: identity.providerType) }
    }

    /// Delegate form of ``unlinkIdentity(_:)``.
    public func unlinkIdentity(_ identity: UserIdentity, delegate: any AccountUpdateDelegate) {
        deliverUpdate(delegate) { try await $0.unlinkIdentity(id: identity.identifier, providerType: identity.providerType) }
    }
}
