/// An `error_code` of the Client API v2.0 error envelope.
///
/// The names are the ones realm-core maps to `AppError.Code` (spec §4.3). The type is open: a client meets
/// codes it does not know as plain values rather than failing to decode.
public struct ClientAPIErrorCode: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A bad, expired, revoked or wrong-kind token (HTTP 401).
    public static let invalidSession = Self(rawValue: "InvalidSession")
    /// Wrong password or unknown user at login: "unauthorized" (HTTP 401).
    public static let invalidPassword = Self(rawValue: "InvalidPassword")
    public static let userNotFound = Self(rawValue: "UserNotFound")
    public static let accountNameInUse = Self(rawValue: "AccountNameInUse")
    public static let userAlreadyConfirmed = Self(rawValue: "UserAlreadyConfirmed")
    public static let userDisabled = Self(rawValue: "UserDisabled")
    /// A valid session that may not do this, such as a session logged in with an API key linking an identity or
    /// deleting the user (HTTP 403). Not an App Services code: Realm clients see an unknown code.
    public static let forbidden = Self(rawValue: "Forbidden")
    /// Malformed input and invalid one-time tokens ("invalid token data").
    public static let badRequest = Self(rawValue: "BadRequest")
    public static let invalidParameter = Self(rawValue: "InvalidParameter")
    public static let missingParameter = Self(rawValue: "MissingParameter")
    /// A request body over the size limit (HTTP 413).
    public static let readSizeLimitExceeded = Self(rawValue: "ReadSizeLimitExceeded")
    public static let authProviderNotFound = Self(rawValue: "AuthProviderNotFound")
    /// No API key with that id belongs to the caller (HTTP 404).
    public static let apiKeyNotFound = Self(rawValue: "APIKeyNotFound")
    /// The caller already has an API key of that name (HTTP 409).
    public static let apiKeyAlreadyExists = Self(rawValue: "APIKeyAlreadyExists")
    /// No such app (HTTP 404).
    public static let appNotFound = Self(rawValue: "AppNotFound")
    /// No such route (HTTP 404) or method (HTTP 405).
    public static let notFound = Self(rawValue: "NotFound")
    /// Too many requests (HTTP 429, with `Retry-After`): for example, too many emails to one address.
    public static let tooManyRequests = Self(rawValue: "TooManyRequests")
    public static let internalServerError = Self(rawValue: "InternalServerError")
    /// A reset function refused, or a function was called that the app does not use (HTTP 400). Realm clients see
    /// an unknown code, as with App Services.
    public static let functionFailed = Self(rawValue: "FunctionFailed")
    /// An identity provider or webhook Gatehouse depends on could not be reached or answered nonsense (HTTP 502).
    public static let httpError = Self(rawValue: "HTTPError")
    /// The server cannot serve the request right now, for example its database is unreachable (HTTP 503).
    public static let maintenanceInProgress = Self(rawValue: "MaintenanceInProgress")
    /// Changing a credential needs a recent proof: reauthenticate and try again (a password or email change also takes
    /// the current password instead) (HTTP 403). A Gatehouse extension.
    public static let reauthenticationRequired = Self(rawValue: "ReauthenticationRequired")
    /// No live session of the caller's user has that id (HTTP 404). A Gatehouse extension.
    public static let sessionNotFound = Self(rawValue: "SessionNotFound")
    /// The caller's user has no such identity (HTTP 404). A Gatehouse extension.
    public static let identityNotFound = Self(rawValue: "IdentityNotFound")
}
