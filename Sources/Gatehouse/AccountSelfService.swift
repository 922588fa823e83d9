import Foundation
internal import GatehouseWire

// Account self-service for a signed-in user: its sessions, a fresh proof of its password (or of a mailed code), a new
// password, a new email address, unlinking an identity. Written once (``AccountService``) for both API styles: ``User`` throws ``AppError`` and ``ClientError``
// from it, ``NativeAuthUserAccountResult`` turns them into ``AccountManagementError``.

/// One of a user's live sessions on the server, as ``User/sessions()`` lists them: a login, a native-auth sign-in or
/// an API-key login that has not ended.
public struct UserSession: Sendable, Hashable, Identifiable {
    /// How a session began, which decides what it may do (an open set: kinds this SDK does not know are kept as
    /// they came).
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        /// A kind with this name.
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Proven with a credential of the user's own (`first-party`): a password, a code, an identity provider, a
        /// custom JWT or function.
        public static let firstParty = Kind(rawValue: "first-party")
        /// Logged in with a user API key (`api-key`): it cannot manage the account.
        public static let apiKey = Kind(rawValue: "api-key")
        /// An anonymous login (`anonymous`).
        public static let anonymous = Kind(rawValue: "anonymous")
    }

    /// The session's id: what ``User/endSession(id:)`` takes.
    public let id: String
    /// Whether this is the session of the user (or account) that asked.
    public let isCurrent: Bool
    /// How the session began.
    public let kind: Kind
    /// How it was proven, as RFC 8176 methods: `pwd`, `otp`, `fed`, `apikey`.
    public let authenticationMethods: [String]
    /// When the user last proved a credential in it (at sign-in, or by ``User/reauthenticate(password:)``).
    public let authenticatedAt: Date
    /// When it began.
    public let createdAt: Date
    /// Its last login, refresh or rotation, to the minute.
    public let lastUsedAt: Date
    /// When it ends unless it is refreshed or ended first.
    public let expiresAt: Date
    /// The device id the server gave the login (``User/deviceId`` of that login).
    public let deviceId: String
    /// What the client said of its device at login (this SDK sends `platform`, `platformVersion`, `sdk`,
    /// `sdkVersion`, `cpuArch`, `appId`), or the native-auth client's id.
    public let device: Document
    /// The native-auth client the session was issued to; nil for an App-style login.
    public let clientId: String?

    init(_ info: SessionInfo) {
        id = info.id
        isCurrent = info.current
        kind = Kind(rawValue: info.kind)
        authenticationMethods = info.amr
        authenticatedAt = Date(timeIntervalSince1970: TimeInterval(info.authTime))
        createdAt = Date(timeIntervalSince1970: TimeInterval(info.createdAt))
        lastUsedAt = Date(timeIntervalSince1970: TimeInterval(info.lastUsedAt))
        expiresAt = Date(timeIntervalSince1970: TimeInterval(info.expiresAt))
        deviceId = info.deviceId
        device = info.device.mapValues { AnyBSON(extendedJSON: $0) }
        clientId = info.clientId
    }
}

/// The account routes of the Client API, with the access token of one stored user: an App-style login or a
/// native-auth sign-in alike. A 401 refreshes once and retries once (``AppCore/authorized(_:_:userId:body:)``);
/// the server's refusals are ``AppError``s.
struct AccountService: Sendable {
    let core: AppCore
    let userId: String

    private static let sessionsPath = "/api/client/v2.0/auth/sessions"

    func sessions() async throws -> [UserSession] {
        let response = try await core.authorized("GET", Self.sessionsPath, userId: userId)
        return (try core.decode(response) as [SessionInfo]).map(UserSession.init)
    }

    /// Ends the session `id`; when it is this user's own, the user is signed out here too, as the server has
    /// already ended its session.
    func endSession(id: String) async throws {
        let own = core.read { $0.user(userId)?.accessToken }.flatMap { JWTClaims($0)?.sid }
        _ = try await core.authorized("DELETE", "\(Self.sessionsPath)/\(Self.pathSegment(id))", userId: userId)
        if own == id, let unsaved = core.signOutLocally(userId).unsaved { throw unsaved }
    }

    func endOtherSessions() async throws {
        _ = try await core.authorized("DELETE", "\(Self.sessionsPath)?except=current", userId: userId)
    }

    func reauthenticate(password: String) async throws {
        _ = try await core.authorized(
            "POST", "/api/client/v2.0/auth/reauthenticate", userId: userId, body: .object(["password": .string(password)])
        )
    }

    /// Mails a code to the account's address that proves this session again (``reauthenticate(code:)``).
    func sendReauthenticationCode() async throws {
        _ = try await core.authorized("POST", "/api/client/v2.0/auth/reauthenticate/send", userId: userId)
    }

    func reauthenticate(code: String) async throws {
        _ = try await core.authorized(
            "POST", "/api/client/v2.0/auth/reauthenticate", userId: userId, body: .object(["code": .string(code)])
        )
    }

    /// Asks for the address to become `newEmail`: a code goes there, for ``confirmEmailChange(code:)`` in this session.
    func changeEmail(to newEmail: String, currentPassword: String?) async throws {
        var body: [String: JSONValue] = ["email": .string(newEmail)]
        if let currentPassword { body["currentPassword"] = .string(currentPassword) }
        _ = try await core.authorized("POST", "/api/client/v2.0/auth/email", userId: userId, body: .object(body))
    }

    /// Changes the address with the code the new one got, then fetches the profile anew so that the user's `email`
    /// is the server's (and a native account's username with it); the change is done even when that fetch fails.
    func confirmEmailChange(code: String) async throws {
        _ = try await core.authorized("POST", "/api/client/v2.0/auth/email/confirm", userId: userId, body: .object(["code": .string(code)]))
        guard let email = try? await core.user(userId).refreshProfile().email else { return }
        _ = try? core.mutate { users in
            users.update(userId) { user in user.native?.username = email }
        }
    }

    func changePassword(to newPassword: String, currentPassword: String?) async throws {
        var body: [String: JSONValue] = ["password": .string(newPassword)]
        if let currentPassword { body["currentPassword"] = .string(currentPassword) }
        _ = try await core.authorized("POST", "/api/client/v2.0/auth/password", userId: userId, body: .object(body))
    }

    /// Unlinks the identity and forgets it here, then fetches the profile anew so that the user's identities are the
    /// server's (the unlink is done even when that fetch fails).
    func unlinkIdentity(id: String, providerType: String?) async throws {
        var path = "/api/client/v2.0/auth/identities/\(Self.pathSegment(id))"
        if let providerType { path += "?provider_type=\(Self.pathSegment(providerType))" }
        _ = try await core.authorized("DELETE", path, userId: userId)
        try core.mutate { users in
            users.update(userId) { user in
                user.identities.removeAll { $0.id == id && (providerType == nil || $0.providerType == providerType) }
            }
        }
        _ = try? await core.user(userId).refreshProfile()
    }

    /// `value` percent-encoded for one path segment or query value (identity ids are the provider's, any text).
    static func pathSegment(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? value
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

extension User {
    var account: AccountService { AccountService(core: core, userId: id) }

    // MARK: Account self-service

    /// The user's live sessions on the server, newest first: this login and every other device, native-auth
    /// client or API key signed in as the user. ``UserSession/isCurrent`` marks this login's.
    ///
    /// - Throws: ``AppError`` `forbidden` from a session logged in with an API key; ``ClientError/userNotLoggedIn``
    ///   when this user is logged out.
    public func sessions() async throws -> [UserSession] {
        try await account.sessions()
    }

    /// Completion form of ``sessions()``; `completion` runs on the configuration's callback queue.
    public func sessions(_ completion: @escaping @Sendable (Result<[UserSession], any Error>) -> Void) {
        core.complete(completion) { try await self.sessions() }
    }

    /// Ends one of the user's sessions (an ``UserSession/id`` from ``sessions()``): its tokens stop working at once,
    /// so that device is signed out at its next call. Ending this login's own session logs this user out here too.
    ///
    /// - Throws: ``AppError`` `sessionNotFound` when no live session of the user has that id (it may have ended
    ///   already); `forbidden` from a session logged in with an API key.
    public func endSession(id: String) async throws {
        try await account.endSession(id: id)
    }

    /// Completion form of ``endSession(id:)``.
    public func endSession(id: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.endSession(id: id) }
    }

    /// Ends every session of the user but this login's ("sign out of all other devices"). ``logOut()`` ends this
    /// one.
    ///
    /// - Throws: ``AppError`` `forbidden` from a session logged in with an API key.
    public func endOtherSessions() async throws {
        try await account.endOtherSessions()
    }

    /// Completion form of ``endOtherSessions()``.
    public func endOtherSessions(completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.endOtherSessions() }
    }

    /// Proves the user's password again in this session.
    ///
    /// Changing a credential (``changePassword(to:currentPassword:)``, ``unlinkIdentity(_:)``) needs a recent proof:
    /// a session whose password was proven within the app's window (five minutes by default). When a call fails
    /// with ``AppError`` `reauthenticationRequired`, ask the user for the password, call this, and try again.
    ///
    /// - Throws: ``AppError`` `invalidPassword` (HTTP 403) when the password is wrong (it counts as a failed login,
    ///   with the login limits and delays); `badRequest` for a user without a password; `forbidden` from a session
    ///   logged in with an API key.
    public func reauthenticate(password: String) async throws {
        try await account.reauthenticate(password: password)
    }

    /// Completion form of ``reauthenticate(password:)``.
    public func reauthenticate(password: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.reauthenticate(password: password) }
    }

    /// Mails a code to the account's address that proves this session again, for users who would rather not type
    /// their password (or have none): pass it to ``reauthenticate(code:)``. The code has 8 digits and works for 10
    /// minutes, five guesses, once, and only in this login's session; a newer one replaces it.
    ///
    /// - Throws: ``AppError`` `badRequest` for a user without a confirmed email address; `tooManyRequests` when the
    ///   address has had too many emails lately; `forbidden` from a session logged in with an API key.
    public func sendReauthenticationCode() async throws {
        try await account.sendReauthenticationCode()
    }

    /// Completion form of ``sendReauthenticationCode()``.
    public func sendReauthenticationCode(completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.sendReauthenticationCode() }
    }

    /// Proves this session again with the code ``sendReauthenticationCode()`` mailed: the other way to answer
    /// ``AppError`` `reauthenticationRequired` than ``reauthenticate(password:)``.
    ///
    /// ```swift
    /// try await user.sendReauthenticationCode()
    /// try await user.reauthenticate(code: askForTheMailedCode())
    /// try await user.changeEmail(to: newAddress)
    /// ```
    ///
    /// - Throws: ``AppError/invalidCode`` (`badRequest`, HTTP 400) when the code is wrong, expired, used, replaced by
    ///   a newer one, out of guesses, or was asked for in another session (`catch AppError.invalidCode`);
    ///   `forbidden` from a session logged in with an API key.
    public func reauthenticate(code: String) async throws {
        try await account.reauthenticate(code: code)
    }

    /// Completion form of ``reauthenticate(code:)``.
    public func reauthenticate(code: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.reauthenticate(code: code) }
    }

    /// Asks to change the user's email address: an 8-digit code goes to `newEmail`, and
    /// ``confirmEmailChange(code:)`` with it, in this login's session, makes the change. Until then nothing changes.
    ///
    /// Changing the address needs a recent proof, as changing a credential does: pass `currentPassword`, or call
    /// ``reauthenticate(password:)`` or ``reauthenticate(code:)`` first. An address another account has already
    /// confirmed answers the same (so that the call does not tell who has an account): its owner is mailed a notice
    /// and no code is sent.
    ///
    /// - Parameters:
    ///   - newEmail: The new address.
    ///   - currentPassword: The current password, needed when the session's proof is not recent.
    /// - Throws: ``AppError`` `reauthenticationRequired`; `invalidPassword` (HTTP 403) when `currentPassword` is
    ///   wrong; `badRequest` when `newEmail` is not an address or is the account's already, or the user has no
    ///   confirmed email address to change; `tooManyRequests` when the new address has had too many emails lately;
    ///   `forbidden` from a session logged in with an API key.
    public func changeEmail(to newEmail: String, currentPassword: String? = nil) async throws {
        try await account.changeEmail(to: newEmail, currentPassword: currentPassword)
    }

    /// Completion form of ``changeEmail(to:currentPassword:)``.
    public func changeEmail(to newEmail: String, currentPassword: String? = nil, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.changeEmail(to: newEmail, currentPassword: currentPassword) }
    }

    /// Changes the user's email address with the code ``changeEmail(to:currentPassword:)`` mailed to the new one.
    /// The new address signs in at once and the old one no longer does; ``profile`` is fetched anew, so its `email`
    /// is the new address. Sessions stay. The old address is mailed a link that undoes the change for 7 days
    /// (``EmailPasswordAuth/undoEmailChange(token:tokenId:)``).
    ///
    /// - Throws: ``AppError/invalidCode`` (`badRequest`, HTTP 400) when the code is wrong, expired, used, replaced
    ///   by a newer request, out of guesses, or was asked for in another session; `accountNameInUse` (HTTP 409) when
    ///   another account confirmed the address meanwhile; `forbidden` from a session logged in with an API key.
    public func confirmEmailChange(code: String) async throws {
        try await account.confirmEmailChange(code: code)
    }

    /// Completion form of ``confirmEmailChange(code:)``.
    public func confirmEmailChange(code: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.confirmEmailChange(code: code) }
    }

    /// Changes the user's email/password password. Every other session of the user ends (the other devices must
    /// sign in again, with the new password); this one stays. The account's address is emailed a notice.
    ///
    /// Changing a credential needs a recent proof: pass `currentPassword`, or call ``reauthenticate(password:)``
    /// first. Without either, once the session's proof is older than the app's window (five minutes by default),
    /// the call fails with ``AppError`` `reauthenticationRequired`.
    ///
    /// ```swift
    /// do {
    ///     try await user.changePassword(to: newPassword)
    /// } catch AppError.reauthenticationRequired {
    ///     try await user.changePassword(to: newPassword, currentPassword: askForCurrentPassword())
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - newPassword: The new password; the app's password policy applies.
    ///   - currentPassword: The current password, needed when the session's proof is not recent.
    /// - Throws: ``AppError`` `reauthenticationRequired`; `invalidPassword` (HTTP 403) when `currentPassword` is
    ///   wrong; `badRequest` when the policy refuses the new password (the message names the rule) or the user
    ///   has no password (link ``Credentials/emailPassword(email:password:)`` to add one); `forbidden` from a
    ///   session logged in with an API key.
    public func changePassword(to newPassword: String, currentPassword: String? = nil) async throws {
        try await account.changePassword(to: newPassword, currentPassword: currentPassword)
    }

    /// Completion form of ``changePassword(to:currentPassword:)``.
    public func changePassword(to newPassword: String, currentPassword: String? = nil, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.changePassword(to: newPassword, currentPassword: currentPassword) }
    }

    /// Removes one of the user's ``identities`` (the reverse of ``linkUser(credentials:)``): that credential no
    /// longer signs in as this user, and ``identities`` is fetched anew. Unlinking email/password removes the address
    /// and password. Sessions already signed in with it stay; ``endOtherSessions()`` ends them.
    ///
    /// Changing a credential needs a recent proof: on ``AppError`` `reauthenticationRequired`, call
    /// ``reauthenticate(password:)`` and try again.
    ///
    /// - Throws: ``AppError`` `badRequest` when it is the user's last way to sign in (API keys and an anonymous
    ///   identity do not count; API-key identities go with ``APIKeyAuth/deleteAPIKey(_:)``);
    ///   `identityNotFound` when the user has no such identity; `reauthenticationRequired`; `forbidden` from a
    ///   session logged in with an API key.
    public func unlinkIdentity(_ identity: UserIdentity) async throws {
        try await account.unlinkIdentity(id: identity.identifier, providerType: identity.providerType)
    }

    /// Completion form of ``unlinkIdentity(_:)``.
    public func unlinkIdentity(_ identity: UserIdentity, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.unlinkIdentity(identity) }
    }
}

extension AppError {
    // Gatehouse's codes of account self-service (App Services has no such routes): `catch AppError.…`.
    /// `ReauthenticationRequired` (HTTP 403): changing a credential or the email address needs a recent proof. Call
    /// ``User/reauthenticate(password:)`` or ``User/reauthenticate(code:)``, or pass the current password, and try
    /// again.
    public static var reauthenticationRequired: Code { .reauthenticationRequired }
    /// `SessionNotFound` (HTTP 404): no live session of the user has that id.
    public static var sessionNotFound: Code { .sessionNotFound }
    /// `IdentityNotFound` (HTTP 404): the user has no such identity.
    public static var identityNotFound: Code { .identityNotFound }
    /// `Forbidden` (HTTP 403): a valid session that may not do this, such as a session logged in with an API key
    /// managing the account (`catch AppError.forbidden`).
    public static var forbidden: Code { .forbidden }

    /// The server's message for a mailed code it does not take.
    static let invalidCodeMessage = "invalid or expired code"

    /// A wrong, expired, used or replaced code mailed to a signed-in user (``User/reauthenticate(code:)``,
    /// ``User/confirmEmailChange(code:)``), one out of guesses, or one asked for in another session.
    ///
    /// The server sends it as `BadRequest` (HTTP 400) with the message `invalid or expired code`, so `catch
    /// AppError.badRequest` catches it too; this pattern matches that code with exactly that message, and no other
    /// `BadRequest`:
    ///
    /// ```swift
    /// do {
    ///     try await user.confirmEmailChange(code: code)
    /// } catch AppError.invalidCode {
    ///     // ask for the code again, or send a new one
    /// }
    /// ```
    public static let invalidCode = AppError(code: .badRequest, message: invalidCodeMessage, httpStatus: 400)

    /// Whether this is the error of a code the server does not take (``invalidCode``).
    var isInvalidCode: Bool { code == .badRequest && message == Self.invalidCodeMessage }

    /// `catch AppError.invalidCode`: matches an ``AppError`` with the pattern's code and message (its `link` and
    /// HTTP status aside).
    public static func ~= (pattern: AppError, error: any Error) -> Bool {
        guard let error = error as? AppError else { return false }
        return pattern ~= error
    }

    /// `case AppError.invalidCode:` in a switch over an ``AppError``: matches the pattern's code and message (its
    /// `link` and HTTP status aside).
    public static func ~= (pattern: AppError, error: AppError) -> Bool {
        error.code == pattern.code && error.message == pattern.message
    }
}
