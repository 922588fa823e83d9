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

/// Swift closures that stand in for the webhooks when Gatehouse is embedded as a library. A closure given here
/// is used instead of the app's configured webhook for the same function.
public struct FunctionHandlers: Sendable {
    public var confirmation: (@Sendable (ConfirmationCall) async throws -> FunctionStatus)?
    public var reset: (@Sendable (ResetCall) async throws -> FunctionStatus)?
    /// Receives the app id and the login payload (`Credentials.function(payload:)`).
    public var customLogin: (@Sendable (_ appId: String, _ payload: [String: JSONValue]) async throws -> CustomLoginOutcome)?

    public init(
        confirmation: (@Sendable (ConfirmationCall) async throws -> FunctionStatus)? = nil,
        reset: (@Sendable (ResetCall) async throws -> FunctionStatus)? = nil,
        customLogin: (@Sendable (_ appId: String, _ payload: [String: JSONValue]) async throws -> CustomLoginOutcome)? = nil
    ) {
        self.confirmation = confirmation
        self.reset = reset
        self.customLogin = customLogin
    }
}
