import Foundation
import GatehouseArgon2
import GatehouseDomain
import NIOConcurrencyHelpers
import NIOPosix
import ServiceLifecycle

/// Argon2id in PHC string form, on NIO's blocking thread pool.
final class Argon2PasswordHasher: PasswordHasher {
    private let pool: NIOThreadPool
    private let dummies = NIOLockedValueBox<[Argon2Parameters: String]>([:])
    private let metrics: QueuedWorkMetrics

    init(pool: NIOThreadPool = .singleton, metrics: QueuedWorkMetrics = .none) {
        self.pool = pool
        self.metrics = metrics
    }

    /// Runs `work` on the pool, measuring its wait for a thread and its run.
    private func onPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let (queued, metrics) = (ContinuousClock.now, metrics)
        return try await pool.runIfActive { try metrics.run(since: queued, work) }
    }

    /// The largest memory cost a stored hash may ask for: a tampered row must not make the server allocate
    /// gigabytes.
    static let maxMemoryKiB: UInt32 = 1_048_576

    /// Passwords are hashed in Unicode NFC, so that "é" typed as one code point or as e + accent is one password.
    private static func normalized(_ password: String) -> String { password.precomposedStringWithCanonicalMapping }

    func hash(_ password: String, parameters: Argon2Parameters) async throws -> String {
        let password = Self.normalized(password)
        return try await onPool { try Argon2.hashPHC(password: password, parameters: parameters) }
    }

    /// Verifies an Argon2id hash, or a ``ForeignPasswordHash`` an import brought (the password as typed, since the
    /// other system hashed it so); anything else is a wrong password.
    func verify(_ password: String, against hash: String) async throws -> Bool {
        // Gatehouse's own form first: every login but an imported user's first is this one, parsed once.
        if let stored = try? Argon2.parseParameters(phc: hash) {
            guard stored.memoryKiB <= Self.maxMemoryKiB else { return false }
            let password = Self.normalized(password)
            return try await onPool { (try? Argon2.verifyPHC(password: password, phc: hash)) ?? false }
        }
        guard let foreign = ForeignPasswordHash(hash) else { return false }
        return try await onPool { (try? foreign.verify(password)) ?? false }
    }

    /// True for a hash of other parameters, and for every foreign hash: the next successful login stores Argon2id.
    func needsRehash(_ hash: String, parameters: Argon2Parameters) -> Bool {
        guard let current = try? Argon2.parseParameters(phc: hash) else { return true }
        return current.memoryKiB != parameters.memoryKiB || current.iterations != parameters.iterations
            || current.parallelism != parameters.parallelism
    }

    func burnVerify(_ password: String, parameters: Argon2Parameters) async throws {
        let dummy: String
        if let cached = dummies.withLockedValue({ $0[parameters] }) {
            dummy = cached
        } else {
            dummy = try await hash(Secrets.token(), parameters: parameters)
            dummies.withLockedValue { $0[parameters] = dummy }
        }
        _ = try await verify(password, against: dummy)
    }

    /// Computes the dummy hash ahead of the first request, so that the first unknown login is not slower.
    func prepare(_ parameters: Argon2Parameters) async throws {
        try await burnVerify("", parameters: parameters)
    }
}

/// Gives Argon2's kept block matrix (m KiB) back to the system once hashing pauses: every `interval` it frees the
/// matrix if no hash started or finished during the previous interval, so an idle server holds no hashing memory.
struct HashMemoryTrimService: Service {
    var interval: Duration = .seconds(30)

    func run() async throws {
        // Its sleep ends at a graceful shutdown too, so that it never holds the server's exit back.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                Argon2.releaseIdleMemory()
            }
        }
    }
}
