import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import Logging
import Testing

/// The PostgreSQL connection pool as Gatehouse configures it: every connection opened at start, and the server
/// keeping idle connections alive with TCP keepalives (the pool sends no keep-alive query of its own). That none is
/// closed for being idle (no idle timeout, postgres-nio's 60 s) is configuration this test does not wait out.
@Suite(.enabled(if: TestDatabase.postgresAdmin != nil, "needs GATEHOUSE_TEST_POSTGRES_URL"))
struct PostgresPoolTests {
    @Test func thePoolOpensAllItsConnectionsUpFrontReusesThemAndAsksTheServerForKeepalives() async throws {
        let (url, drop) = try await TestDatabase.fresh(.sqliteMemory)
        guard case .postgres(var settings) = url else { Issue.record("not a PostgreSQL database: \(url)"); return }
        settings.poolSize = 3
        var logger = Logger(label: "test")
        logger.logLevel = TestDatabase.logLevel
        let db = try await PostgresDatabase.open(settings, logger: logger)
        do {
            try await Self.check(db)
            db.shutdown()
            await drop()
        } catch {
            db.shutdown()
            await drop()
            throw error
        }
    }

    private static func check(_ db: PostgresDatabase) async throws {
        // Every connection of the pool is opened without being asked for (they come up in the background).
        let sessions = "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
        let deadline = ContinuousClock.now + .seconds(20)
        var open: Int64 = 0
        while ContinuousClock.now < deadline {
            open = try await db.query(sessions, []).first?.int("n") ?? 0
            if open >= 3 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(open == 3)

        // Statements one after another reuse them: no connection is closed and another opened.
        let pids = "SELECT string_agg(pid::text, ',' ORDER BY pid) AS pids FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
        let before = try await db.query(pids, []).first?.text("pids")
        for _ in 0..<20 { try await db.query("SELECT 1", []) }
        #expect(try await db.query(pids, []).first?.text("pids") == before)

        // Each session asks the server for TCP keepalives after a minute idle (in seconds in pg_settings).
        let keepalive = try await db.query(
            "SELECT setting FROM pg_settings WHERE name IN ('tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count') ORDER BY name", []
        ).map { try $0.text("setting") }
        #expect(keepalive == ["6", "60", "10"])
    }
}
