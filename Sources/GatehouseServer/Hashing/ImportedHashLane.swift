import Foundation
import GatehouseDomain
import NIOConcurrencyHelpers

/// Where imported password hashes are verified: one at a time, on a thread of the lane's own, with at most
/// ``queueLimit`` more waiting. A hash another system made (or Gatehouse's own form with other parameters than the
/// app's, as an export file may bring) can cost up to ``HashCostBudget/maxWork``, some thirty ordinary logins'
/// worth: run on the blocking pool, two of them would hold both its threads while every ordinary login and
/// registration waited. Here they hold this lane only.
///
/// A full lane answers as a busy server does (as a request that gets no database connection in time):
/// ``StoreError/unavailable(_:)``, which every façade answers with 503 and `Retry-After`. A caller that stops waiting
/// (its request is cancelled, at a client's disconnect or the server's shutdown) is answered at once: a job not started
/// leaves the queue, and a running one is asked to stop (Argon2 and bcrypt stop at their next pass or round; PBKDF2 and
/// scrypt, within the budget, run out). The lane's thread lives while there is work and ends after it, so nothing
/// is left to shut down and the process never waits for it.
final class ImportedHashLane: Sendable {
    /// How many verifications may wait while one runs: at the budget's second each, a login waits up to this many
    /// seconds before its own starts.
    static let defaultQueueLimit = 8

    let queueLimit: Int
    /// For tests: runs on the lane's thread before each job, so that a test can hold the lane busy with a latch.
    private let beforeEach: (@Sendable () -> Void)?

    /// One caller's work: its cancellation flag and its body, which computes and answers the caller.
    private final class Job: Sendable {
        let cancelled = NIOLockedValueBox(false)
        let body: @Sendable (_ isCancelled: @Sendable () -> Bool) -> Void

        init(_ body: @escaping @Sendable (_ isCancelled: @Sendable () -> Bool) -> Void) { self.body = body }

        var isCancelled: Bool { cancelled.withLockedValue { $0 } }
    }

    private struct State {
        var running = false
        var waiting: [Job] = []
    }

    private let state = NIOLockedValueBox(State())

    init(queueLimit: Int = ImportedHashLane.defaultQueueLimit, beforeEach: (@Sendable () -> Void)? = nil) {
        self.queueLimit = queueLimit
        self.beforeEach = beforeEach
    }

    /// How many jobs are running (0 or 1) and waiting.
    var load: (running: Int, waiting: Int) { state.withLockedValue { ($0.running ? 1 : 0, $0.waiting.count) } }

    /// Runs `work` on the lane, giving it a check that answers true once the caller stopped waiting.
    ///
    /// - Throws: ``StoreError/unavailable(_:)`` when ``queueLimit`` jobs wait already; `CancellationError` when the
    ///   calling task is cancelled before the work ends; whatever `work` throws.
    func run<T: Sendable>(_ work: @escaping @Sendable (_ isCancelled: () -> Bool) throws -> T) async throws -> T {
        let answer = Answer<T>()
        let job = Job { isCancelled in answer.resume(Result { try work(isCancelled) }) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard answer.install(continuation) else { return }
                do {
                    try admit(job)
                } catch {
                    answer.resume(.failure(error))
                }
            }
        } onCancel: {
            job.cancelled.withLockedValue { $0 = true }
            state.withLockedValue { $0.waiting.removeAll { $0 === job } }
            answer.resume(.failure(CancellationError()))
        }
    }

    private func admit(_ job: Job) throws {
        let start = try state.withLockedValue { state -> Bool in
            if !state.running {
                state.running = true
                return true
            }
            guard state.waiting.count < queueLimit else {
                throw StoreError.unavailable("the server is busy: \(queueLimit) imported password hashes are waiting to be verified")
            }
            state.waiting.append(job)
            return false
        }
        if start { launch(job) }
    }

    /// Starts the lane's thread with `first`; it takes the waiting jobs in turn and ends when none is left.
    private func launch(_ first: Job) {
        let thread = Thread { [self] in
            var next: Job? = first
            while let job = next {
                if !job.isCancelled {
                    beforeEach?()
                    job.body { job.isCancelled }
                }
                next = state.withLockedValue { state in
                    guard !state.waiting.isEmpty else {
                        state.running = false
                        return nil
                    }
                    return state.waiting.removeFirst()
                }
            }
        }
        thread.name = "gatehouse-imported-hash"
        thread.start()
    }
}

/// A continuation answered once, by whichever comes first: the work's result or the caller's cancellation. The
/// cancellation may come before the continuation exists; ``install(_:)`` then answers it at once.
private final class Answer<T: Sendable>: Sendable {
    private let state = NIOLockedValueBox<(continuation: CheckedContinuation<T, any Error>?, early: Result<T, any Error>?, done: Bool)>(
        (nil, nil, false)
    )

    /// Keeps `continuation` for the answer; false (and `continuation` answered) when the answer came already.
    func install(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
        let early = state.withLockedValue { state -> Result<T, any Error>? in
            if let early = state.early {
                state.early = nil
                state.done = true
                return early
            }
            state.continuation = continuation
            return nil
        }
        guard let early else { return true }
        continuation.resume(with: early)
        return false
    }

    func resume(_ result: Result<T, any Error>) {
        let continuation = state.withLockedValue { state -> CheckedContinuation<T, any Error>? in
            guard !state.done else { return nil }
            guard let continuation = state.continuation else {
                if state.early == nil { state.early = result }
                return nil
            }
            state.continuation = nil
            state.done = true
            return continuation
        }
        continuation?.resume(with: result)
    }
}
