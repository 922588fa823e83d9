import Foundation
import GatehouseArgon2
import GatehouseDomain
import NIOConcurrencyHelpers
import NIOPosix
import ServiceLifecycle

/// Argon2id in PHC string form, on NIO's blocking thread pool; imported hashes on a lane of their own.
final class Argon2PasswordHasher: PasswordHasher {
    private let pool: NIOThreadPool
    /// Where hashes costlier than an ordinary login's are verified (``ImportedHashLane``).
    let importedLane: ImportedHashLane
    private let dummies = NIOLockedValueBox<[Argon2Parameters: String]>([:])
    private let metrics: QueuedWorkMetrics

    init(pool: NIOThreadPool = .singleton, importedLane: ImportedHashLane = ImportedHashLane(), metrics: QueuedWorkMetrics = .none) {
        self.pool = pool
        self.importedLane = importedLane
        self.metrics = metrics
    }

    /// Runs `work` on the pool, measuring its wait for a thread and its run, and resumes the caller on the event loop
    /// it asked from. When the calling task is cancelled (a client gone, the server shutting down), `work`'s check
    /// answers true, and Argon2 stops at its next segment.
    private func onPool<T: Sendable>(_ work: @escaping @Sendable (_ isCancelled: () -> Bool) throws -> T) async throws -> T {
        let (queued, metrics) = (ContinuousClock.now, metrics)
        let cancelled = NIOLockedValueBox(false)
        return try await withTaskCancellationHandler {
            try await pool.run {
                // Cancelled while it waited for a thread: not run at all.
                if cancelled.withLockedValue({ $0 }) { throw CancellationError() }
                return try metrics.run(since: queued) { try work { cancelled.withLockedValue { $0 } } }
            }
        } onCancel: {
            cancelled.withLockedValue { $0 = true }
        }
    }

    /// ``onPool(_:)`` on the imported-hash lane, in the turn of `check`'s account and client.
    private func onLane<T: Sendable>(
        _ check: PasswordCheck?, _ work: @escaping @Sendable (_ isCancelled: () -> Bool) throws -> T
    ) async throws -> T {
        let (queued, metrics) = (ContinuousClock.now, metrics)
        return try await importedLane.run(for: check) { isCancelled in try metrics.run(since: queued) { try work(isCancelled) } }
    }

    /// The largest memory cost a stored hash may ask for: a tampered row must not make the server allocate
    /// gigabytes.
    static let maxMemoryKiB: UInt32 = 1_048_576

    /// Passwords are hashed in Unicode NFC, so that "é" typed as one code point or as e + accent is one password.
    private static func normalized(_ password: String) -> String { password.precomposedStringWithCanonicalMapping }

    func hash(_ password: String, parameters: Argon2Parameters) async throws -> String {
        let password = Self.normalized(password)
        return try await onPool { isCancelled in try Argon2.hashPHC(password: password, parameters: parameters, isCancelled: isCancelled) }
    }

    /// A verification's answer, with cancellation passed on: any other error (a hash that turned out malformed) is a
    /// wrong password.
    private static func answer(_ verify: () throws -> Bool) throws -> Bool {
        do {
            return try verify()
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            return false
        }
    }

    /// Verifies Gatehouse's Argon2id, or a ``ForeignPasswordHash`` an import brought (the password as typed, since the
    /// other system hashed it so), as ``HashCostBudget/assess(_:ownParameters:)`` decides: a hash no costlier than the
    /// app's own (`parameters`) on the pool, a costlier one within the budget on ``importedLane``, anything else (a
    /// form no login reads, a hash over the budget) is a wrong password and is not run.
    ///
    /// - Throws: ``StoreError/unavailable(_:)`` when the lane gives this verification's place to a newer one from its
    ///   client (see ``ImportedHashLane``); `CancellationError`.
    func verify(_ password: String, against hash: String, parameters: Argon2Parameters = .owasp) async throws -> Bool {
        try await verify(password, against: hash, parameters: parameters, check: nil)
    }

    /// ``verify(_:against:parameters:)``, an imported hash waiting in the lane as `check`'s account and client.
    func verify(_ password: String, against hash: String, parameters: Argon2Parameters, for check: PasswordCheck) async throws -> Bool {
        try await verify(password, against: hash, parameters: parameters, check: check)
    }

    private func verify(_ password: String, against hash: String, parameters: Argon2Parameters, check: PasswordCheck?) async throws -> Bool {
        switch HashCostBudget.assess(hash, ownParameters: parameters) {
        case .own:
            // Every login but an imported user's first is this one.
            let password = Self.normalized(password)
            return try await onPool { isCancelled in try Self.answer { try Argon2.verifyPHC(password: password, phc: hash, isCancelled: isCancelled) } }
        case .imported(.argon2id(let phc), _):
            let password = Self.normalized(password)
            return try await onLane(check) { isCancelled in try Self.answer { try Argon2.verifyPHC(password: password, phc: phc, isCancelled: isCancelled) } }
        case .imported(.foreign(let foreign), _):
            return try await onLane(check) { isCancelled in try Self.answer { try foreign.verify(password, isCancelled: isCancelled) } }
        case .refused:
            return false
        }
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
        _ = try await verify(password, against: dummy, parameters: parameters)
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
