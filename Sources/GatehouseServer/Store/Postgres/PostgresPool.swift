import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// Gatehouse's pool of PostgreSQL connections: a fixed number of `PostgresConnection`s, opened at start and kept (none
/// is closed for being idle, none runs a keep-alive query: TCP keepalives do that), lent one statement or transaction
/// at a time in the order they were asked for, and replaced when one closes.
///
/// Not postgres-nio's `PostgresClient`: its pool (1.33.2) traps when the database comes back after an outage under
/// load. While connections fail to open it discards every failed attempt but the one it retries, so it is left with
/// fewer connections than its minimum, and the next lease that finds none idle trips
/// `precondition(minimumConcurrentConnections <= stats.active)` in `createNewDemandConnectionIfPossible`
/// (`PoolStateMachine+ConnectionGroup.swift`), killing the process; its per-connection stream counts also drift when a
/// connection dies while leased or closing. Here the whole state is one small struct under one lock, and the only
/// invariant, `open == connections made or being made`, changes in three places: an attempt started, an attempt failed,
/// a connection's close seen (once, from its `closeFuture`).
///
/// While the database is unreachable one attempt is in flight at a time, the next 0.1 s × 2ⁿ after a failure (at most
/// ``maximumBackoff``), so that the pool finds the database within about a second of its return; once an attempt
/// succeeds the rest are opened at once. Waiting leases wait (their caller's lease timeout gives up on them, by
/// cancelling) rather than failing fast: a restart of a few seconds costs the requests in it that wait, not an error
/// for every request until a timer runs out.
///
/// The pool makes each connection's socket itself and hands it to postgres-nio (`establishedChannel`), so that it can
/// add a ``ReadyForQueryWatch`` to it: a write's caller learns from it whether the write committed.
final class PostgresPool: Sendable {
    /// A connection of the pool, with the watch on its messages.
    struct Pooled: Sendable {
        let connection: PostgresConnection
        let watch: ReadyForQueryWatch
        var eventLoop: any EventLoop { connection.eventLoop }
        var isClosed: Bool { connection.isClosed }
        func close() -> EventLoopFuture<Void> { connection.close() }
    }

    /// The longest wait between two attempts to reach an unreachable server.
    static let maximumBackoff: Duration = .seconds(1)

    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Pooled, any Error>
    }

    private struct State {
        /// Connections open and not lent, the most recently returned last.
        var idle: [Pooled] = []
        /// Connections made and not yet seen closed, by the pool's id, plus attempts in flight (``connecting``).
        var live: Set<Int> = []
        var connecting = 0
        var open: Int { live.count + connecting }
        var waiters = CircularBuffer<Waiter>()
        var nextWaiter: UInt64 = 0
        var nextConnection = 0
        /// Attempts that failed since the last that succeeded; while above zero, one attempt at a time.
        var failures = 0
        var retryScheduled = false
        var lastError: String?
        var closed = false
    }

    enum Failure: Error, CustomStringConvertible {
        case closed
        var description: String { "the database connection pool is closed" }
    }

    private let state = NIOLockedValueBox(State())
    private let size: Int
    private let configuration: PostgresConnection.Configuration
    private let group: any EventLoopGroup
    private let logger: Logger

    /// Starts opening `size` connections.
    init(size: Int, configuration: PostgresConnection.Configuration, logger: Logger, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        precondition(size > 0)
        self.size = size
        self.configuration = configuration
        self.logger = logger
        self.group = group
        let attempts = state.withLockedValue { self.startAttempts(&$0) }
        for id in attempts { connect(id) }
    }

    /// Runs `work` on a connection of its own, waiting for one as long as it takes (cancel the task to stop waiting),
    /// and takes the connection back after; a connection that closed meanwhile is replaced.
    func withConnection<T: Sendable>(_ work: (Pooled) async throws -> T) async throws -> T {
        let connection = try await lease()
        defer { release(connection) }
        return try await work(connection)
    }

    /// How many connections are open or being opened, and why the last attempt failed (for tests and diagnostics).
    var status: (open: Int, idle: Int, waiting: Int, lastError: String?) {
        state.withLockedValue { ($0.open, $0.idle.count, $0.waiters.count, $0.lastError) }
    }

    /// Closes the idle connections and those lent as they come back; waiting and later leases fail.
    func shutdown() {
        let (idle, waiters) = state.withLockedValue { state -> ([Pooled], [Waiter]) in
            state.closed = true
            defer {
                state.idle = []
                state.waiters = []
            }
            return (state.idle, Array(state.waiters))
        }
        for waiter in waiters { waiter.continuation.resume(throwing: Failure.closed) }
        for connection in idle { connection.close().whenComplete { _ in } }
    }

    private enum LeaseAction {
        case lease(Pooled)
        case fail(any Error)
        case wait([Int])
    }

    private func lease() async throws -> Pooled {
        let id = state.withLockedValue { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let action = state.withLockedValue { state -> LeaseAction in
                    if state.closed { return .fail(Failure.closed) }
                    // One on the caller's event loop first: its statements are written and answered on the thread
                    // that asked (``EventLoopTaskExecutor``), with no thread woken on either side.
                    if let index = state.idle.lastIndex(where: { $0.eventLoop.inEventLoop }), !state.idle[index].isClosed {
                        return .lease(state.idle.remove(at: index))
                    }
                    // A connection whose close is not seen yet is left for its close handler to count.
                    while let connection = state.idle.popLast() {
                        if !connection.isClosed { return .lease(connection) }
                    }
                    // Cancelled before it was queued: the cancellation handler found nothing to remove.
                    if Task.isCancelled { return .fail(CancellationError()) }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return .wait(self.startAttempts(&state))
                }
                switch action {
                case .lease(let connection): continuation.resume(returning: connection)
                case .fail(let error): continuation.resume(throwing: error)
                case .wait(let attempts): for attempt in attempts { connect(attempt) }
                }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    private func release(_ connection: Pooled) {
        let next = state.withLockedValue { state -> Waiter?? in
            if state.closed { return .some(nil) }
            // Closed while lent (the statement's deadline closed it, or the server went away): its close handler
            // counts it and opens another.
            if connection.isClosed { return nil }
            if let waiter = state.waiters.popFirst() { return waiter }
            state.idle.append(connection)
            return nil
        }
        switch next {
        case .some(.some(let waiter)): waiter.continuation.resume(returning: connection)
        case .some(.none): connection.close().whenComplete { _ in }
        case .none: break
        }
    }

    /// Counts the attempts to start now, under the lock: every missing connection while attempts succeed; while they
    /// fail, one, and only when none is in flight and no retry is waiting for its backoff to end.
    private func startAttempts(_ state: inout State) -> [Int] {
        guard !state.closed else { return [] }
        var missing = size - state.open
        if state.failures > 0 { missing = state.connecting == 0 && !state.retryScheduled ? min(missing, 1) : 0 }
        guard missing > 0 else { return [] }
        return (0..<missing).map { _ in
            state.connecting += 1
            state.nextConnection += 1
            return state.nextConnection
        }
    }

    /// Makes connection `id` (counted in `connecting` already).
    private func connect(_ id: Int) {
        // Spread over the loops (not `any()`, which on a loop is that loop: reconnections scheduled there would put
        // every connection on one loop), so that a request on each loop finds connections of its own (``lease()``).
        Self.connect(on: group.next(), configuration: configuration, id: id, logger: logger).whenComplete { result in
            switch result {
            case .success(let connection): self.connected(connection, id: id)
            case .failure(let error): self.failed(error)
            }
        }
    }

    /// A connection as `configuration` describes it, over a socket made here, with a ``ReadyForQueryWatch`` added
    /// once its start-up has ended (after the TLS handler, if there is one). postgres-nio's own `connect` would make
    /// the socket the same way (`ClientBootstrap`, `TCP_NODELAY`, SNI for a host name, one connect timeout for the
    /// socket and the start-up together), but keeps the channel to itself.
    static func connect(
        on loop: any EventLoop, configuration: PostgresConnection.Configuration, id: Int, logger: Logger
    ) -> EventLoopFuture<Pooled> {
        let deadline = NIODeadline.now() + configuration.options.connectTimeout
        let bootstrap = ClientBootstrap(group: loop).connectTimeout(configuration.options.connectTimeout)
        let socket: EventLoopFuture<any Channel>
        if let host = configuration.host, let port = configuration.port {
            socket = bootstrap.connect(host: host, port: port)
        } else if let path = configuration.unixSocketPath {
            socket = bootstrap.connect(unixDomainSocketPath: path)
        } else {
            return loop.makeFailedFuture(ChannelError.badInterfaceAddressFamily)
        }
        return socket.flatMap { channel in
            var established = PostgresConnection.Configuration(
                establishedChannel: channel, tls: configuration.tls, username: configuration.username,
                password: configuration.password, database: configuration.database
            )
            established.options = configuration.options
            // The start-up has what is left of the connect timeout.
            established.options.connectTimeout = max(.milliseconds(1), deadline - .now())
            if established.options.tlsServerName == nil, let host = configuration.host, (try? SocketAddress(ipAddress: host, port: 0)) == nil {
                established.options.tlsServerName = host
            }
            return PostgresConnection.connect(on: channel.eventLoop, configuration: established, id: id, logger: logger)
                .flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
                .flatMapThrowing { connection in
                    let watch = ReadyForQueryWatch()
                    do {
                        let pipeline = channel.pipeline.syncOperations
                        if let tls = try? pipeline.handler(type: NIOSSLClientHandler.self) {
                            try pipeline.addHandler(watch, position: .after(tls))
                        } else {
                            try pipeline.addHandler(watch, position: .first)
                        }
                    } catch {
                        connection.close().whenComplete { _ in }
                        throw error
                    }
                    return Pooled(connection: connection, watch: watch)
                }
        }
    }

    private func connected(_ connection: Pooled, id: Int) {
        let (keep, waiter, attempts, failures) = state.withLockedValue { state -> (Bool, Waiter?, [Int], Int) in
            state.connecting -= 1
            if state.closed { return (false, nil, [], 0) }
            let failures = state.failures
            state.failures = 0
            state.lastError = nil
            state.live.insert(id)
            let waiter = state.waiters.popFirst()
            if waiter == nil { state.idle.append(connection) }
            return (true, waiter, startAttempts(&state), failures)
        }
        if failures > 0 { logger.notice("the database is reachable again", metadata: ["failed_attempts": "\(failures)"]) }
        guard keep else {
            connection.close().whenComplete { _ in }
            return
        }
        // Registered after the connection is counted: a connection already closed runs this at once, and is uncounted.
        connection.connection.closeFuture.whenComplete { _ in self.closed(connection, id: id) }
        waiter?.continuation.resume(returning: connection)
        for attempt in attempts { connect(attempt) }
    }

    private func failed(_ error: any Error) {
        let (delay, first) = state.withLockedValue { state -> (Duration?, Bool) in
            state.connecting -= 1
            state.failures += 1
            state.lastError = String(reflecting: error)
            guard !state.closed, !state.retryScheduled else { return (nil, false) }
            state.retryScheduled = true
            return (min(Self.maximumBackoff, .milliseconds(100) * (1 << min(state.failures - 1, 10))), state.failures == 1)
        }
        guard let delay else { return }
        if first { logger.warning("cannot open a database connection; retrying", metadata: ["error": "\(String(reflecting: error))"]) }
        group.any().scheduleTask(in: TimeAmount(delay)) { self.retry() }
    }

    /// The backoff after a failed attempt is over: one attempt, if a connection is still missing and none is in flight.
    private func retry() {
        let attempts = state.withLockedValue { state -> [Int] in
            state.retryScheduled = false
            return startAttempts(&state)
        }
        for attempt in attempts { connect(attempt) }
    }

    /// Connection `id` closed (the server ended it, its socket dropped, or Gatehouse closed it): uncounted once, and
    /// replaced.
    private func closed(_ connection: Pooled, id: Int) {
        let attempts = state.withLockedValue { state -> [Int] in
            guard state.live.remove(id) != nil else { return [] }
            state.idle.removeAll { $0.connection === connection.connection }
            return startAttempts(&state)
        }
        for attempt in attempts { connect(attempt) }
    }
}
