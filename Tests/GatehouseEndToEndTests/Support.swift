import Foundation
@testable import Gatehouse
import GatehouseArgon2
import GatehouseDomain
import GatehouseServer
import Hummingbird
import HummingbirdTesting
import Logging
import GatehouseTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A Gatehouse server listening on a loopback port for one test.
struct LiveServer: Sendable {
    let base: String
    let gatehouse: AuthServer
    let clock: ManualClock

    /// An SDK app against this server, with its own user store and the server's clock.
    func app(
        id: String = "test-app",
        store: any UserStore = InMemoryUserStore(),
        transport: any NetworkTransport = URLSessionTransport(),
        queue: DispatchQueue = DispatchQueue(label: "sdk-callbacks")
    ) -> App {
        var configuration = AppConfiguration(baseURL: base, transport: transport, userStore: store, callbackQueue: queue)
        let clock = self.clock
        configuration.now = { clock.now }
        return App(id: id, configuration: configuration)
    }

    /// A native auth client of `test-app` against this server, with its own account store and the server's clock.
    func nativeClient(
        challengeTypes: NativeAuthChallengeTypes = [.oob, .password],
        store: any UserStore = InMemoryUserStore(),
        transport: any NetworkTransport = URLSessionTransport()
    ) -> NativeAuthClient {
        var configuration = NativeAuthConfiguration(
            baseURL: base, appId: "test-app", clientId: "ios-app", challengeTypes: challengeTypes, accountStore: store
        )
        configuration.transport = transport
        let clock = self.clock
        configuration.now = { clock.now }
        return NativeAuthClient(configuration: configuration)
    }

    /// The emails to `address` in the dev mailbox, newest first, read over HTTP.
    func mails(_ address: String) async throws -> [[String: Any]] {
        let url = URL(string: "\(base)/_dev/mailbox?to=\(address.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")!
        let (data, _) = try await URLSession.shared.data(from: url)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
    }

    /// The text of the newest email to `address`, read from the dev mailbox over HTTP.
    func latestMail(_ address: String) async throws -> String {
        try #require(try await mails(address).first?["text"] as? String, "no mail to \(address)")
    }

    /// The one-time code in the newest email to `address`.
    func latestCode(_ address: String) async throws -> String {
        let text = try await latestMail(address)
        return String(try #require(text.firstMatch(of: /(?m)^\s+(\d{4,10})\s*$/)?.output.1, "no code in: \(text)"))
    }

    /// token and tokenId of the newest email to `address`, read from the dev mailbox over HTTP.
    func latestLink(_ address: String) async throws -> (token: String, tokenId: String) {
        let text = try await latestMail(address)
        let token = try #require(text.firstMatch(of: /[?&]token=([0-9a-f]+)/)?.output.1)
        let tokenId = try #require(text.firstMatch(of: /[?&]tokenId=([0-9a-f]+)/)?.output.1)
        return (String(token), String(tokenId))
    }

    /// Registers, confirms and logs in `email` through the SDK.
    func signedInUser(_ app: App, _ email: String, _ password: String = "correct horse") async throws -> User {
        try await signUp(app, email, password)
        return try await app.login(credentials: .emailPassword(email: email, password: password))
    }

    /// Registers and confirms `email` through the SDK.
    func signUp(_ app: App, _ email: String, _ password: String = "correct horse") async throws {
        try await app.emailPasswordAuth.registerUser(email: email, password: password)
        let link = try await latestLink(email)
        try await app.emailPasswordAuth.confirmUser(link.token, tokenId: link.tokenId)
    }
}

/// The native auth settings of the live server's `test-app`: client `ios-app`, both sign-up methods, an optional
/// `country` attribute.
let liveNativeAuth = NativeAuthSettings(clientIds: ["ios-app"], attributes: [.init(name: "country", regex: "^[A-Z]{2}$")])

/// The HS256 secret the live server's `custom-token` provider trusts.
let liveJWTSecret = "the live server's custom JWT secret, 32+ bytes"

func withLiveServer(
    reveal: Bool = false,
    nativeAuth: NativeAuthSettings = liveNativeAuth,
    clock: ManualClock = ManualClock(),
    functions: FunctionHandlers? = nil,
    identityProvider idp: TestIdentityProvider? = nil,
    _ body: @Sendable (LiveServer) async throws -> Void
) async throws {
    let hash = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
    let base = GatehouseConfiguration(
        server: ServerSettings(host: "127.0.0.1", port: 0),
        database: DatabaseSettings(url: .sqliteMemory),
        dev: DevSettings(mailbox: true),
        apps: [
            AppSettings(
                id: "test-app", revealUserExistence: reveal, localUserpass: LocalUserpassConfiguration(confirmation: .email), anonymousUsers: true,
                apiKeys: true, passwordHash: hash, nativeAuth: nativeAuth,
                customToken: CustomTokenSettings(keys: [.secret(liveJWTSecret, kid: nil)], audiences: ["test-app"], metadataFields: [.init(name: "name")])
            )
        ]
    )
    var logger = Logger(label: "e2e")
    logger.logLevel = .critical
    var configuration = base
    if functions != nil {
        // Closures stand in for the webhooks: confirmation and reset by function, and custom-function login.
        configuration.apps[0].localUserpass?.confirmation = .function
        configuration.apps[0].localUserpass?.reset = .function
        configuration.apps[0].customFunction = .some(nil)
    }
    if let idp {
        // Google, Apple and Facebook, played by the test identity provider.
        configuration.apps[0].google = GoogleSettings(
            clientIds: ["ios-client.apps.example"], serverClientId: TestIdentityProvider.clientId, clientSecret: TestIdentityProvider.clientSecret,
            issuers: [idp.baseURL], jwksURL: idp.baseURL + "/jwks", tokenURL: idp.baseURL + "/token"
        )
        configuration.apps[0].apple = AppleSettings(clientIds: ["com.example.app"], issuer: idp.baseURL, jwksURL: idp.baseURL + "/jwks")
        configuration.apps[0].facebook = FacebookSettings(appId: "fb-app", appSecret: "fb-secret", graphURL: idp.baseURL)
    }
    try await withOpenServer(configuration, clock: clock.clock, logger: logger, functions: functions ?? FunctionHandlers()) { gatehouse in
        // On the event loops, as `gatehouse serve` runs its requests.
        try await AuthServer.onEventLoops {
            try await gatehouse.makeApplication().test(.live) { client in
                let port = try #require(client.port)
                try await body(LiveServer(base: "http://127.0.0.1:\(port)", gatehouse: gatehouse, clock: clock))
            }
        }
    }
}


/// A transport that records every request, can hold chosen responses until released, and can play unreachable.
final class ObservingTransport: NetworkTransport, @unchecked Sendable {
    private let base = URLSessionTransport()
    private let lock = NSLock()
    private var _requests: [String] = []
    private var held: [String: Gate] = [:]
    private var _unreachable = false

    var requests: [String] { lock.withLock { _requests } }
    func count(_ request: String) -> Int { requests.filter { $0 == request }.count }
    var unreachable: Bool {
        get { lock.withLock { _unreachable } }
        set { lock.withLock { _unreachable = newValue } }
    }

    /// Holds the responses to `request` ("POST /api/…") until the returned gate opens.
    func hold(_ request: String) -> Gate {
        let gate = Gate()
        lock.withLock { held[request] = gate }
        return gate
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let key = "\(request.method) \(request.url.path)"
        let (gate, unreachable) = lock.withLock { () -> (Gate?, Bool) in
            _requests.append(key)
            return (held[key], _unreachable)
        }
        if unreachable { throw URLError(.cannotConnectToHost) }
        let response = try await base.send(request)
        if let gate {
            gate.arrived()
            await gate.wait()
        }
        return response
    }
}

