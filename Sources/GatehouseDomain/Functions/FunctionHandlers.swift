import Foundation
import GatehouseWire

/// What a confirmation or reset function decided.
public enum FunctionStatus: String, Sendable, Hashable, Codable {
    /// Done: the user is confirmed, or the new password is set.
    case success
    /// Not yet: the token waits until `confirm` (or `reset`, with a password) is called with it.
    case pending
    /// Refused: registration fails, or the password stays as it was.
    case fail
}

/// A confirmation function's input: the token that confirms the user, and who they are. Never a password.
public struct ConfirmationCall: Sendable, Hashable {
    public var appId: String
    public var token: String
    public var tokenId: String
    /// The email address as the user typed it.
    public var username: String

    package init(appId: String, token: String, tokenId: String, username: String) {
        self.appId = appId
        self.token = token
        self.tokenId = tokenId
        self.username = username
    }
}

/// A reset function's input: a reset token, who asks, and the client's `arguments`. Never the password.
public struct ResetCall: Sendable, Hashable {
    public var appId: String
    public var token: String
    public var tokenId: String
    public var username: String
    public var arguments: [JSONValue]

    package init(appId: String, token: String, tokenId: String, username: String, arguments: [JSONValue]) {
        self.appId = appId
        self.token = token
        self.tokenId = tokenId
        self.username = username
        self.arguments = arguments
    }
}

/// A custom-function login's answer.
public enum CustomLoginOutcome: Sendable, Hashable {
    /// The caller is the user your system knows by `id` (the same id always finds the same Gatehouse user);
    /// `name` goes into their profile.
    case user(id: String, name: String?)
    /// The caller is not let in; the reason is shown to them.
    case refused(String)
}

/// A migrate-user function's input: someone signs in with, or asks a password reset for, an address Gatehouse does
/// not know (or knows only as a pending registration), and the system the users come from may know it.
///
/// At a login it carries the **password** the person typed, in clear: the one function that ever receives one. The
/// function checks it against the old system (Cognito's `AdminInitiateAuth`, App Services' login, …) and forgets it.
/// At a password reset it carries none (`password` is nil): the function says only whether the old system has a user
/// of that address. Its description never shows the password.
public struct MigrateUserCall: Sendable, Hashable, CustomStringConvertible {
    /// Why the function is asked.
    public enum Reason: String, Sendable, Hashable {
        /// A password login (Client API or native auth): `password` is set.
        case login
        /// A password reset request (Client API `reset/send`, native reset start): no password.
        case passwordReset
    }

    public var appId: String
    /// The address as the user typed it (normalised: NFC, the domain lowercased).
    public var email: String
    /// The password typed at a login; nil for a password reset.
    public var password: String?
    public var reason: Reason

    package init(appId: String, email: String, password: String?, reason: Reason) {
        self.appId = appId
        self.email = email
        self.password = password
        self.reason = reason
    }

    public var description: String {
        "MigrateUserCall(appId: \(appId), email: \(email), password: \(password == nil ? "none" : "<redacted>"), reason: \(reason.rawValue))"
    }
}

/// A migrate-user function's answer.
public enum MigrateUserOutcome: Sendable, Hashable {
    /// The old system knows the user and, at a login, accepted the password: Gatehouse creates the user (at a login
    /// with that password, hashed with the app's Argon2id), its email account confirmed.
    ///
    /// - `emailVerified`: the old system verified the address. Gatehouse migrates only verified addresses: false
    ///   counts as ``unknown`` (whoever made the old account may not own the mailbox).
    /// - `userId`: the id to give the new user, a 24-hex ObjectId (App Services user ids are), so that data that
    ///   refers to it stays valid; nil for a new one. An id another user has already makes the migration fail.
    /// - `customData`: the user's custom user data (a JSON object of at most 16 KiB).
    case migrated(emailVerified: Bool, userId: String? = nil, customData: [String: JSONValue] = [:])
    /// The old system has no such user.
    case unknown
    /// The old system has the user, and the password is not theirs.
    case wrongPassword
}

/// Swift closures that stand in for the webhooks when Gatehouse is embedded as a library. A closure given here
/// is used instead of the app's configured webhook for the same function.
public struct FunctionHandlers: Sendable {
    public var confirmation: (@Sendable (ConfirmationCall) async throws -> FunctionStatus)?
    public var reset: (@Sendable (ResetCall) async throws -> FunctionStatus)?
    /// Receives the app id and the login payload (`Credentials.function(payload:)`).
    public var customLogin: (@Sendable (_ appId: String, _ payload: [String: JSONValue]) async throws -> CustomLoginOutcome)?
    /// Lazy migration: asked for addresses Gatehouse does not know, in every app with email/password accounts
    /// (answer ``MigrateUserOutcome/unknown`` for apps that do not migrate). It receives passwords: see
    /// ``MigrateUserCall``.
    public var migrateUser: (@Sendable (MigrateUserCall) async throws -> MigrateUserOutcome)?

    public init(
        confirmation: (@Sendable (ConfirmationCall) async throws -> FunctionStatus)? = nil,
        reset: (@Sendable (ResetCall) async throws -> FunctionStatus)? = nil,
        customLogin: (@Sendable (_ appId: String, _ payload: [String: JSONValue]) async throws -> CustomLoginOutcome)? = nil,
        migrateUser: (@Sendable (MigrateUserCall) async throws -> MigrateUserOutcome)? = nil
    ) {
        self.confirmation = confirmation
        self.reset = reset
        self.customLogin = customLogin
        self.migrateUser = migrateUser
    }
}
