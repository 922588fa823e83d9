import CoreMetrics
import GatehouseArgon2
import GatehouseDomain
@testable import GatehouseServer
import NIOConcurrencyHelpers
import NIOPosix
import Testing

/// The hashing threads' queue: a hash whose caller gave up while it waited for a thread (a client gone) is not run.
struct HashQueueTests {
    @Test func aHashCancelledWhileItWaitsForAThreadIsNotRun() async throws {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let timers = CountingTimers()
        let hasher = Argon2PasswordHasher(pool: pool, metrics: .hashing(timers))
        let small = Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
        // The pool's one thread is held, so that the hash waits.
        let held = NIOLockedValueBox(true)
        pool.submit { _ in while held.withLockedValue({ $0 }) { sched_yield() } }
        let given = Task { try await hasher.hash("password", parameters: small) }
        given.cancel()
        held.withLockedValue { $0 = false }
        await #expect(throws: CancellationError.self) { try await given.value }
        #expect(timers.recorded(GatehouseMetrics.hashDuration) == 0, "not run")
        // The control: a hash nobody cancels runs, and is counted.
        _ = try await hasher.hash("password", parameters: small)
        #expect(timers.recorded(GatehouseMetrics.hashDuration) == 1)
        try await pool.shutdownGracefully()
    }
}

/// A metrics factory that counts the values each timer recorded, and keeps nothing else.
private final class CountingTimers: MetricsFactory, Sendable {
    private let counts = NIOLockedValueBox<[String: Int]>([:])

    func recorded(_ label: String) -> Int { counts.withLockedValue { $0[label, default: 0] } }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Timer(label: label, counts: counts) }
    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { NOOPMetricsHandler.instance }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    private final class Timer: TimerHandler, Sendable {
        let label: String
        let counts: NIOLockedValueBox<[String: Int]>
        init(label: String, counts: NIOLockedValueBox<[String: Int]>) { (self.label, self.counts) = (label, counts) }
        func recordNanoseconds(_ duration: Int64) { counts.withLockedValue { $0[label, default: 0] += 1 } }
    }
}
