import Foundation
import GatehouseArgon2
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import NIOCore
import GatehouseTestSupport
import Testing

/// Cheap Argon2id parameters: tests exercise the real hash, not its cost.
let testHashParameters = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)

/// A test app configuration: `test-app` (email confirmation, anonymous users, API keys) and `auto-app` (auto
/// confirmation, reveals existence, no anonymous users, no API keys).
func testConfiguration(
    database: DatabaseURL = .sqliteMemory,
    mailbox: Bool = true,
    reveal: Bool = false,
    hash: Argon2Parameters = testHashParameters,
    localUserpass: LocalUserpassConfiguration? = LocalUserpassConfiguration(confirmation: .email)
) -> GatehouseConfiguration {
    GatehouseConfiguration(
        server: ServerSettings(host: "127.0.0.1", port: 0, publicURL: "http://gatehouse.test"),
        database: DatabaseSettings(url: database),
        dev: DevSettings(mailbox: mailbox),
        apps: [
            AppSettings(
                id: "test-app", revealUserExistence: reveal, localUserpass: localUserpass, anonymousUsers: true, apiKeys: true, passwordHash: hash
            ),
            AppSettings(
                id: "auto-app", revealUserExistence: true,
                localUserpass: LocalUserpassConfiguration(confirmation: .auto), passwordHash: hash
            ),
        ]
    )
}

/// The servers' logger in tests: quiet, unless `GATEHOUSE_TEST_LOG_LEVEL` (e.g. `warning`) asks to see what they
/// log while the suite runs.
var quietLogger: Logger {
    var logger = Logger(label: "gatehouse-test")
    logger.logLevel = TestDatabase.logLevel
    return logger
}

/// Runs `body` on a fresh database of the test PostgreSQL server, opened with its settings as `adjust` leaves them
/// (a pool's size, TLS), then shuts it down and drops it.
func withPostgresDatabase(
    _ adjust: (inout PostgresSettings) -> Void = { _ in },
    _ body: (PostgresDatabase, PostgresSettings) async throws -> Void
) async throws {
    let (url, drop) = try await TestDatabase.fresh(.sqliteMemory)
    guard case .postgres(var settings) = url else {
        Issue.record("not a PostgreSQL database: \(url)")
        await drop()
        return
    }
    adjust(&settings)
    let db: PostgresDatabase
    do {
        db = try await PostgresDatabase.open(settings, logger: quietLogger)
    } catch {
        await drop()
        throw error
    }
    do {
        try await body(db, settings)
        db.shutdown()
        await drop()
    } catch {
        db.shutdown()
        await drop()
        throw error
    }
}

/// Opens a Gatehouse, runs `body` against its router (in process), and closes it.
func withGatehouse(
    _ configuration: GatehouseConfiguration = testConfiguration(),
    clock: ManualClock = ManualClock(),
    _ body: @Sendable (AuthServer, any TestClientProtocol) async throws -> Void
) async throws {
    try await withGatehouseResult(configuration, clock: clock, body)
}

/// ``withGatehouse(_:clock:_:)`` for a body that returns a value.
@discardableResult
func withGatehouseResult<T>(
    _ configuration: GatehouseConfiguration = testConfiguration(),
    clock: ManualClock = ManualClock(),
    _ body: @Sendable (AuthServer, any TestClientProtocol) async throws -> T
) async throws -> T {
    // An in-memory database means "a fresh one": on PostgreSQL runs, a database of this test's own.
    try await withOpenServer(configuration, clock: clock.clock, logger: quietLogger) { gatehouse in
        try await gatehouse.makeApplication().test(.router) { client in try await body(gatehouse, client) }
    }
}

// MARK: Client API calls

enum Path {
    static func app(_ app: String = "test-app") -> String { "/api/client/v2.0/app/\(app)" }
    static func local(_ route: String, app: String = "test-app") -> String { "\(self.app(app))/auth/providers/local-userpass/\(route)" }
    static let session = "/api/client/v2.0/auth/session"
    static let profile = "/api/client/v2.0/auth/profile"
    static let delete = "/api/client/v2.0/auth/delete"
}

/// A response reduced to what tests check.
struct Reply: Sendable {
    var status: HTTPResponse.Status
    var contentType: String?
    var body: Data
    var headers: HTTPFields

    var error: ClientAPIErrorBody? { try? JSONDecoder().decode(ClientAPIErrorBody.self, from: body) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: body) }
    var text: String { String(decoding: body, as: UTF8.self) }
}

extension TestClientProtocol {
    func call(_ uri: String, _ method: HTTPRequest.Method = .post, body: String? = nil, bearer: String? = nil) async throws -> Reply {
        var headers: HTTPFields = [.contentType: "application/json;charset=utf-8", .accept: "application/json"]
        if let bearer { headers[.authorization] = "Bearer \(bearer)" }
        return try await execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
    }

    func call(_ uri: String, json: some Encodable, bearer: String? = nil) async throws -> Reply {
        try await call(uri, .post, body: String(decoding: try JSONEncoder().encode(json), as: UTF8.self), bearer: bearer)
    }

    func register(_ email: String, _ password: String = "correct horse", app: String = "test-app") async throws -> Reply {
        try await call(Path.local("register", app: app), json: RegisterRequest(email: email, password: password))
    }

    func login(_ email: String, _ password: String = "correct horse", app: String = "test-app") async throws -> Reply {
        try await call(Path.local("login", app: app), json: EmailPasswordLoginRequest(username: email, password: password))
    }

    /// Newest first.
    func mailbox(_ to: String) async throws -> [MailboxEntry] {
        let reply = try await call("/_dev/mailbox?to=\(to.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)", .get)
        #expect(reply.status == .ok)
        return try reply.decode([MailboxEntry].self)
    }

    /// The token and tokenId of the newest email to `to`.
    func latestLink(_ to: String) async throws -> (token: String, tokenId: String) {
        let mail = try #require(try await mailbox(to).first)
        return try #require(mail.link)
    }

    /// Registers, confirms and logs in; returns the login.
    func signUp(_ email: String, _ password: String = "correct horse") async throws -> LoginResponse {
        #expect(try await register(email, password).status == .created)
        let link = try await latestLink(email)
        #expect(try await call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
        let reply = try await login(email, password)
        #expect(reply.status == .ok)
        return try reply.decode(LoginResponse.self)
    }
}

typealias MailboxEntry = DevMailboxRoutes.Entry

extension DevMailboxRoutes.Entry {
    /// token and tokenId of the link in the text part.
    var link: (token: String, tokenId: String)? {
        guard let token = text.firstMatch(of: /[?&]token=([0-9a-f]+)/)?.output.1,
            let tokenId = text.firstMatch(of: /[?&]tokenId=([0-9a-f]+)/)?.output.1
        else { return nil }
        return (String(token), String(tokenId))
    }
}

/// The claims of a JWT, decoded without verification (as Realm clients do).
func jwtPayload(_ token: String) throws -> [String: Any] {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    try #require(parts.count == 3)
    return try jsonSegment(parts[1])
}

/// One base64url JSON segment of a JWT.
func jsonSegment(_ segment: Substring) throws -> [String: Any] {
    let data = try #require(Base64URL.decode(segment))
    let object = try JSONSerialization.jsonObject(with: data)
    return try #require(object as? [String: Any])
}

/// Every line a server logged, at every level, with its metadata.
final class CapturedLog: Sendable {
    private let lines = NIOLockedValueBox<[String]>([])
    var text: String { lines.withLockedValue { $0.joined(separator: "\n") } }

    var logger: Logger {
        var logger = Logger(label: "gatehouse-test") { _ in Handler(log: self) }
        logger.logLevel = .trace
        return logger
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        var metadataProvider: Logger.MetadataProvider?

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            log.lines.withLockedValue { $0.append("\(event.level) \(event.message) \(all) \(event.error.map { "\($0)" } ?? "")") }
        }
    }
}

extension LoginService {
    /// A credential proven through the session gate as a native sign-in proves it: its proof, with a password's
    /// backoff counts ended.
    func prove(_ credential: LoginCredential, app: AppSettings) async throws -> SessionProof {
        let gate = SessionGate(env: env)
        let proof = try await gate.prove(credential, app: app)
        try await gate.settle(proof)
        return proof
    }
}
