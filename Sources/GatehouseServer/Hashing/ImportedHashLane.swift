import Foundation
import GatehouseDomain
import NIOConcurrencyHelpers

/// Where imported password hashes are verified: one at a time, on a thread of the lane's own. A hash another system
/// made (or Gatehouse's own form with other parameters than the app's, as an export file may bring) can cost up to
/// ``HashCostBudget/maxWork``, some thirty ordinary logins' worth: run on the blocking pool, two of them would hold
/// both its threads while every ordinary login and registration waited. Here they hold this lane only.
///
/// **Fair turns.** Every imported user shares the lane, so a login waiting here must not be kept out by logins others
/// send: an attacker who knows a few imported addresses, or who guesses one account's password from many networks,
/// must not be able to fill the lane and have the owner's right password answered "busy". Each job is named by its
/// account and its client's network (``PasswordCheck``), and the line keeps three rules:
///
/// - *Accounts take turns.* The accounts with a job waiting form a ring. The lane runs the oldest waiting job of the
///   account whose turn it is; that account, if it has more waiting, goes to the back of the ring, and an account new
///   to the line joins at the back. However many jobs one account has waiting, each other account's next job waits
///   for at most one of them.
/// - *An account's jobs run in the order they came*: a later login to the same account never overtakes an earlier one.
/// - *One waiting job per network* (``RequestOrigin/network``: an IPv4 address, an IPv6 /64). A newer job from a
///   network that has one waiting takes its place (the same place when it is for the same account), and the older is
///   answered as a busy server answers, ``StoreError/unavailable(_:)`` (503 with `Retry-After`): one client holds at
///   most one place, and a client's retry (the right password after a typo) does not wait behind its own stale try. A
///   job that runs is no longer waiting; a job with no network (no request: the command line, tests) holds no place.
///
/// Nothing else is refused: no count of jobs waiting fills the lane. The line holds at most one job per network, each
/// a request the server holds open (at most `server.maxConnections` at once), and only logins to imported hashes come
/// here (an unknown address costs a dummy hash of the app's own parameters, never this lane).
///
/// **The bound.** Before a job starts, the lane runs the job running when it came and at most `a + 1` rounds (the
/// job itself ends the last), where `a` is the number of its account's jobs waiting when it came and a round is one job
/// of each account with one waiting. So the owner of an account no one else is trying (`a` = 0) waits for at most one
/// verification of each other account that had a job waiting when the owner came, however many networks or requests
/// are behind those, and nothing that comes later adds to it (a later job from a network with one waiting only takes
/// that one's place). The owner of an account others are guessing from many networks waits one more round for each
/// guess at it that came first (each such guess spent its network's free attempts in the login delays,
/// ``LoginBackoff``, counted before the job reached the lane), never for one that came later, and is never answered
/// busy for them.
///
/// A caller that stops waiting (its request is cancelled, at a client's disconnect or the server's shutdown) is
/// answered at once: a job not started leaves the line, and a running one is asked to stop (Argon2 and bcrypt stop at
/// their next pass or round; PBKDF2 and scrypt, within the budget, run out). The lane's thread lives while there is
/// work and ends after it, so nothing is left to shut down and the process never waits for it.
final class ImportedHashLane: Sendable {
    /// For tests: runs on the lane's thread before each job, with the job's account and client, so that a test can
    /// hold the lane busy with a latch and see the order jobs run in. Settable, for the lane of a running server.
    var beforeEach: (@Sendable (PasswordCheck?) -> Void)? {
        get { hook.withLockedValue { $0 } }
        set { hook.withLockedValue { $0 = newValue } }
    }
    private let hook: NIOLockedValueBox<(@Sendable (PasswordCheck?) -> Void)?>

    /// One caller's work: whose it is, its cancellation flag, its body (which computes and answers the caller) and how
    /// to answer the caller without running it.
    private final class Job: Sendable {
        let cancelled = NIOLockedValueBox(false)
        let check: PasswordCheck?
        /// The ring's key: the check's account, or one of the job's own when it names none.
        let account: String
        let body: @Sendable (_ isCancelled: @Sendable () -> Bool) -> Void
        let refuse: @Sendable (any Error) -> Void

        init(
            _ check: PasswordCheck?, body: @escaping @Sendable (_ isCancelled: @Sendable () -> Bool) -> Void,
            refuse: @escaping @Sendable (any Error) -> Void
        ) {
            self.check = check
            account = check?.account ?? "job:\(UUID().uuidString)"
            self.body = body
            self.refuse = refuse
        }

        var network: String? { check?.network }
        var isCancelled: Bool { cancelled.withLockedValue { $0 } }
    }

    private struct State {
        var running = false
        /// The accounts with a job waiting, in the order of their turns.
        var turns: [String] = []
        /// Each account's waiting jobs, oldest first.
        var lines: [String: [Job]] = [:]
        /// Each network's waiting job.
        var places: [String: Job] = [:]

        /// Puts `job` at the end of its account's line (its account at the back of the ring if new to it).
        mutating func enqueue(_ job: Job) {
            if lines[job.account] == nil {
                turns.append(job.account)
                lines[job.account] = [job]
            } else {
                lines[job.account]!.append(job)
            }
            if let network = job.network { places[network] = job }
        }

        /// Takes `job` out of the line, if it waits there.
        mutating func remove(_ job: Job) {
            guard var line = lines[job.account], let index = line.firstIndex(where: { $0 === job }) else { return }
            line.remove(at: index)
            if line.isEmpty {
                lines[job.account] = nil
                turns.removeAll { $0 == job.account }
            } else {
                lines[job.account] = line
            }
            if let network = job.network, places[network] === job { places[network] = nil }
        }

        /// The next job to run: the oldest of the account whose turn it is, which then goes to the back of the ring
        /// if it has more. Nil, and the lane idle, when none waits.
        mutating func next() -> Job? {
            guard !turns.isEmpty else {
                running = false
                return nil
            }
            let account = turns.removeFirst()
            var line = lines[account] ?? []
            let job = line.removeFirst()
            if line.isEmpty {
                lines[account] = nil
            } else {
                lines[account] = line
                turns.append(account)
            }
            if let network = job.network, places[network] === job { places[network] = nil }
            return job
        }
    }

    private let state = NIOLockedValueBox(State())

    init(beforeEach: (@Sendable (PasswordCheck?) -> Void)? = nil) {
        hook = NIOLockedValueBox(beforeEach)
    }

    /// How many jobs are running (0 or 1) and waiting.
    var load: (running: Int, waiting: Int) {
        state.withLockedValue { ($0.running ? 1 : 0, $0.lines.values.reduce(0) { $0 + $1.count }) }
    }

    /// Runs `work` on the lane in the turn of `check`'s account and network (see the type's rules), giving it a check
    /// that answers true once the caller stopped waiting.
    ///
    /// - Throws: ``StoreError/unavailable(_:)`` when a newer job from the same network takes this one's place before it
    ///   starts; `CancellationError` when the calling task is cancelled before the work ends; whatever `work` throws.
    func run<T: Sendable>(for check: PasswordCheck? = nil, _ work: @escaping @Sendable (_ isCancelled: () -> Bool) throws -> T) async throws -> T {
        let answer = Answer<T>()
        let job = Job(check, body: { isCancelled in answer.resume(Result { try work(isCancelled) }) }, refuse: { answer.resume(.failure($0)) })
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard answer.install(continuation) else { return }
                admit(job)
            }
        } onCancel: {
            job.cancelled.withLockedValue { $0 = true }
            state.withLockedValue { $0.remove(job) }
            answer.resume(.failure(CancellationError()))
        }
    }

    private func admit(_ job: Job) {
        let (start, displaced) = state.withLockedValue { state -> (Bool, Job?) in
            // Its caller stopped waiting before it came in (the cancellation found nothing to take out).
            if job.isCancelled { return (false, nil) }
            if !state.running {
                state.running = true
                return (true, nil)
            }
            guard let network = job.network, let older = state.places[network] else {
                state.enqueue(job)
                return (false, nil)
            }
            if older.account == job.account, let index = state.lines[job.account]?.firstIndex(where: { $0 === older }) {
                // The same account: the newer job waits where the older did.
                state.lines[job.account]![index] = job
                state.places[network] = job
            } else {
                state.remove(older)
                state.enqueue(job)
            }
            return (false, older)
        }
        if let displaced {
            displaced.cancelled.withLockedValue { $0 = true }
            displaced.refuse(StoreError.unavailable("the server is busy: a newer login from the same client took this imported password hash's turn"))
        }
        if start { launch(job) }
    }

    /// Starts the lane's thread with `first`; it takes the waiting jobs in turn and ends when none is left.
    private func launch(_ first: Job) {
        let thread = Thread { [self] in
            var next: Job? = first
            while let job = next {
                if !job.isCancelled {
                    beforeEach?(job.check)
                    job.body { job.isCancelled }
                }
                next = state.withLockedValue { $0.next() }
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
