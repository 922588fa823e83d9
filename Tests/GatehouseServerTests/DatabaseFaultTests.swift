import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// The database down at start, and lost mid-run. PostgreSQL only: the database sits behind a TCP forwarder
/// (`Tests/Tools/tcp_proxy.py`) that the test starts and kills.
///
/// Off unless `GATEHOUSE_FAULT_TESTS=1`: in clean-clone runs it sometimes never ends after the proxy is killed (the
/// test process keeps a connection to the dead proxy in CLOSE-WAIT and something awaits for ever, even with the
/// deadline on leased work); the cause is not found yet. A hang here would stop every CI run, so it runs by hand
/// (`GATEHOUSE_FAULT_TESTS=1 swift test --filter DatabaseFaultTests`). The same faults and more are covered in CI by
/// ``FaultSuiteTests``, which runs `gatehouse serve` as a process against a PostgreSQL cluster of its own.
@Suite(
    .serialized, .enabled(if: TestDatabase.postgresAdmin != nil, "needs GATEHOUSE_TEST_POSTGRES_URL"),
    .enabled(if: ProcessInfo.processInfo.environment["GATEHOUSE_FAULT_TESTS"] == "1", "hangs intermittently: set GATEHOUSE_FAULT_TESTS=1")
)
struct DatabaseFaultTests {
    @Test func startedWithTheDatabaseDownItWaitsThenServesAndRidesOutAnOutage() async throws {
        let (url, drop) = try await TestDatabase.fresh(.sqliteMemory)
        guard case .postgres(var settings) = url else { throw SMTPTestSetupError(description: "needs PostgreSQL") }
        let target = (host: settings.host, port: settings.port)
        settings.port = try freePort()
        settings.connectTimeout = 2
        let proxyPort = settings.port
        let configuration = testConfiguration(database: .postgres(settings))
        let gatehouse = try await AuthServer.open(
            configuration: configuration, logger: quietLogger, waitForDatabase: true, retry: RetrySchedule(initial: 0.05, maximum: 0.5)
        )
        do {
            #expect(!gatehouse.isReady)
            try await gatehouse.makeApplication().test(.live) { client in
                // Down at start: alive, not ready, every other route 503 in its envelope.
                #expect(try await client.call("/healthz", .get).status == .ok)
                let starting = try await client.call("/readyz", .get)
                #expect(starting.status == .serviceUnavailable)
                #expect(starting.text.contains("starting"))
                let early = try await client.register("ann@example.com")
                #expect(early.status == .serviceUnavailable)
                #expect(early.error?.errorCode == .maintenanceInProgress)

                // The database comes up: the server finds it by itself.
                var proxy = try await TCPProxy.start(port: proxyPort, target: target)
                // postgres-nio's pool retries a failed connection after 0.1 s × 1.25ⁿ, up to a minute: on a busy machine,
                // where the outage lasts longer, finding the database again can take most of that.
                try await waitFor("ready", limit: 90) { try await client.call("/readyz", .get).status == .ok }
                #expect(try await client.register("ann@example.com").status == .created)

                // It goes away mid-run: requests answer 503 and write nothing; readiness says so.
                await proxy.stop()
                let lost = try await client.register("ben@example.com")
                #expect(lost.status == .serviceUnavailable)
                #expect(lost.error?.errorCode == .maintenanceInProgress)
                #expect(try await client.call("/readyz", .get).status == .serviceUnavailable)

                // It comes back: the same server serves again, and nothing of the failed request was written.
                proxy = try await TCPProxy.start(port: proxyPort, target: target)
                do {
                    try await waitFor("recovered", limit: 90) { try await client.call("/readyz", .get).status == .ok }
                    #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ben@example.com") == nil)
                    #expect(try await client.register("ben@example.com").status == .created)
                    // Ann's account from before the outage is still there: registering again replaces her pending one.
                    let ann = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ann@example.com"))
                    #expect(try await client.register("ann@example.com").status == .created)
                    #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ann@example.com")?.userId == ann.userId)
                } catch {
                    await proxy.stop()
                    throw error
                }
                await proxy.stop()
            }
            try await gatehouse.close()
            await drop()
        } catch {
            // Closed on every path: a server dropped unclosed traps in its HTTP client's deinit, taking the run down.
            try? await gatehouse.close()
            await drop()
            throw error
        }
    }
}

/// Polls `condition` until it holds (at most `limit` seconds): for events that happen on their own, never for expiry.
/// `/readyz` answering ready. Its probe writes to the database and `/readyz` answers within 3 s whatever the
/// database does, so on a busy machine (the whole suite at once on PostgreSQL) the first check may answer 503 while
/// the probe goes on; a later one reuses its result. Any answer but ready must be that 503.
@discardableResult
func expectReady(_ client: some TestClientProtocol, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Reply {
    let deadline = ContinuousClock.now + .seconds(60)
    while true {
        let reply = try await client.call("/readyz", .get)
        if reply.status == .ok || ContinuousClock.now >= deadline {
            #expect(reply.status == .ok, "\(reply.text)", sourceLocation: sourceLocation)
            return reply
        }
        #expect(reply.status == .serviceUnavailable, "\(reply.text)", sourceLocation: sourceLocation)
        try await Task.sleep(for: .milliseconds(200))
    }
}

func waitFor(_ what: String, limit: Int = 30, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(limit)
    while ContinuousClock.now < deadline {
        if (try? await condition()) == true { return }
        try await Task.sleep(for: .milliseconds(100))
    }
    throw SMTPTestSetupError(description: "not \(what) after \(limit) s")
}

/// `Tests/Tools/tcp_proxy.py` forwarding 127.0.0.1:`port` to the database.
struct TCPProxy {
    let child: ChildProcess

    static func start(port: Int, target: (host: String, port: Int)) async throws -> TCPProxy {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tools/tcp_proxy.py").path
        let child = try ChildProcess(URL(fileURLWithPath: try SMTPTestServer.python), ["-u", script, String(port), target.host, String(target.port)], holdingInputOpen: true)
        do {
            // "listening" once it accepts connections.
            _ = try await child.waitForOutput("listening", within: .seconds(30))
        } catch {
            await child.stop()
            throw error
        }
        return TCPProxy(child: child)
    }

    /// Kills it and waits until it is gone: every connection through it has dropped.
    func stop() async {
        await child.stop()
    }
}
