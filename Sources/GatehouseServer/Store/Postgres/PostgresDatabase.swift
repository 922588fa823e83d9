import Foundation
import GatehouseDomain
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import PostgresNIO

/// PostgreSQL: a connection pool (postgres-nio's `PostgresClient`) shared by every request. Several Gatehouse
/// instances may use one database; everything that must hold across them (single-use tokens, revoked sessions,
/// send limits) is a conditional statement or a transaction in the database, not state in a process.
final class PostgresDatabase: SQLDatabase {
    let dialect = SQLDialect.postgres
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let logger: Logger
    /// How long a statement waits for a connection before the database counts as unreachable.
    private let leaseTimeout: Duration
    /// How long leased work (a statement, a transaction) may take before its connection is closed and it fails as
    /// unavailable: a connection whose server went away without the socket saying so must not hold a request for
    /// ever. Migrations (``Migrator``) run without it.
    static let workDeadline: Duration = .seconds(30)
    /// Set while migrations run: their statements (an index on a large table) may take as long as they need.
    @TaskLocal static var unbounded = false

    private init(client: PostgresClient, runner: Task<Void, Never>, logger: Logger, leaseTimeout: Duration) {
        self.client = client
        self.runner = runner
        self.logger = logger
        self.leaseTimeout = leaseTimeout
    }

    /// Starts the connection pool. With `connect` (the default) it also makes one round trip, so an unreachable
    /// server fails here; without, connections are made when first needed.
    static func open(_ settings: PostgresSettings, logger: Logger, connect: Bool = true) async throws -> PostgresDatabase {
        let tls: PostgresClient.Configuration.TLS
        switch settings.sslMode {
        case .disable:
            tls = .disable
        case .require:
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            tls = .require(configuration)
        case .verifyFull:
            tls = .require(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(
            host: settings.host, port: settings.port, username: settings.username, password: settings.password,
            database: settings.database, tls: tls
        )
        configuration.options.maximumConnections = settings.poolSize
        // Nothing holds a lock for ever: a statement waits at most 30 s for a row lock, and a connection left idle
        // inside a transaction is ended by the server after 60 s, its locks released, instead of stalling every
        // request that needs those rows.
        configuration.options.additionalStartupParameters = [("lock_timeout", "30s"), ("idle_in_transaction_session_timeout", "60s")]
        configuration.options.connectTimeout = .seconds(Int64(settings.connectTimeout))
        var clientLogger = logger
        clientLogger.logLevel = max(logger.logLevel, .notice)
        let client = PostgresClient(configuration: configuration, backgroundLogger: clientLogger)
        let runner = Task { await client.run() }
        let db = PostgresDatabase(client: client, runner: runner, logger: clientLogger, leaseTimeout: .seconds(Int64(settings.connectTimeout)))
        guard connect else { return db }
        do {
            try await db.ping()
        } catch {
            runner.cancel()
            throw error
        }
        return db
    }

    @discardableResult
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await Self.mapErrors {
            try await self.withConnection { connection in try await Self.run(sql, binds, on: connection, logger: self.logger) }
        }
    }

    func transaction<T: Sendable>(_ body: @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        try await Self.mapErrors {
            try await self.withConnection { connection in
                try await connection.query("BEGIN", logger: self.logger)
                // COMMIT and ROLLBACK run in tasks of their own, which a cancellation of the request does not reach:
                // the connection goes back to the pool with its transaction ended, never open with its locks held.
                let logger = self.logger
                do {
                    let result = try await body(Connection(connection: connection, logger: logger))
                    try await Task { try await connection.query("COMMIT", logger: logger) }.value
                    return result
                } catch {
                    _ = try? await Task { try await connection.query("ROLLBACK", logger: logger) }.value
                    throw error
                }
            }
        }
    }

    /// A pooled connection for `work`. While the server is unreachable the pool keeps retrying and would hold the
    /// request for up to a minute; after `leaseTimeout` without a connection the statement fails as
    /// ``StoreError/unavailable(_:)`` instead, so that requests answer 503 promptly. Once a connection is leased the
    /// work has ``workDeadline`` (unless migrations run it); past it the connection is closed and the work fails as
    /// unavailable, its outcome unknown.
    private func withConnection<T: Sendable>(_ work: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let leased = NIOLockedValueBox<(connection: PostgresConnection, at: ContinuousClock.Instant)?>(nil)
        let timeout = leaseTimeout
        let deadline: Duration? = Self.unbounded ? nil : Self.workDeadline
        return try await withoutActuallyEscaping(work) { work in
            try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    try await self.client.withConnection { connection in
                        leased.withLockedValue { $0 = (connection, .now) }
                        return try await work(connection)
                    }
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    guard let (connection, leasedAt) = leased.withLockedValue({ $0 }) else {
                        throw StoreError.unavailable("no database connection within \(timeout)")
                    }
                    guard let deadline else { return nil }
                    // The deadline counts from the lease, not from the start of the wait for it.
                    try await Task.sleep(until: leasedAt + deadline, clock: .continuous)
                    // Still running: the server stopped answering on this connection (a half-closed socket, a frozen
                    // server). Closing it fails the statement in flight, and the pool replaces the connection.
                    try? await connection.close()
                    throw StoreError.unavailable("the database did not answer within \(deadline); the outcome of the statement is unknown")
                }
                while let result = try await group.next() {
                    if let value = result {
                        group.cancelAll()
                        return value
                    }
                }
                throw StoreError.unavailable("the database connection ended without an answer")
            }
        }
    }

    func ping() async throws {
        try await query("SELECT 1", [])
    }

    func close() async throws {
        shutdown()
    }

    /// Stops the pool: its connections close.
    func shutdown() {
        runner.cancel()
    }

    private struct Connection: SQLExecutor {
        let connection: PostgresConnection
        let logger: Logger
        /// Errors are mapped here already, so that a caller inside the transaction can tell a conflict from other
        /// failures (the import names the line that conflicts); the transaction rolls back either way.
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            try await PostgresDatabase.mapErrors { try await PostgresDatabase.run(sql, binds, on: connection, logger: logger) }
        }
    }

    private static func run(_ sql: String, _ binds: [SQLValue], on connection: PostgresConnection, logger: Logger) async throws -> [SQLRow] {
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .int(let i): bindings.append(i)
            case .text(let s): bindings.append(s)
            case .blob(let b): bindings.append(ByteBuffer(bytes: b))
            case .null: bindings.appendNull()
            }
        }
        let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
        var result: [SQLRow] = []
        for try await row in rows {
            var values: [String: SQLValue] = [:]
            for cell in row {
                values[cell.columnName] = try SQLValue(cell)
            }
            result.append(SQLRow(values: values))
        }
        return result
    }

    /// Unique violations become ``StoreError/conflict``; connection failures ``StoreError/unavailable(_:)``.
    private static func mapErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StoreError {
            throw error
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw StoreError.conflict
        } catch let error as PSQLError where error.serverInfo == nil {
            // No answer from the server: connection refused, lost or timed out.
            throw StoreError.unavailable(String(reflecting: error))
        } catch where String(reflecting: type(of: error)).contains("ConnectionPoolError") {
            // The pool gave up creating connections (its circuit breaker); the type is not public API.
            throw StoreError.unavailable(String(reflecting: error))
        }
    }
}

extension SQLValue {
    fileprivate init(_ cell: PostgresCell) throws {
        guard cell.bytes != nil else {
            self = .null
            return
        }
        switch cell.dataType {
        case .int2, .int4, .int8, .numeric: self = .int(try cell.decode(Int64.self))
        case .bytea: self = .blob(Array(try cell.decode(ByteBuffer.self).readableBytesView))
        default: self = .text(try cell.decode(String.self))
        }
    }
}

/// Creates and drops databases on a PostgreSQL server (for throwaway test databases and for setting up a deployment).
public enum PostgresAdmin {
    /// Creates `name` on the server `admin` points at and returns settings for it. `name` must be a plain
    /// identifier (letters, digits, `_`).
    public static func createDatabase(named name: String, admin: PostgresSettings, logger: Logger = Logger(label: "gatehouse")) async throws
        -> PostgresSettings
    {
        precondition(name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }, "database names are plain identifiers")
        let db = try await PostgresDatabase.open(admin, logger: logger)
        defer { db.shutdown() }
        try await db.query("CREATE DATABASE \(name)", [])
        var settings = admin
        settings.database = name
        return settings
    }

    /// Drops `name`, closing its connections first.
    public static func dropDatabase(named name: String, admin: PostgresSettings, logger: Logger = Logger(label: "gatehouse")) async throws {
        precondition(name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }, "database names are plain identifiers")
        let db = try await PostgresDatabase.open(admin, logger: logger)
        defer { db.shutdown() }
        try await db.query("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", [])
    }
}
