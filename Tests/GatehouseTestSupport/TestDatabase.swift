import Foundation
public import GatehouseServer
import GatehouseDomain
import Logging

/// Where a test's data lives. The suite runs twice in `scripts/test.sh`: on SQLite, then on PostgreSQL when
/// `GATEHOUSE_TEST_POSTGRES_URL` (an admin URL of a throwaway server) is set; each test then gets a database of
/// its own, dropped afterwards.
public enum TestDatabase {
    public static var postgresAdmin: PostgresSettings? {
        guard let url = ProcessInfo.processInfo.environment["GATEHOUSE_TEST_POSTGRES_URL"] else { return nil }
        return try? PostgresSettings(parsing: url, key: "GATEHOUSE_TEST_POSTGRES_URL")
    }

    /// A new empty database on PostgreSQL when the suite runs there, else `sqlite`; and how to remove it.
    public static func fresh(_ sqlite: DatabaseURL) async throws -> (url: DatabaseURL, drop: @Sendable () async -> Void) {
        guard let admin = postgresAdmin else { return (sqlite, {}) }
        let name = "gh_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        var quiet = Logger(label: "test-db")
        quiet.logLevel = .critical
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
