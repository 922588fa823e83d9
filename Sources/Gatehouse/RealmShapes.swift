import Foundation

// The parts of realm-swift's App API that its users write most and that Gatehouse's own shapes did not cover: typed
// BSON accessors, Realm's error-code matching, the Objective-C-style API key callbacks, and custom data as
// `[AnyHashable: Any]`. What is still missing is listed in docs/migrating.md ("From realm-swift").

extension ObjectId: Comparable {
    /// Ordered as the Realm SDK orders them: by their bytes (the time they were made first).
    public static func < (lhs: ObjectId, rhs: ObjectId) -> Bool { lhs.stringValue < rhs.stringValue }
}

/// The Realm SDK's initializers: `AnyBSON(42)`, `AnyBSON("text")`, `AnyBSON(Date())`, … Each wraps the value in its
/// case (an `Int` as ``int64(_:)``).
extension AnyBSON {
    /// `.int64` of `value`.
    public init(_ value: Int) { self = .int64(Int64(value)) }
    /// `.int32` of `value`.
    public init(_ value: Int32) { self = .int32(value) }
    /// `.int64` of `value`.
    public init(_ value: Int64) { self = .int64(value) }
    /// `.double` of `value`.
    public init(_ value: Double) { self = .double(value) }
    /// `.bool` of `value`.
    public init(_ value: Bool) { self = .bool(value) }
    /// `.string` of `value`.
    public init(_ value: String) { self = .string(value) }
    /// `.datetime` of `value`.
    public init(_ value: Date) { self = .datetime(value) }
    /// `.objectId` of `value`.
    public init(_ value: ObjectId) { self = .objectId(value) }
    /// `.binary` of `value`.
    public init(_ value: Data) { self = .binary(value) }
    /// `.document` of `value`.
    public init(_ value: Document) { self = .document(value) }
    /// `.array` of `value`.
    public init(_ value: [AnyBSON?]) { self = .array(value) }

    /// The 32-bit integer, if this is one.
    public var int32Value: Int32? { if case .int32(let i) = self { i } else { nil } }
    /// The 64-bit integer, if this is one.
    public var int64Value: Int64? { if case .int64(let i) = self { i } else { nil } }
    /// The ObjectId, if this is one.
    public var objectIdValue: ObjectId? { if case .objectId(let id) = self { id } else { nil } }
    /// The date, if this is one.
    public var dateValue: Date? { if case .datetime(let date) = self { date } else { nil } }
    /// The bytes, if this is binary.
    public var binaryValue: Data? { if case .binary(let data) = self { data } else { nil } }
    /// Whether this is BSON null.
    public var isNull: Bool { self == .null }

    /// Any integer or double as an `Int` (the Realm SDK's `asInt()`); nil for other values and doubles that are not
    /// whole.
    public func asInt() -> Int? { intValue }
    /// Any integer as an `Int32`, when it fits.
    public func asInt32() -> Int32? { intValue.flatMap(Int32.init(exactly:)) }
    /// Any integer as an `Int64`.
    public func asInt64() -> Int64? { intValue.map(Int64.init) }
    /// Any number as a `Double`.
    public func asDouble() -> Double? { doubleValue }

    /// The value as plain Foundation values: `String`, `Int32`, `Int64`, `Double`, `Bool`, `Date`, `ObjectId`,
    /// `Data`, `[String: Any]`, `[Any]`, and `NSNull` for null.
    public var foundationValue: Any {
        switch self {
        case .string(let v): v
        case .int32(let v): v
        case .int64(let v): v
        case .double(let v): v
        case .bool(let v): v
        case .datetime(let v): v
        case .objectId(let v): v
        case .binary(let v): v
        case .document(let d): d.mapValues { $0?.foundationValue ?? NSNull() } as [String: Any]
        case .array(let a): a.map { $0?.foundationValue ?? NSNull() } as [Any]
        case .null: NSNull()
        }
    }

    /// A document as `[AnyHashable: Any]`, the shape the Realm SDK's completion form of `refreshCustomData` hands out.
    static func foundationDictionary(_ document: Document) -> [AnyHashable: Any] {
        var result: [AnyHashable: Any] = [:]
        for (key, value) in document { result[key] = value?.foundationValue ?? NSNull() }
        return result
    }
}

extension AppError {
    // Realm's code names, matched in `catch` clauses as `catch AppError.invalidPassword`.
    /// `InvalidSession`: matches an error with this code (`catch AppError.invalidSession`).
    public static var invalidSession: Code { .invalidSession }
    /// `InvalidPassword`: matches an error with this code (`catch AppError.invalidPassword`).
    public static var invalidPassword: Code { .invalidPassword }
    /// `UserNotFound`: matches an error with this code (`catch AppError.userNotFound`).
    public static var userNotFound: Code { .userNotFound }
    /// `AccountNameInUse`: matches an error with this code (`catch AppError.accountNameInUse`).
    public static var accountNameInUse: Code { .accountNameInUse }
    /// `UserAlreadyConfirmed`: matches an error with this code (`catch AppError.userAlreadyConfirmed`).
    public static var userAlreadyConfirmed: Code { .userAlreadyConfirmed }
    /// `UserDisabled`: matches an error with this code (`catch AppError.userDisabled`).
    public static var userDisabled: Code { .userDisabled }
    /// `BadRequest`: matches an error with this code (`catch AppError.badRequest`).
    public static var badRequest: Code { .badRequest }
    /// `InvalidParameter`: matches an error with this code (`catch AppError.invalidParameter`).
    public static var invalidParameter: Code { .invalidParameter }
    /// `MissingParameter`: matches an error with this code (`catch AppError.missingParameter`).
    public static var missingParameter: Code { .missingParameter }
    /// `AuthProviderNotFound`: matches an error with this code (`catch AppError.authProviderNotFound`).
    public static var authProviderNotFound: Code { .authProviderNotFound }
    /// `ApiKeyAlreadyExists`: matches an error with this code (`catch AppError.apiKeyAlreadyExists`).
    public static var apiKeyAlreadyExists: Code { .apiKeyAlreadyExists }
    /// `MaintenanceInProgress`: matches an error with this code (`catch AppError.maintenanceInProgress`).
    public static var maintenanceInProgress: Code { .maintenanceInProgress }
    /// `InternalServerError`: matches an error with this code (`catch AppError.internalServerError`).
    public static var internalServerError: Code { .internalServerError }
    /// `ReadSizeLimitExceeded`: matches an error with this code (`catch AppError.readSizeLimitExceeded`).
    public static var readSizeLimitExceeded: Code { .readSizeLimitExceeded }
    /// `ApiKeyNotFound`: matches an error with this code (`catch AppError.apiKeyNotFound`).
    public static var apiKeyNotFound: Code { .apiKeyNotFound }
    /// An answer without a code the SDK can read (the Realm SDK's `AppError.unknown`).
    /// `Unknown`.
    public static var unknown: Code { Code(rawValue: "Unknown") }
    /// Codes of App Services features Gatehouse does not have (functions, MongoDB, services): never sent by a
    /// Gatehouse server; here so that code matching them still compiles.
    /// `HttpRequestFailed`: matches an error with this code (`catch AppError.httpRequestFailed`).
    public static var httpRequestFailed: Code { .httpError }
    /// `UserAppDomainMismatch`.
    public static var userAppDomainMismatch: Code { Code(rawValue: "UserAppDomainMismatch") }
    /// `DomainNotAllowed`.
    public static var domainNotAllowed: Code { Code(rawValue: "DomainNotAllowed") }
    /// `FunctionExecutionError`.
    public static var functionExecutionError: Code { Code(rawValue: "FunctionExecutionError") }
    /// `ValueNotFound`.
    public static var valueNotFound: Code { Code(rawValue: "ValueNotFound") }
    /// `ValueAlreadyExists`.
    public static var valueAlreadyExists: Code { Code(rawValue: "ValueAlreadyExists") }
    /// `ValueDuplicateName`.
    public static var valueDuplicateName: Code { Code(rawValue: "ValueDuplicateName") }
    /// `FunctionNotFound`.
    public static var functionNotFound: Code { Code(rawValue: "FunctionNotFound") }
    /// `FunctionSyntaxError`.
    public static var functionSyntaxError: Code { Code(rawValue: "FunctionSyntaxError") }
    /// `FunctionInvalid`.
    public static var functionInvalid: Code { Code(rawValue: "FunctionInvalid") }
    /// `ExecutionTimeLimitExceeded`.
    public static var executionTimeLimitExceeded: Code { Code(rawValue: "ExecutionTimeLimitExceeded") }
    /// `NotCallable`.
    public static var notCallable: Code { Code(rawValue: "NotCallable") }
    /// `AuthError`.
    public static var authError: Code { Code(rawValue: "AuthError") }
    /// `MongoDBError`.
    public static var mongoDBError: Code { Code(rawValue: "MongoDBError") }
}

/// The Realm SDK's completion of a login or link: the user or the error.
public typealias UserCompletionBlock = @Sendable (User?, (any Error)?) -> Void

extension App {
    /// The server's base URL (the Realm SDK's `app.baseURL`): the configuration's.
    public var baseURL: String { configuration.baseURL }
}

extension ClientAPIErrorCode {
    /// `catch AppError.invalidPassword { … }`: matches an ``AppError`` with this code.
    public static func ~= (code: ClientAPIErrorCode, error: any Error) -> Bool {
        (error as? AppError)?.code == code
    }
}

extension User {
    /// The Realm SDK's completion form of ``refreshCustomData()``: the custom data as `[AnyHashable: Any]`
    /// (see ``AnyBSON/foundationValue``).
    public func refreshCustomData(_ completion: @escaping @Sendable (Result<[AnyHashable: Any], any Error>) -> Void) {
        let queue = core.configuration.callbackQueue
        Task {
            do {
                let document = try await self.refreshCustomData()
                queue.async { completion(.success(AnyBSON.foundationDictionary(document))) }
            } catch {
                queue.async { completion(.failure(error)) }
            }
        }
    }
}

extension APIKeyAuth {
    /// The Objective-C shape of ``createAPIKey(named:)``: the key or the error.
    public func createAPIKey(named name: String, completion: @escaping @Sendable (UserAPIKey?, (any Error)?) -> Void) {
        createAPIKey(named: name) { (result: Result<UserAPIKey, any Error>) in completion(try? result.get(), result.failure) }
    }

    /// The Objective-C shape of ``fetchAPIKey(_:)``: the key or the error.
    public func fetchAPIKey(_ objectId: ObjectId, completion: @escaping @Sendable (UserAPIKey?, (any Error)?) -> Void) {
        fetchAPIKey(objectId) { (result: Result<UserAPIKey, any Error>) in completion(try? result.get(), result.failure) }
    }

    /// The Objective-C shape of ``fetchAPIKeys()``: the keys or the error.
    public func fetchAPIKeys(completion: @escaping @Sendable ([UserAPIKey]?, (any Error)?) -> Void) {
        fetchAPIKeys { (result: Result<[UserAPIKey], any Error>) in completion(try? result.get(), result.failure) }
    }
}

extension Result {
    fileprivate var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}

/// The Realm SDK's name for a completion that gets an optional error.
public typealias EmailPasswordAuthOptionalErrorBlock = @Sendable ((any Error)?) -> Void

extension EmailPasswordAuth {
    /// The app this client belongs to (the Realm SDK's `app`).
    public var app: App { App(core: core) }
}

extension APIKeyAuth {
    /// The app of the user this client acts for (the Realm SDK's `app`).
    public var app: App { App(core: core) }
}
