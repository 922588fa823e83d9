import CoreMetrics
import Foundation
import GatehouseDomain
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Prometheus

#if canImport(Glibc)
import Glibc  // clock_gettime and timespec, named where they are used
import CDispatch  // which may own the C `timespec` Glibc declares too, depending on which module the compiler read first
#endif

/// One server's metrics: a Prometheus registry of its own, fed through swift-metrics' API with a factory over it.
///
/// No `MetricsSystem.bootstrap`: an ``AuthServer`` is a library too, and a process may open many (the tests do) or
/// bootstrap swift-metrics for its own purposes; each server's `/metrics` shows what that server measured. Metrics
/// that libraries report to the global `MetricsSystem` are not in it. With `server.metrics.enabled` false the
/// factory is swift-metrics' no-op one and nothing is kept.
final class GatehouseMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let factory: any MetricsFactory
    let enabled: Bool
    /// What the databases, the hasher and the outbox record (made at start, so that a scrape shows them at zero).
    let database: QueuedWorkMetrics
    let hashing: QueuedWorkMetrics
    let outboxPending: CoreMetrics.Gauge
    let outboxSent: CoreMetrics.Counter
    let outboxRetrying: CoreMetrics.Counter
    let outboxFailed: CoreMetrics.Counter

    static let requestsTotal = "gatehouse_http_requests_total"
    static let requestDuration = "gatehouse_http_request_duration_seconds"

    init(enabled: Bool) {
        self.enabled = enabled
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        if enabled {
            var factory = PrometheusMetricsFactory(registry: registry)
            // Statements and hash waits are short: finer buckets at the low end.
            let fine: [Duration] = [
                .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
                .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
                .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
            ]
            for name in [Self.databaseWait, Self.databaseStatement, Self.hashWait, Self.hashDuration] {
                factory.durationHistogramBuckets[name] = fine
            }
            self.factory = CachingMetricsFactory(factory)
        } else {
            self.factory = NOOPMetricsHandler.instance
        }
        database = .database(factory)
        hashing = .hashing(factory)
        outboxPending = CoreMetrics.Gauge(label: Self.outboxPendingName, factory: factory)
        outboxSent = CoreMetrics.Counter(label: Self.outboxSentName, factory: factory)
        outboxRetrying = CoreMetrics.Counter(label: Self.outboxFailuresName, dimensions: [("outcome", "retrying")], factory: factory)
        outboxFailed = CoreMetrics.Counter(label: Self.outboxFailuresName, dimensions: [("outcome", "failed")], factory: factory)
    }

    /// The Prometheus text format (version 0.0.4).
    func text() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 * 1024)
        registry.emit(into: &buffer)
        return buffer
    }

    // MARK: requests

    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

    /// Counts a request and records its duration. `route` is a route template (or `unmatched`), never a path.
    func request(method: HTTPRequest.Method, route: String, status: Int, elapsed: Duration) {
        guard enabled else { return }
        let method = Self.methods.contains(method.rawValue) ? method.rawValue : "other"
        CoreMetrics.Counter(label: Self.requestsTotal, dimensions: [("route", route), ("method", method), ("status", "\(status)")], factory: factory)
            .increment()
        CoreMetrics.Timer(label: Self.requestDuration, dimensions: [("route", route), ("method", method)], factory: factory)
            .recordNanoseconds(Self.nanoseconds(elapsed))
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    // MARK: names the stores, the outbox and the hasher use

    static let databaseWait = "gatehouse_db_connection_wait_seconds"
    static let databaseStatement = "gatehouse_db_statement_duration_seconds"
    static let databaseInUse = "gatehouse_db_connections_in_use"
    static let hashWait = "gatehouse_password_hash_wait_seconds"
    static let hashDuration = "gatehouse_password_hash_duration_seconds"
    static let hashesRunning = "gatehouse_password_hashes_running"
    static let hashCPU = "gatehouse_password_hash_cpu_seconds_total"
    static let outboxPendingName = "gatehouse_outbox_pending"
    static let outboxFailuresName = "gatehouse_outbox_delivery_failures_total"
    static let outboxSentName = "gatehouse_outbox_sent_total"
}

/// Who may read `/metrics` (`server.metrics`): see ``MetricsSettings``.
enum MetricsAccess: Equatable {
    case allowed
    /// A token is configured and the request lacks it: 401.
    case unauthorized
    /// No token, and not a loopback peer without proxy headers: 404, as if there were no such route.
    case hidden

    /// Headers a proxy adds: a request with any of them came through one, whatever its peer address says.
    static let proxyHeaders: [HTTPField.Name] = [
        HTTPField.Name("X-Forwarded-For")!, HTTPField.Name("Forwarded")!, HTTPField.Name("X-Real-IP")!,
    ]

    static func decide(settings: MetricsSettings, headers: HTTPFields, peerIP: String?, clientIPHeader: HTTPField.Name?) -> MetricsAccess {
        if let token = settings.token {
            guard case .token(let given) = BearerToken(headers) else { return .unauthorized }
            // Hashes first: the compare's time then depends on neither token's length.
            return Secrets.constantTimeEquals(Secrets.sha256(given), Secrets.sha256(token)) ? .allowed : .unauthorized
        }
        guard let peerIP, isLoopback(peerIP) else { return .hidden }
        let forwarded = (proxyHeaders + (clientIPHeader.map { [$0] } ?? [])).contains { headers[$0] != nil }
        return forwarded ? .hidden : .allowed
    }

    /// 127.0.0.0/8, ::1, and IPv4-mapped 127.x addresses (the connection's peer, never a header).
    static func isLoopback(_ ip: String) -> Bool {
        var ip = ip.lowercased()
        if ip.hasPrefix("::ffff:") { ip = String(ip.dropFirst(7)) }
        return ip != "localhost" && Loopback.contains(host: ip)
    }
}

/// `GET /metrics`.
struct MetricsRoutes {
    let metrics: GatehouseMetrics
    let settings: MetricsSettings
    let clientIPHeader: HTTPField.Name?
    /// Brings the gauges read at scrape time up to date.
    let outboxDepth: OutboxDepth

    func register(on router: Router<GatehouseRequestContext>) {
        router.get("metrics") { request, context in
            switch MetricsAccess.decide(settings: settings, headers: request.headers, peerIP: context.peerIP, clientIPHeader: clientIPHeader) {
            case .hidden:
                throw HTTPError(.notFound)
            case .unauthorized:
                throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"])
            case .allowed:
                await outboxDepth.refresh()
                return Response(
                    status: .ok,
                    headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.text()))
                )
            }
        }
    }
}

/// `gatehouse_outbox_pending`, counted in the database when `/metrics` is read: one count at a time, waited for at
/// most ``deadline``. A scrape while the database is slow or away answers at once with the last depth, instead of
/// waiting `connect_timeout` for a connection (and past the scraper's own timeout) just when metrics matter most.
final class OutboxDepth: Sendable {
    static let deadline: Duration = .seconds(1)
    private let count: @Sendable () async throws -> Int
    private let gauge: CoreMetrics.Gauge
    private let inFlight = NIOLockedValueBox(false)

    init(gauge: CoreMetrics.Gauge, count: @escaping @Sendable () async throws -> Int) {
        self.gauge = gauge
        self.count = count
    }

    func refresh(within deadline: Duration = OutboxDepth.deadline) async {
        guard inFlight.withLockedValue({ busy in defer { busy = true }; return !busy }) else { return }
        let (count, gauge, inFlight) = (count, gauge, inFlight)
        let answered = NIOLockedValueBox(false)
        let timer = NIOLockedValueBox<Task<Void, Never>?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finish: @Sendable () -> Void = {
                if answered.withLockedValue({ done in defer { done = true }; return !done }) { continuation.resume() }
            }
            // Unstructured: a count stuck on an unreachable database must not hold the scrape; it ends on its own.
            Task {
                if let pending = try? await count() { gauge.record(pending) }
                inFlight.withLockedValue { $0 = false }
                finish()
            }
            timer.withLockedValue { $0 = Task { try? await Task.sleep(for: deadline); finish() } }
        }
        timer.withLockedValue { $0?.cancel() }
    }
}

/// Work that waits in a queue for a scarce resource, then holds it: how long it waited, how long it held it, and how
/// many hold it now. The databases record `gatehouse_db_connection_wait_seconds`,
/// `gatehouse_db_statement_duration_seconds` and `gatehouse_db_connections_in_use` (``database``: a statement or a
/// transaction waiting for PostgreSQL's pool or SQLite's one connection); the hasher
/// `gatehouse_password_hash_wait_seconds`, `gatehouse_password_hash_duration_seconds` and
/// `gatehouse_password_hashes_running` (``hashing``: a hash waiting for a thread of the blocking pool), and the CPU
/// time its hashes took, `gatehouse_password_hash_cpu_seconds_total`.
struct QueuedWorkMetrics: Sendable {
    let wait: CoreMetrics.Timer
    let work: CoreMetrics.Timer
    let inUse: CoreMetrics.Meter
    /// The CPU time of synchronous work (``run(since:_:)``), counted on the thread that ran it: what a hash costs in
    /// this process, under its load, beside what it took on the wall clock.
    let cpu: CoreMetrics.FloatingPointCounter?

    init(wait: String, work: String, inUse: String, cpu: String? = nil, factory: any MetricsFactory) {
        self.wait = CoreMetrics.Timer(label: wait, factory: factory)
        self.work = CoreMetrics.Timer(label: work, factory: factory)
        self.inUse = CoreMetrics.Meter(label: inUse, factory: factory)
        self.cpu = cpu.map { CoreMetrics.FloatingPointCounter(label: $0, factory: factory) }
    }

    static func database(_ factory: any MetricsFactory) -> QueuedWorkMetrics {
        QueuedWorkMetrics(wait: GatehouseMetrics.databaseWait, work: GatehouseMetrics.databaseStatement, inUse: GatehouseMetrics.databaseInUse, factory: factory)
    }

    static func hashing(_ factory: any MetricsFactory) -> QueuedWorkMetrics {
        QueuedWorkMetrics(
            wait: GatehouseMetrics.hashWait, work: GatehouseMetrics.hashDuration, inUse: GatehouseMetrics.hashesRunning,
            cpu: GatehouseMetrics.hashCPU, factory: factory
        )
    }

    static let none = QueuedWorkMetrics.database(NOOPMetricsHandler.instance)

    /// Records the wait since `queued`, then runs `body` counted as holding the resource.
    private func begin(since queued: ContinuousClock.Instant) -> ContinuousClock.Instant {
        let start = ContinuousClock.now
        wait.recordNanoseconds(GatehouseMetrics.nanoseconds(start - queued))
        inUse.increment()
        return start
    }

    private func end(_ start: ContinuousClock.Instant) {
        inUse.decrement()
        work.recordNanoseconds(GatehouseMetrics.nanoseconds(.now - start))
    }

    /// Runs `body` on a resource (a database connection) that was asked for at `queued`.
    func leased<T>(since queued: ContinuousClock.Instant, _ body: () async throws -> T) async throws -> T {
        let start = begin(since: queued)
        defer { end(start) }
        return try await body()
    }

    /// Runs `work` (a hash, on a pool thread) that was asked for at `queued`.
    func run<T>(since queued: ContinuousClock.Instant, _ work: () throws -> T) rethrows -> T {
        let start = begin(since: queued)
        let cpuStart = cpu == nil ? 0 : Self.threadCPUSeconds()
        defer {
            if let cpu { cpu.increment(by: Self.threadCPUSeconds() - cpuStart) }
            end(start)
        }
        return try work()
    }

    /// The CPU time the calling thread has used, in seconds (`CLOCK_THREAD_CPUTIME_ID`).
    static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
