import Foundation

// The parameter objects are classes, as in MSAL, so that `let parameters = SignUpParameters(username: email)` can
// be followed by `parameters.password = password`. Their values sit behind a lock, which makes them Sendable; a flow
// copies them when it starts, so changing a parameter object later does not change a running flow.

/// What ``NativeAuthClient/signUp(parameters:delegate:)`` needs.
public final class SignUpParameters: Sendable {
    struct Values: Sendable {
        var username: String
        var password: String?
        var attributes: AttributesJSON?
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
    /// objects), typed `[String: Any]` as in MSAL. Kept as one JSON object from the moment they are set; values that
    /// are not JSON fail the sign-up with a general error when it starts.
    public var attributes: [String: Any]? {
        get { values.withLock { $0.attributes }?.dictionary }
        set {
            let encoded = newValue.map(AttributesJSON.init)
            values.withLock { $0.attributes = encoded }
        }
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

/// Sign-up attributes as the `attributes` form field: one JSON object, encoded when the app hands them over (so that
/// MSAL's `[String: Any]` never crosses into a task), or the fact that they were not JSON.
struct AttributesJSON: Sendable, Hashable {
    /// The JSON object; nil when the values were not JSON.
    let text: String?

    init(_ attributes: [String: Any]) {
        guard JSONSerialization.isValidJSONObject(attributes),
            let data = try? JSONSerialization.data(withJSONObject: attributes, options: [.sortedKeys])
        else {
            text = nil
            return
        }
        text = String(decoding: data, as: UTF8.self)
    }

    /// The attributes back as a dictionary (nil when they were not JSON).
    var dictionary: [String: Any]? {
        text.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The form field's value, or a general failure when the attributes were not JSON.
    func field(correlationId: UUID) throws(NativeAuthFailure) -> String {
        guard let text else { throw .general("The attributes are not a valid JSON object", correlationId) }
        return text
    }
}
