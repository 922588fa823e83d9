import GatehouseArgon2
import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import GatehouseTestSupport
import CoreMetrics
import NIOConcurrencyHelpers
import NIOPosix
import Testing

/// Passwords are compared in Unicode NFC: the same characters typed as composed or decomposed code points match.
@Suite struct PasswordNormalizationTests {
    @Test func composedAndDecomposedPasswordsMatch() async throws {
        try await withGatehouse { _, client in
            let decomposed = "cafe\u{301} au lait"  // e + combining acute
            let composed = "caf\u{E9} au lait"
            #expect(decomposed.unicodeScalars.count != composed.unicodeScalars.count)
            _ = try await client.signUp("nfc@example.com", decomposed)
            #expect(try await client.login("nfc@example.com", composed).status == .ok)
            #expect(try await client.login("nfc@example.com", "cafe au lait").status == .unauthorized)
        }
    }

    @Test func aStoredHashAskingForHugeMemoryIsRefusedWithoutHashing() async throws {
        // A hasher whose thread pool never started: any hash it tried would fail with the pool's error.
        let idle = NIOThreadPool(numberOfThreads: 1)
        let hasher = Argon2PasswordHasher(pool: idle)
        let tampered = "$argon2id$v=19$m=4000000000,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"
        #expect(try await hasher.verify("anything", against: tampered) == false)
        // The control: a hash within the limit is computed, on the pool, which throws here.
        let fine = try Argon2.hashPHC(password: "anything", parameters: Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1))
        await #expect(throws: (any Error).self) { try await hasher.verify("anything", against: fine) }
    }
}

enum Argon2ParametersForTests {
    static let stronger = Argon2Parameters(memoryKiB: 128, iterations: 2, parallelism: 1)
}

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
