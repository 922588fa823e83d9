import Foundation
public import GatehouseServer
public import GatehouseDomain

public import Logging

/// Where a test's data lives. The suite runs twice in `scripts/test.sh`: on SQLite, then on PostgreSQL when
/// `GATEHOUSE_TEST_POSTGRES_URL` (an admin URL of a throwaway server) is set; each test then gets a database of
/// its own, dropped afterwards.
public enum TestDatabase {
    public static var postgresAdmin: PostgresSettings? {
        guard let url = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_POSTGRES_URL"] else { return nil }
        return try? PostgresSettings(parsing: url, key: "GATEHOUSE_TEST_POSTGRES_URL")
    }

    /// `GATEHOUSE_TEST_LOG_LEVEL` (`trace` … `critical`), for looking into a failing run; `critical` otherwise.
    public static var logLevel: Logger.Level {
        ProcessInfo.processInfo.environment["GATEHOUSE_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    }

    /// A new empty database on PostgreSQL when the suite runs there, else `sqlite`; and how to remove it.
    public static func fresh(_ sqlite: DatabaseURL) async throws -> (url: DatabaseURL, drop: @Sendable () async -> Void) {
        guard let admin = postgresAdmin else { return (sqlite, {}) }
        let name = "gh_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        var quiet = Logger(label: "test-db")
        quiet.logLevel = logLevel
        let logger = quiet
        var settings = try await PostgresAdmin.createDatabase(named: String(name), admin: admin, logger: logger)
        // Dozens of tests run at once, each with its own server: a small pool each keeps the cluster under its
        // connection limit (scripts/postgres-env.sh) however many run together.
        settings.poolSize = 4
        return (.postgres(settings), { try? await PostgresAdmin.dropDatabase(named: String(name), admin: admin, logger: logger) })
    }
}

extension DatabaseURL {
    /// The URL as `--database` and `database.url` take it, password included (test databases are throwaway and
    /// on loopback).
    public var commandLineValue: String {
        switch self {
        case .sqliteMemory: return "sqlite::memory:"
        case .sqliteFile(let path): return "sqlite:\(path)"
        case .postgres(let settings):
            let password = (settings.password ?? "").addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            return "postgres://\(settings.username):\(password)@\(settings.host):\(settings.port)/\(settings.database)?sslmode=disable"
        }
    }
}

/// Opens a server on `configuration` — a database of its own when the configuration asks for a fresh one
/// (`sqlite::memory:`, which on PostgreSQL runs becomes a new PostgreSQL database) — runs `body`, then closes the
/// server and drops that database on every path: a server dropped unclosed traps in its HTTP client's deinit.
public func withOpenServer<T>(
    _ configuration: GatehouseConfiguration, clock: GatehouseClock = .system, logger: Logger, functions: FunctionHandlers = FunctionHandlers(),
    _ body: (AuthServer) async throws -> T
) async throws -> T {
    var configuration = configuration
    var drop: @Sendable () async -> Void = {}
    if configuration.database.url == .sqliteMemory {
        (configuration.database.url, drop) = try await TestDatabase.fresh(.sqliteMemory)
    }
    let gatehouse: AuthServer
    do {
        gatehouse = try await AuthServer.open(configuration: configuration, clock: clock, logger: logger, functions: functions)
    } catch {
        await drop()
        throw error
    }
    do {
        let result = try await body(gatehouse)
        try await gatehouse.close()
        await drop()
        return result
    } catch {
        try? await gatehouse.close()
        await drop()
        throw error
    }
}
