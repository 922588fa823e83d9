import Foundation
import GatehouseDomain
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// Whether the server has reached its database yet. A server started with the database down
/// (``AuthServer/open(configuration:clock:logger:waitForDatabase:retry:)`` with `waitForDatabase`) listens at once,
/// answers `/healthz`, reports not-ready on `/readyz`, answers every other route 503, and keeps trying; once the
/// migrations ran and the signing keys are loaded it serves normally. (A database lost later is another matter:
/// requests answer 503 while it is gone and the connection pool reconnects by itself.)
final class DatabaseReadiness: Sendable {
    private let state: NIOLockedValueBox<(ready: Bool, reason: String)>

    init(ready: Bool, reason: String = "") { state = NIOLockedValueBox((ready, reason)) }

    var isReady: Bool { state.withLockedValue { $0.ready } }
    /// Why not ready yet (the last connection error), for `/readyz` and the log.
    var reason: String { state.withLockedValue { $0.reason } }

    func waiting(because reason: String) { state.withLockedValue { $0 = (false, reason) } }
    func ready() { state.withLockedValue { $0 = (true, "") } }
}

/// Delays between attempts to reach the database at start: doubling from `initial` up to `maximum` seconds.
public struct RetrySchedule: Sendable, Hashable {
    public var initial: TimeInterval
    public var maximum: TimeInterval
    public init(initial: TimeInterval = 1, maximum: TimeInterval = 30) {
        self.initial = initial
        self.maximum = maximum
    }

    func delay(attempt: Int) -> TimeInterval { min(maximum, initial * pow(2, Double(min(attempt, 30)))) }
}

/// Retries the start-up work until the database answers, then runs the services that need it.
struct DatabaseWaiter: Service {
    let readiness: DatabaseReadiness
    let schedule: RetrySchedule
    let logger: Logger
    /// Migrations and signing keys.
    let initialize: @Sendable () async throws -> Void
    /// Services to run once ready (the outbox delivery).
    let then: [any Service]

    func run() async throws {
        var attempt = 0
        while !readiness.isReady {
            let delay = schedule.delay(attempt: attempt)
            logger.error(
                "the database is unreachable; retrying",
                metadata: ["reason": "\(readiness.reason)", "retry_in_seconds": "\(delay)"]
            )
            // A shutdown (SIGTERM) while waiting ends the wait, and with it the service.
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(Int64(delay * 1000))) }
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            attempt += 1
            do {
                try await initialize()
                readiness.ready()
                logger.notice("the database is reachable; ready")
            } catch StoreError.unavailable(let reason) {
                readiness.waiting(because: reason)
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for service in then { group.addTask { try await service.run() } }
            try await group.waitForAll()
        }
    }
}

/// While the database has not been reached, every route but `/healthz` and `/readyz` answers 503.
struct ReadinessMiddleware<Context: RequestContext>: RouterMiddleware {
    let readiness: DatabaseReadiness

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if !readiness.isReady, request.uri.path != "/healthz", request.uri.path != "/readyz",
            request.uri.path != "/metrics"
        {
            throw StoreError.unavailable("starting: the database has not been reached yet")
        }
        return try await next(request, context)
    }
}

/// `/readyz`'s check of a reachable database: a committed write (``SQLStore/probeWrite()``), so that a database that
/// answers reads but refuses writes (a full disk, a read-only server) is not called ready. It answers within
/// ``deadline`` whatever the database does; one probe runs at a time, and its result serves every check for a second
/// after it ends, so that a flood of `/readyz` requests does not become a flood of writes.
final class ReadinessProbe: Sendable {
    /// How long `/readyz` waits for the probe before it answers 503.
    static let deadline: Duration = .seconds(3)
    private static let reuse: Duration = .seconds(1)

    private struct State {
        var probe: Task<String?, Never>?
        var endedAt: ContinuousClock.Instant?
    }
    private let state = NIOLockedValueBox(State())
    private let write: @Sendable () async throws -> Void

    init(write: @escaping @Sendable () async throws -> Void) { self.write = write }

    /// Nil when the database took the write; else why not, for the answer and the log.
    func check() async -> String? {
        let probe = state.withLockedValue { state -> Task<String?, Never> in
            if let probe = state.probe, state.endedAt.map({ ContinuousClock.now - $0 < Self.reuse }) ?? true { return probe }
            let probe = Task { [write, state = self.state] () -> String? in
                let outcome: String?
                do {
                    try await write()
                    outcome = nil
                } catch StoreError.unavailable(let reason), StoreError.outcomeUnknown(let reason) {
                    outcome = "the database refused a write: \(reason.prefix(300))"
                } catch {
                    outcome = "the database refused a write: \(String(describing: error).prefix(300))"
                }
                state.withLockedValue { $0.endedAt = .now }
                return outcome
            }
            state = State(probe: probe, endedAt: nil)
            return probe
        }
        // Whichever comes first: the probe's answer or the deadline (the probe goes on; the next check may reuse it).
        return await withCheckedContinuation { continuation in
            let answered = NIOLockedValueBox(false)
            let answer: @Sendable (String?) -> Void = { value in
                if answered.withLockedValue({ done in defer { done = true }; return !done }) { continuation.resume(returning: value) }
            }
            Task { answer(await probe.value) }
            Task {
                try? await Task.sleep(for: Self.deadline)
                answer("the database did not answer within \(Self.deadline)")
            }
        }
    }
}
