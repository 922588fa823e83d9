import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

/// The PostgreSQL connection pool as Gatehouse configures it: every connection opened at start, and the server
/// keeping idle connections alive with TCP keepalives (the pool sends no keep-alive query of its own). That none is
/// closed for being idle (no idle timeout, postgres-nio's 60 s) is configuration this test does not wait out.
@Suite(.enabled(if: TestDatabase.postgresAdmin != nil, "needs GATEHOUSE_TEST_POSTGRES_URL"))
struct PostgresPoolTests {
    @Test func thePoolOpensAllItsConnectionsUpFrontReusesThemAndAsksTheServerForKeepalives() async throws {
        try await withPostgresDatabase({ $0.poolSize = 3 }) { db, _ in try await Self.check(db) }
    }

    /// A request runs on an event loop (``EventLoopTaskExecutor``); a lease made there takes a connection of that loop
    /// while one is idle, so its statement is written and answered on the thread that asked.
    @Test func aLeaseOnAnEventLoopTakesAConnectionOfThatLoop() async throws {
        let (url, drop) = try await TestDatabase.fresh(.sqliteMemory)
        guard case .postgres(let settings) = url else { Issue.record("not a PostgreSQL database: \(url)"); return }
        // A group of its own: its loops take the four connections in turn, two each.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        var logger = Logger(label: "test")
        logger.logLevel = TestDatabase.logLevel
        let pool = PostgresPool(size: 4, configuration: try GatehouseServer.PostgresDatabase.connectionConfiguration(settings), logger: logger, group: group)
        do {
            let deadline = ContinuousClock.now + .seconds(20)
            while pool.status.idle < 4, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            try #require(pool.status.idle == 4)
            let loops = try await AuthServer.onEventLoops(group: group) {
                var loops: [ObjectIdentifier] = []
                for _ in 0..<20 {
                    // The lease decides on the thread this task runs on; the work checks the connection it got.
                    let here = try #require(MultiThreadedEventLoopGroup.currentEventLoop)
                    let (same, loop) = try await pool.withConnection { ($0.eventLoop === here, ObjectIdentifier($0.eventLoop)) }
                    #expect(same)
                    loops.append(loop)
                    // To the other loop, and back (a job made runnable off the loops goes to the group's next one).
                    try await Task.sleep(for: .milliseconds(1))
                }
                return Set(loops).count
            }
            #expect(loops == 2)
        } catch {
            Issue.record(error)
        }
        pool.shutdown()
        try await group.shutdownGracefully()
        await drop()
    }

    private static func check(_ db: GatehouseServer.PostgresDatabase) async throws {
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
