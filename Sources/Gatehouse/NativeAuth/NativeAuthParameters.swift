import Foundation

// The parameter objects are classes, as in MSAL, so that `let parameters = SignUpParameters(username: email)` can
// be followed by `parameters.password = password`. Their values sit behind a lock, which makes them Sendable; a flow
// copies them when it starts, so changing a parameter object later does not change a running flow.

/// What ``NativeAuthClient/signUp(parameters:delegate:)`` needs.
public final class SignUpParameters: Sendable {
    struct Values: Sendable {
        var username: String
        var password: String?
        var attributes: [String: any Sendable]?
        var correlationId: UUID?
    }

    private let values: Locked<Values>
    var snapshot: Values { values.withLock { $0 } }

    /// - Parameter username: the email address of the new account.
    public init(username: String) { values = Locked(Values(username: username)) }

    /// The email address of the new account.
    public var username: String {
        get { values.withLock { $0.username } }
        set { values.withLock { $0.username = newValue } }
    }

    /// The password, for apps that take it up front; nil to sign up with a code only (or to be asked later).
    public var password: String? {
        get { values.withLock { $0.password } }
        set { values.withLock { $0.password = newValue } }
    }

    /// Profile attributes such as `["displayName": "Ada"]`: JSON values (strings, numbers, booleans, arrays,
    /// objects). Sent as one JSON object.
    public var attributes: [String: any Sendable]? {
        get { values.withLock { $0.attributes } }
        set { values.withLock { $0.attributes = newValue } }
    }

    /// Ties the flow's requests together; nil for a new one.
    public var correlationId: UUID? {
        get { values.withLock { $0.correlationId } }
        set { values.withLock { $0.correlationId = newValue } }
    }
}

/// What ``NativeAuthClient/signIn(parameters:delegate:)`` needs.
public final class SignInParameters: Sendable {
    struct Values: Sendable {
        var username: String
        var password: String?
        var scopes: [String]?
        var claimsRequest: String?
        var correlationId: UUID?
    }

    private let values: Locked<Values>
    var snapshot: Values { values.withLock { $0 } }

    /// - Parameter username: the email address of the account.
    public init(username: String) { values = Locked(Values(username: username)) }

    /// The email address of the account.
    public var username: String {
        get { values.withLock { $0.username } }
        set { values.withLock { $0.username = newValue } }
    }

    /// The password; nil to sign in with a code (or to be asked for the password if the account has one).
    public var password: String? {
        get { values.withLock { $0.password } }
        set { values.withLock { $0.password = newValue } }
    }

    /// Scopes for the access token, besides `openid profile offline_access`, which are always asked.
    public var scopes: [String]? {
        get { values.withLock { $0.scopes } }
        set { values.withLock { $0.scopes = newValue } }
    }

    /// A claims request, as its JSON text (sent as `claims`).
    public var claimsRequest: String? {
        get { values.withLock { $0.claimsRequest } }
        set { values.withLock { $0.claimsRequest = newValue } }
    }

    /// Ties the flow's requests together; nil for a new one.
    public var correlationId: UUID? {
        get { values.withLock { $0.correlationId } }
        set { values.withLock { $0.correlationId = newValue } }
    }
}

/// What ``NativeAuthClient/resetPassword(parameters:delegate:)`` needs.
public final class ResetPasswordParameters: Sendable {
    struct Values: Sendable {
        var username: String
        var correlationId: UUID?
    }

    private let values: Locked<Values>
    var snapshot: Values { values.withLock { $0 } }

    /// - Parameter username: the email address of the account.
    public init(username: String) { values = Locked(Values(username: username)) }

    /// The email address of the account.
    public var username: String {
        get { values.withLock { $0.username } }
        set { values.withLock { $0.username = newValue } }
    }

    /// Ties the flow's requests together; nil for a new one.
    public var correlationId: UUID? {
        get { values.withLock { $0.correlationId } }
        set { values.withLock { $0.correlationId = newValue } }
    }
}

/// Options of the sign-in that ends a flow (after sign-up or a password reset).
struct SignInAfterFlowValues: Sendable {
    var scopes: [String]?
    var claimsRequest: String?
}

/// What ``SignInAfterSignUpState/signIn(parameters:delegate:)`` needs.
public final class SignInAfterSignUpParameters: Sendable {
    private let values = Locked(SignInAfterFlowValues())
    var snapshot: SignInAfterFlowValues { values.withLock { $0 } }

    /// Parameters with every option at its default.
    public init() {}

    /// Scopes for the access token, besides `openid profile offline_access`, which are always asked.
    public var scopes: [String]? {
        get { values.withLock { $0.scopes } }
        set { values.withLock { $0.scopes = newValue } }
    }

    /// A claims request, as its JSON text (sent as `claims`).
    public var claimsRequest: String? {
        get { values.withLock { $0.claimsRequest } }
        set { values.withLock { $0.claimsRequest = newValue } }
    }
}

/// What ``SignInAfterResetPasswordState/signIn(parameters:delegate:)`` needs.
public final class SignInAfterResetPasswordParameters: Sendable {
    private let values = Locked(SignInAfterFlowValues())
    var snapshot: SignInAfterFlowValues { values.withLock { $0 } }

    /// Parameters with every option at its default.
    public init() {}

    /// Scopes for the access token, besides `openid profile offline_access`, which are always asked.
    public var scopes: [String]? {
        get { values.withLock { $0.scopes } }
        set { values.withLock { $0.scopes = newValue } }
    }

    /// A claims request, as its JSON text (sent as `claims`).
    public var claimsRequest: String? {
        get { values.withLock { $0.claimsRequest } }
        set { values.withLock { $0.claimsRequest = newValue } }
    }
}

/// What ``NativeAuthUserAccountResult/getAccessToken(parameters:delegate:)`` needs.
public final class GetAccessTokenParameters: Sendable {
    struct Values: Sendable {
        var forceRefresh = false
        var returnRefreshToken = false
        var scopes: [String]?
        var claimsRequest: String?
        var correlationId: UUID?
    }

    private let values = Locked(Values())
    var snapshot: Values { values.withLock { $0 } }

    /// Parameters with every option at its default.
    public init() {}

    /// Refresh even if the cached access token is still good. Default false.
    public var forceRefresh: Bool {
        get { values.withLock { $0.forceRefresh } }
        set { values.withLock { $0.forceRefresh = newValue } }
    }

    /// Include the refresh token in the result. Default false.
    public var returnRefreshToken: Bool {
        get { values.withLock { $0.returnRefreshToken } }
        set { values.withLock { $0.returnRefreshToken = newValue } }
    }

    /// Scopes the access token must have; nil for those asked at sign-in.
    public var scopes: [String]? {
        get { values.withLock { $0.scopes } }
        set { values.withLock { $0.scopes = newValue } }
    }

    /// A claims request, as its JSON text; forces a refresh.
    public var claimsRequest: String? {
        get { values.withLock { $0.claimsRequest } }
        set { values.withLock { $0.claimsRequest = newValue } }
    }

    /// Ties the call's requests together; nil for a new one.
    public var correlationId: UUID? {
        get { values.withLock { $0.correlationId } }
        set { values.withLock { $0.correlationId = newValue } }
    }
}

/// The `attributes` form field: the attributes as one JSON object, or nil (and a failure) if they are not JSON.
func attributesJSON(_ attributes: [String: any Sendable], correlationId: UUID) throws(NativeAuthFailure) -> String {
    let object = attributes as [String: Any]
    guard JSONSerialization.isValidJSONObject(object), let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    else {
        throw .general("The attributes are not a valid JSON object", correlationId)
    }
    return String(decoding: data, as: UTF8.self)
}
