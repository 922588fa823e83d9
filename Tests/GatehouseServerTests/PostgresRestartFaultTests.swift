import Foundation
import GatehouseTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// PostgreSQL going away and coming back again and again, as an operator sees it: a `gatehouse serve` process (a child,
/// so that a crash is a failure seen here, not the end of the test run) under six clients that register accounts in a
/// loop, against a cluster of the test's own that is stopped (`pg_ctl stop -m fast`, then `-m immediate`), started,
/// stopped again while the pool is making its connections, and whose sessions are killed (`pg_terminate_backend`),
/// with several pool sizes. Each checks: the process is alive at the end, every request was answered within the bound
/// (503 with `Retry-After` while the database is away, never 500), the server serves again within seconds of the
/// database's return, and every registration that was acknowledged is there.
///
/// postgres-nio's pool (1.33.2) crashed the process here: it destroys failed connection attempts while it is in its
/// "creation failing" state, which leaves it with fewer connections than its minimum, and the next lease that finds
/// no idle connection trips `precondition(minimumConcurrentConnections <= stats.active)`
/// (`PoolStateMachine+ConnectionGroup.swift`, `createNewDemandConnectionIfPossible`). Gatehouse has its own pool now
/// (`PostgresPool`).
@Suite(.serialized, .enabled(if: TestDatabase.postgresAdmin != nil, "needs PostgreSQL (the test command's second pass)"))
struct PostgresRestartFaultTests {
    /// Six clients registering accounts one after another each, until told to stop; every outcome is kept.
    final class Load: @unchecked Sendable {
        private let lock = NSLock()
        private var outcomes: [(email: String, outcome: FaultSuiteTests.Outcome)] = []
        private var stopping = false
        private var workers: Task<Void, Never>?

        init(_ base: String, prefix: String, clients: Int = 6) {
            workers = Task {
                await withTaskGroup(of: Void.self) { group in
                    for client in 0..<clients {
                        group.addTask {
                            var n = 0
                            while !self.lock.withLock({ self.stopping }) {
                                let email = "\(prefix)-\(client)-\(n)@example.com"
                                n += 1
                                let outcome = await FaultSuiteTests.request(
                                    "\(base)/api/client/v2.0/app/fault-app/auth/providers/local-userpass/register", method: "POST",
                                    json: #"{"email":"\#(email)","password":"correct horse"}"#
                                )
                                self.lock.withLock { self.outcomes.append((email, outcome)) }
                                // A server that is gone answers at once: no busy loop of refused connections.
                                if outcome.status == nil { try? await Task.sleep(for: .milliseconds(100)) }
                            }
                        }
                    }
                }
            }
        }

        /// Stops the clients (each finishes its request in flight) and returns every outcome.
        func stop() async -> [(email: String, outcome: FaultSuiteTests.Outcome)] {
            lock.withLock { stopping = true }
            await workers?.value
            return lock.withLock { outcomes }
        }
    }

    @Test(arguments: [1, 4, 10])
    func stoppedStartedKilledAndRestartedWhileConnectingUnderLoad(pool: Int) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fault-pg-restarts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = FaultSuiteTests.root.appendingPathComponent("scripts/postgres-env.sh")
        let cluster = folder.appendingPathComponent("pg").path
        @discardableResult
        func pg(_ arguments: String...) async throws -> String {
            let result = try await FaultSuiteTests.spawn(["/bin/bash", script.path, arguments[0], cluster] + arguments.dropFirst(), within: .seconds(60))
            try #require(result.status == 0, "postgres-env.sh \(arguments.joined(separator: " ")): \(result.stderr)")
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let admin = try await pg("start")
        do {
            try await Self.restarts(admin: admin, pool: pool, folder: folder, pg: { try await pg($0, $1) })
            _ = try? await pg("stop", "immediate")
        } catch {
            _ = try? await pg("stop", "immediate")
            throw error
        }
    }

    static func restarts(admin: String, pool: Int, folder: URL, pg: (String, String) async throws -> String) async throws {
        // A statement waits 2 s for a connection and may take 2 s; unanswered work loses its connection 2 s later.
        let (connect, query, grace) = (2.0, 2.0, 2.0)
        let bound = connect + query + grace
        let database = admin + "?pool=\(pool)&connect_timeout=\(Int(connect))&query_timeout=\(Int(query))"
        let (server, base) = try await FaultSuiteTests.serve(FaultSuiteTests.appYAML(database: database, server: "shutdownTimeout: 5"), in: folder)
        do {
            let load = Load(base, prefix: "p\(pool)")
            func pause(_ seconds: Double) async throws { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }
            try await pause(1)
            // Stopped (sessions told, 57P01) for longer than a lease may wait, then started: three times.
            for _ in 0..<3 {
                try await pg("stop", "fast")
                try await pause(3)
                try await pg("restart", "")
                try await pause(2)
            }
            // Stopped at once (sessions just drop, in-flight transactions with them), and stopped again while the
            // pool is still making its connections.
            try await pg("stop", "immediate")
            try await pause(3)
            try await pg("restart", "")
            try await pause(0.2)
            try await pg("stop", "immediate")
            try await pause(1)
            try await pg("restart", "")
            try await pause(2)
            // Its sessions killed under it, twice in a row.
            try await pg("terminate", "")
            try await pause(0.3)
            try await pg("terminate", "")
            try await pause(2)
            let outcomes = await load.stop()

            // A crash's first lines say where (the backtrace after them is long).
            let crash = server.standardError.split(separator: "\n")
                .filter { $0.contains("Precondition") || $0.contains("Fatal error") || $0.contains("crashed") || $0.contains("ConnectionPool") }
                .prefix(12).joined(separator: "\n")
            #expect(server.isRunning, "the server died:\n\(crash)")
            var acknowledged: [String] = []
            for (email, outcome) in outcomes {
                #expect(outcome.status != nil, "no answer for \(email) after \(outcome.seconds) s: \(outcome.body)")
                #expect(outcome.status != 500, "500 for \(email): \(outcome.body)")
                #expect(outcome.seconds < 2 * bound, "\(email) took \(outcome.seconds) s")
                if outcome.status == 201 { acknowledged.append(email) }
                if outcome.status == 503 {
                    #expect(outcome.retryAfter != nil, "503 without Retry-After")
                    #expect(outcome.body.contains("MaintenanceInProgress"), "\(outcome.body)")
                }
            }
            #expect(outcomes.contains { $0.outcome.status == 503 }, "nothing noticed the outages")
            #expect(acknowledged.count > 20, "only \(acknowledged.count) registrations succeeded")

            // It serves again within seconds of the database's return, without a restart.
            let back = ContinuousClock.now
            try await waitFor("registrations succeed again", limit: 15) {
                await FaultSuiteTests.request(
                    "\(base)/api/client/v2.0/app/fault-app/auth/providers/local-userpass/register", method: "POST",
                    json: #"{"email":"back-\#(UUID().uuidString)@example.com","password":"correct horse"}"#
                ).status == 201
            }
            #expect(FaultSuiteTests.seconds(since: back) < 10)
            try await waitFor("ready", limit: 15) { await FaultSuiteTests.request("\(base)/readyz").status == 200 }

            // Nothing acknowledged was lost: every account that got 201 logs in (six at a time).
            let written = acknowledged
            let missing = await withTaskGroup(of: [String].self) { group in
                for lane in 0..<6 {
                    group.addTask {
                        var missing: [String] = []
                        for email in written.enumerated().filter({ $0.offset % 6 == lane }).map(\.element) {
                            let login = await FaultSuiteTests.request(
                                "\(base)/api/client/v2.0/app/fault-app/auth/providers/local-userpass/login", method: "POST",
                                json: #"{"username":"\#(email)","password":"correct horse"}"#
                            )
                            if login.status != 200 { missing.append("\(email): \(login.status ?? 0) \(login.body.prefix(200))") }
                        }
                        return missing
                    }
                }
                return await group.reduce(into: []) { $0 += $1 }
            }
            #expect(missing.isEmpty, "acknowledged and gone: \(missing.prefix(5))")
            #expect(!server.standardError.contains("unexpected error"), "\(server.standardError.suffix(2000))")

            server.signal(SIGTERM)
            #expect(try await server.waitForExit(within: .seconds(5 + 5 + 10)) == 0)
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }
}
