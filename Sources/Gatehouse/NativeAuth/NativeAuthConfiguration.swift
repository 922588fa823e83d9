import Foundation
internal import GatehouseWire

/// The challenge types an app can handle in its own UI (MSAL's `MSALNativeAuthChallengeTypes`). `redirect` is always
/// added: when the server needs something the app cannot do, it answers `redirect` and the SDK reports
/// `isBrowserRequired`.
public struct NativeAuthChallengeTypes: OptionSet, Sendable, Hashable {
    /// The bits, as in MSAL.
    public let rawValue: Int
    /// The set with these bits.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Emailed one-time codes.
    public static let oob = NativeAuthChallengeTypes(rawValue: 1 << 0)
    /// Passwords.
    public static let password = NativeAuthChallengeTypes(rawValue: 1 << 1)

    /// The `challenge_type` form field: the chosen types in a fixed order, then `redirect`, space-separated
    /// (`"oob password redirect"`).
    var formValue: String {
        var names: [String] = []
        if contains(.oob) { names.append(NativeAuthChallengeType.oob.rawValue) }
        if contains(.password) { names.append(NativeAuthChallengeType.password.rawValue) }
        names.append(NativeAuthChallengeType.redirect.rawValue)
        return names.joined(separator: " ")
    }
}

/// Optional server features the app can handle (MSAL's `MSALNativeAuthCapabilities`). Sent as `capabilities` on the
/// first call of every flow. Gatehouse has no MFA today; the server ignores them.
public struct NativeAuthCapabilities: OptionSet, Sendable, Hashable {
    /// The bits, as in MSAL.
    public let rawValue: Int
    /// The set with these bits.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The app can take a second factor.
    public static let mfaRequired = NativeAuthCapabilities(rawValue: 1 << 0)
    /// The app can register a strong authentication method.
    public static let registrationRequired = NativeAuthCapabilities(rawValue: 1 << 1)

    /// The `capabilities` form field (`"mfa_required registration_required"`), or nil when empty.
    var formValue: String? {
        var names: [String] = []
        if contains(.mfaRequired) { names.append("mfa_required") }
        if contains(.registrationRequired) { names.append("registration_required") }
        return names.isEmpty ? nil : names.joined(separator: " ")
    }
}

/// How a ``NativeAuthClient`` reaches the server's native auth API and where it keeps the signed-in account.
///
/// ```swift
/// let configuration = NativeAuthConfiguration(
///     baseURL: "http://127.0.0.1:9090", appId: "my-app", clientId: "ios-app", challengeTypes: [.oob, .password]
/// )
/// let client = NativeAuthClient(configuration: configuration)
/// ```
public struct NativeAuthConfiguration: Sendable {
    /// The server's base URL, for example `http://127.0.0.1:9090`. Requests go to
    /// `{baseURL}/native/{appId}/{endpoint}`.
    public var baseURL: String
    /// The app id (`apps[].id` in the server's configuration).
    public var appId: String
    /// The client id, one of the app's `nativeAuth.clientIds`. Sent as `client_id` on every request.
    public var clientId: String
    /// What the app's UI can handle. `redirect` is always added.
    public var challengeTypes: NativeAuthChallengeTypes
    /// Optional server features the app can handle. Default none.
    public var capabilities: NativeAuthCapabilities
    /// Sends the HTTP requests. Default: ``URLSessionTransport``.
    public var transport: any NetworkTransport
    /// Keeps the signed-in account and its tokens between launches, under the key
    /// `native-auth.{appId}.{clientId}`. Default: the Keychain on Apple platforms, a ``FileUserStore`` on Linux.
    public var accountStore: any UserStore
    /// Seconds before a request gives up. Default 60.
    public var requestTimeout: TimeInterval
    /// How long before it expires a cached access token is refreshed instead of returned. Default 30 seconds.
    public var refreshLeeway: TimeInterval

    /// The current time; tests move it.
    var now: @Sendable () -> Date = { Date() }
    /// Waits between `poll_completion` calls and before a retry; tests make it return at once.
    var sleep: @Sendable (TimeInterval) async throws -> Void = { seconds in
        try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000))
    }

    /// - Parameters:
    ///   - baseURL: the server, for example `http://127.0.0.1:9090`.
    ///   - appId: the app id in the server's configuration.
    ///   - clientId: one of the app's native auth client ids.
    ///   - challengeTypes: what the app's UI can handle (`redirect` is implied).
    ///   - capabilities: optional server features the app can handle.
    ///   - transport: sends the requests.
    ///   - accountStore: keeps the signed-in account; nil for the platform's default.
    ///   - requestTimeout: seconds before a request gives up.
    ///   - refreshLeeway: seconds before expiry at which a cached access token is refreshed.
    public init(
        baseURL: String,
        appId: String,
        clientId: String,
        challengeTypes: NativeAuthChallengeTypes,
        capabilities: NativeAuthCapabilities = [],
        transport: any NetworkTransport = URLSessionTransport(),
        accountStore: (any UserStore)? = nil,
        requestTimeout: TimeInterval = 60,
        refreshLeeway: TimeInterval = 30
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.appId = appId
        self.clientId = clientId
        self.challengeTypes = challengeTypes
        self.capabilities = capabilities
        self.transport = transport
        self.accountStore = accountStore ?? defaultUserStore()
        self.requestTimeout = requestTimeout
        self.refreshLeeway = refreshLeeway
    }

    /// The key of the cached account in ``accountStore``.
    var accountStoreKey: String { "native-auth.\(appId).\(clientId)" }
}
