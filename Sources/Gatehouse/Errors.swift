import Foundation

/// An error answered by the server, with the code clients branch on.
///
/// ```swift
/// do {
///     try await app.emailPasswordAuth.registerUser(email: email, password: password)
/// } catch let error as AppError where error.code == .accountNameInUse {
///     // ask the user to sign in instead
/// }
/// ```
public struct AppError: Error, Hashable, Sendable, LocalizedError, CustomStringConvertible {
    /// The code the server sent (an open set: unknown codes are kept as they came).
    public let code: Code
    /// The server's message.
    public let message: String
    /// Where the server points for more (its `link` field).
    public let link: String?
    /// The HTTP status of the answer.
    public let httpStatus: Int

    /// Error codes of the Client API (`invalidPassword`, `accountNameInUse`, `userNotFound`, …).
    public typealias Code = ClientAPIErrorCode

    /// An error with these parts (for tests and custom transports; the SDK makes them from the server's answers).
    public init(code: Code, message: String, link: String? = nil, httpStatus: Int) {
        self.code = code
        self.message = message
        self.link = link
        self.httpStatus = httpStatus
    }

    public var errorDescription: String? { message }
    public var description: String { "\(code.rawValue) (HTTP \(httpStatus)): \(message)" }
}

/// An error that happened on this side: the server could not be reached, answered something unreadable, or the
/// call made no sense locally (for example, a logged-out user asked to refresh).
public struct ClientError: Error, Hashable, Sendable, LocalizedError, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case transport
        case malformedResponse
        case unexpectedResponse
        case userNotLoggedIn
        case anonymousLink
        case userRemoved
        case storage
        case insecureLocation
    }

    private let kind: Kind
    /// What happened, for people.
    public let message: String
    /// The HTTP status, for ``unexpectedResponse(status:body:)`` errors.
    public let httpStatus: Int?

    private init(_ kind: Kind, _ message: String, httpStatus: Int? = nil) {
        self.kind = kind
        self.message = message
        self.httpStatus = httpStatus
    }

    /// The server could not be reached or the connection failed.
    public static func transport(_ message: String) -> ClientError { .init(.transport, message) }
    /// A success answer whose body could not be read.
    public static func malformedResponse(_ message: String) -> ClientError { .init(.malformedResponse, message) }
    /// A failure answer without the server's JSON error envelope (a proxy's HTML page, say).
    public static func unexpectedResponse(status: Int, body: String) -> ClientError {
        .init(.unexpectedResponse, "HTTP \(status): \(body.prefix(200))", httpStatus: status)
    }
    /// The user is logged out (or was removed) and the call needs a session.
    public static let userNotLoggedIn = ClientError(.userNotLoggedIn, "the user is not logged in")
    /// Anonymous credentials cannot be linked to an existing user.
    public static let anonymousLink = ClientError(.anonymousLink, "Cannot add anonymous credentials to an existing user.")
    /// The user was removed from this device.
    public static let userRemoved = ClientError(.userRemoved, "the user was removed from this device")

    /// The server's `/location` answer sent the app somewhere it will not go: from `https` to plain `http` (where
    /// anyone on the network could read and change every request), or to something that is not an http(s) URL.
    public static func insecureLocation(_ message: String) -> ClientError { .init(.insecureLocation, message) }

    /// The user store could not be read or written.
    public static func storage(_ message: String) -> ClientError { .init(.storage, message) }

    /// True for network failures and unreadable answers: worth retrying later.
    public var isTransport: Bool { kind == .transport }

    /// Same kind of error (ignoring the message).
    public static func ~= (pattern: ClientError, value: any Error) -> Bool {
        (value as? ClientError)?.kind == pattern.kind
    }

    public var errorDescription: String? { message }
    public var description: String { message }
}
