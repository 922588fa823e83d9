import Foundation

/// How an ``App`` reaches its server and where it keeps its users.
public struct AppConfiguration: Sendable {
    /// The server's base URL, for example `http://127.0.0.1:9090`. Before its first request an app asks
    /// `/location` and then talks to the `hostname` the server answers.
    public var baseURL: String
    /// Sends the HTTP requests. Default: ``URLSessionTransport``.
    public var transport: any NetworkTransport
    /// Keeps users and tokens between launches. Default: the Keychain on Apple platforms, a ``FileUserStore`` on
    /// Linux.
    public var userStore: any UserStore
    /// Seconds before a request gives up. Default 60.
    public var requestTimeout: TimeInterval
    /// Where completion handlers run. Default: the main queue, as in the Realm SDK.
    public var callbackQueue: DispatchQueue
    /// How long before its `exp` an access token is refreshed ahead of a call. Default 30 seconds.
    public var refreshLeeway: TimeInterval

    /// The current time; tests move it.
    var now: @Sendable () -> Date = { Date() }

    public init(
        baseURL: String,
        transport: any NetworkTransport = URLSessionTransport(),
        userStore: (any UserStore)? = nil,
        requestTimeout: TimeInterval = 60,
        callbackQueue: DispatchQueue = .main,
        refreshLeeway: TimeInterval = 30
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.transport = transport
        self.userStore = userStore ?? defaultUserStore()
        self.requestTimeout = requestTimeout
        self.callbackQueue = callbackQueue
        self.refreshLeeway = refreshLeeway
    }
}
