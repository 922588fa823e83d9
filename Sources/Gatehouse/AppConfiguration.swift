import Foundation

/// How an ``App`` reaches its server and where it keeps its users.
public struct AppConfiguration: Sendable {
    /// The server's base URL, for example `http://127.0.0.1:9090`. Before its first request an app asks
    /// `/location` and then talks to the `hostname` the server answers: an origin (`scheme://host[:port]`, which
    /// may be another host, as App Services' regions were), never plain `http` after an `https` base URL, and never
    /// one with credentials, a path, a query or a fragment (``ClientError/insecureLocation(_:)``).
    public var baseURL: String
    /// Sends the HTTP requests. Default: ``URLSessionTransport``, which follows no redirect (a followed one would
    /// carry the request's password or token wherever it pointed).
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

    /// - Parameters:
    ///   - baseURL: the server, for example `https://auth.example.com`.
    ///   - transport: sends the requests.
    ///   - userStore: keeps users and tokens; nil for the platform's default.
    ///   - requestTimeout: seconds before a request gives up.
    ///   - callbackQueue: where completion handlers run.
    ///   - refreshLeeway: seconds before expiry at which an access token is refreshed ahead of a call.
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

extension AppConfiguration {
    /// The server of an ``App`` made without a configuration (`App(id:)`, as in the Realm SDK): the
    /// `GatehouseBaseURL` entry of the app's Info.plist, else the `GATEHOUSE_BASE_URL` environment variable, else
    /// `http://127.0.0.1:9090`, where `gatehouse serve` listens by default.
    public static var defaultBaseURL: String {
        if let plist = Bundle.main.object(forInfoDictionaryKey: "GatehouseBaseURL") as? String, !plist.isEmpty { return plist }
        if let environment = ProcessInfo.processInfo.environment["GATEHOUSE_BASE_URL"], !environment.isEmpty { return environment }
        return "http://127.0.0.1:9090"
    }

    /// A configuration for ``defaultBaseURL`` with every default, as the Realm SDK's `AppConfiguration()`.
    public init() {
        self.init(baseURL: Self.defaultBaseURL)
    }
}

extension AppConfiguration {
    /// The Realm SDK's initializer: a nil `baseURL` is ``defaultBaseURL``, a nil `transport` the default one.
    @_disfavoredOverload
    public init(baseURL: String? = nil, transport: (any NetworkTransport)? = nil, defaultRequestTimeoutMS: UInt? = nil) {
        self.init(
            baseURL: baseURL ?? Self.defaultBaseURL, transport: transport ?? URLSessionTransport(),
            requestTimeout: defaultRequestTimeoutMS.map { TimeInterval($0) / 1000 } ?? 60
        )
    }

    /// The Realm SDK's older initializer, common in existing code as `…, transport: nil, localAppName: nil,
    /// localAppVersion: nil`. The app name and version are not sent.
    @available(*, deprecated, message: "localAppName and localAppVersion are unused; use init(baseURL:transport:)")
    public init(
        baseURL: String? = nil, transport: (any NetworkTransport)? = nil, localAppName: String?, localAppVersion: String?,
        defaultRequestTimeoutMS: UInt? = nil
    ) {
        self.init(baseURL: baseURL, transport: transport, defaultRequestTimeoutMS: defaultRequestTimeoutMS)
    }

    /// ``requestTimeout`` in milliseconds, as the Realm SDK has it.
    public var defaultRequestTimeoutMS: UInt {
        get { UInt(max(0, requestTimeout * 1000)) }
        set { requestTimeout = TimeInterval(newValue) / 1000 }
    }
}
