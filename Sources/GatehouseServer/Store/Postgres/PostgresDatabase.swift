import Foundation
import GatehouseDomain
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// PostgreSQL: a connection pool (``PostgresPool``, over postgres-nio's `PostgresConnection`) shared by every request. Several Gatehouse
/// instances may use one database; everything that must hold across them (single-use tokens, revoked sessions,
/// send limits) is a conditional statement or a transaction in the database, not state in a process.
final class PostgresDatabase: SQLDatabase {
    let dialect = SQLDialect.postgres
    private let pool: PostgresPool
    private let logger: Logger
    /// How long a statement waits for a connection before the database counts as unreachable.
    private let leaseTimeout: Duration
    /// How long leased work (a statement, a transaction) may take (`query_timeout`). PostgreSQL itself cancels a
    /// statement past it (`statement_timeout`, `lock_timeout`); a connection whose server stopped answering
    /// altogether (a frozen server, a half-closed socket) is closed ``deadlineGrace`` later and the work fails as
    /// unavailable, its outcome unknown if it wrote. Migrations (``Migrator``) run without either.
    private let workDeadline: Duration
    /// How long after `query_timeout` the connection of unanswered work is closed: PostgreSQL's own cancellation
    /// comes first when the server is alive.
    static let deadlineGrace: Duration = .seconds(2)
    /// Set while migrations run: their statements (an index on a large table) may take as long as they need.
    @TaskLocal static var unbounded = false
    /// The wait for a connection, the work on it, and the connections in use (the pool's own events go to the log, not
    /// to swift-metrics).
    private let metrics: QueuedWorkMetrics
    /// The lease timeouts and work deadlines of every statement in flight.
    private let deadlines = Deadlines()
    /// Keyed reads waiting for one in flight (``rows(of:key:)``); at most a quarter of the pool (at least one) for one
    /// kind of read at once, so that under load the reads leave most connections to the writes.
    private let batcher: ReadBatcher
    /// Whether the last real write failed with `disk_full` (53100) or ENOSPC, for `/readyz`.
    let writeHealth: WriteHealth? = WriteHealth()

    private init(
        pool: PostgresPool, poolSize: Int, logger: Logger, leaseTimeout: Duration, workDeadline: Duration,
        metrics: QueuedWorkMetrics
    ) {
        self.metrics = metrics
        self.pool = pool
        batcher = ReadBatcher(maximumInFlight: poolSize / 4)
        self.logger = logger
        self.leaseTimeout = leaseTimeout
        self.workDeadline = workDeadline
    }

    /// Starts the connection pool. With `connect` (the default) it also makes one round trip, so an unreachable
    /// server fails here; without, connections are made when first needed.
    static func open(
        _ settings: PostgresSettings, logger: Logger, connect: Bool = true, metrics: QueuedWorkMetrics = .none
    ) async throws -> PostgresDatabase {
        let configuration = try connectionConfiguration(settings)
        var clientLogger = logger
        clientLogger.logLevel = max(logger.logLevel, .notice)
        let pool = PostgresPool(size: settings.poolSize, configuration: configuration, logger: clientLogger)
        let db = PostgresDatabase(
            pool: pool, poolSize: settings.poolSize, logger: clientLogger,
            leaseTimeout: .seconds(Int64(settings.connectTimeout)),
            workDeadline: .seconds(Int64(settings.queryTimeout)) + deadlineGrace, metrics: metrics
        )
        guard connect else { return db }
        do {
            try await db.ping()
        } catch {
            pool.shutdown()
            throw error
        }
        return db
    }

    /// How each of the pool's connections connects: TLS, time limits, keepalives.
    static func connectionConfiguration(_ settings: PostgresSettings) throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        switch settings.sslMode {
        case .disable:
            tls = .disable
        case .require:
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            tls = .require(try NIOSSLContext(configuration: configuration))
        case .verifyFull:
            tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(
            host: settings.host, port: settings.port, username: settings.username, password: settings.password,
            database: settings.database, tls: tls
        )
        // The pool's connections are opened at start and kept, none of them closed for being idle, and the pool sends
        // no keep-alive query of its own (a timer per connection returned to the pool cost about a fifth of the
        // server's CPU in postgres-nio's pool: Benchmarks/PROFILING.md). Idle connections are kept alive by the
        // server's TCP keepalives instead (below).
        // Nothing runs or holds a lock for ever: a statement, or its wait for a row lock, is cancelled by the server
        // past query_timeout, and a connection left idle inside a transaction is ended after 60 s, its locks released,
        // instead of stalling every request that needs those rows.
        let limit = "\(settings.queryTimeout)s"
        configuration.options.additionalStartupParameters = [
            ("statement_timeout", limit), ("lock_timeout", limit), ("idle_in_transaction_session_timeout", "60s"),
            // An idle connection carries a TCP keepalive from the server every minute: a firewall or NAT between them
            // does not forget it (many drop flows idle for a few minutes, silently), and the server ends the session
            // of a client that is gone. A connection that dies anyway fails its next statement within query_timeout
            // (the work deadline below) and the pool replaces it.
            ("tcp_keepalives_idle", "60"), ("tcp_keepalives_interval", "10"), ("tcp_keepalives_count", "6"),
        ]
        configuration.options.connectTimeout = .seconds(Int64(settings.connectTimeout))
        return configuration
    }

    @discardableResult
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await query(sql, Self.bindings(binds))
    }

    fileprivate func query(_ sql: String, _ bindings: PostgresBindings) async throws -> [SQLRow] {
        // A statement on its own commits when it ends: a write whose answer never came may have taken effect.
        let writes = !Self.isRead(sql)
        let rows = try await recordingSpace {
            try await Self.mapErrors(writing: writes) {
                try await self.withConnection(writing: writes) { pooled in
                    let rows = try await Self.run(sql, bindings, on: pooled.connection, logger: self.logger)
                    // Its `CommandComplete` came before PostgreSQL committed it: answered once the commit is.
                    if writes { try await Self.committed(pooled) }
                    return rows
                }
            }
        }
        if writes { writeHealth?.wrote() }
        return rows
    }

    /// The reads of concurrent requests that wait at the same time run as one statement (``ReadBatcher``).
    func rows(of read: KeyedRead, key: String) async throws -> [SQLRow] {
        try await batcher.rows(of: read, key: key, from: self)
    }

    /// Runs `body`; a failure that says the disk is full (53100 `disk_full`, ENOSPC) is kept for `/readyz`.
    private func recordingSpace<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StoreError {
            if case .unavailable(let reason) = error, reason.contains("SQLSTATE 53100") || WriteHealth.mentionsNoSpace(reason) {
                writeHealth?.failed(reason, full: true)
            }
            throw error
        }
    }

    /// Whether `sql` only reads (a `SELECT` without `FOR UPDATE`): its failure can never leave a write behind.
    /// Every statement passes here, so it compares UTF-8 bytes, ASCII letters without case (both words are ASCII):
    /// no copy of the text and no Unicode case folding.
    ///
    /// The scan runs over the string's contiguous UTF-8 buffer: through `String.UTF8View`'s generic indices it cost
    /// about 20,000 instructions for the session read's 1.5 KB, a tenth of what the refresh spent outside its
    /// signature (`Benchmarks/PROFILING.md`).
    ///
    /// The answer is remembered per statement text (``StatementFacts``): the scan (``scanIsRead(_:)``) is still about
    /// 9,000 instructions for a 1.5 KB statement.
    static func isRead(_ sql: String) -> Bool {
        StatementFacts.isRead(sql, scanning: scanIsRead)
    }

    /// ``isRead(_:)``'s scan of the text.
    static func scanIsRead(_ sql: String) -> Bool {
        var sql = sql
        return sql.withUTF8 { bytes in
            guard let start = bytes.firstIndex(where: { $0 != UInt8(ascii: " ") && !(9...13).contains($0) }) else { return false }
            let rest = UnsafeBufferPointer(rebasing: bytes[start...])
            return rest.startsIgnoringASCIICase(with: "select") && !rest.containsIgnoringASCIICase("for update")
        }
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        // Until COMMIT is sent a lost connection rolls the transaction back; from then on its outcome is unknown.
        let committing = NIOLockedValueBox(false)
        // Whether a statement that writes ran in it: its COMMIT then wrote.
        let wrote = NIOLockedValueBox(false)
        do {
            let result = try await recordingSpace { try await Self.mapErrors(writing: false) {
                try await self.withConnection(writing: false, committing: committing) { pooled in
                    let connection = pooled.connection
                    try await connection.query("BEGIN", logger: self.logger)
                    // COMMIT and ROLLBACK run in tasks of their own, which a cancellation of the request does not
                    // reach: the connection goes back to the pool with its transaction ended, never open with its
                    // locks held.
                    let logger = self.logger
                    do {
                        let result = try await body(Connection(connection: connection, logger: logger, wrote: wrote))
                        committing.withLockedValue { $0 = true }
                        try await Task { try await Self.commit(on: connection, logger: logger) }.value
                        return result
                    } catch {
                        if !committing.withLockedValue({ $0 }) {
                            _ = try? await Task { try await connection.query("ROLLBACK", logger: logger) }.value
                        }
                        throw error
                    }
                }
            } }
            if wrote.withLockedValue({ $0 }) { writeHealth?.wrote() }
            return result
        } catch StoreError.unavailable(let reason) where committing.withLockedValue({ $0 }) {
            throw StoreError.outcomeUnknown("during COMMIT: " + reason)
        } catch let error as RolledBackAtCommit {
            // Not unknown: PostgreSQL said it rolled back.
            throw StoreError.unavailable(error.description)
        }
    }

    /// A pooled connection for `work`. While the server is unreachable the pool keeps retrying and would hold the
    /// request until it is back; after `leaseTimeout` without a connection the statement fails as
    /// ``StoreError/unavailable(_:)`` instead, so that requests answer 503 promptly. Once a connection is leased the
    /// work has ``workDeadline`` (unless migrations run it); past it the connection is closed and the work fails as
    /// unavailable, its outcome unknown.
    private func withConnection<T: Sendable>(
        writing: Bool, committing: NIOLockedValueBox<Bool> = NIOLockedValueBox(false),
        _ work: @escaping @Sendable (PostgresPool.Pooled) async throws -> T
    ) async throws -> T {
        let (pool, logger, timeout, metrics) = (self.pool, self.logger, leaseTimeout, metrics)
        let queued = ContinuousClock.now
        // Migrations and database administration (`unbounded`): the same wait for a connection, then no deadline, and
        // no server-side limit either, for this work only.
        let unbounded = Self.unbounded
        let job: @Sendable (PostgresPool.Pooled) async throws -> T
        if unbounded {
            job = { pooled in
                let connection = pooled.connection
                try await connection.query("SET statement_timeout = 0", logger: logger)
                try await connection.query("SET lock_timeout = 0", logger: logger)
                do {
                    let result = try await work(pooled)
                    try await connection.query("RESET statement_timeout", logger: logger)
                    try await connection.query("RESET lock_timeout", logger: logger)
                    return result
                } catch {
                    _ = try? await connection.query("RESET statement_timeout", logger: logger)
                    _ = try? await connection.query("RESET lock_timeout", logger: logger)
                    throw error
                }
            }
        } else {
            job = work
        }
        let deadline: Duration? = unbounded ? nil : workDeadline
        let deadlines = self.deadlines
        // Either the lease comes first or the lease timeout does, never both: the work starts only if it leased in time.
        let lease = NIOLockedValueBox(LeaseState.waiting)
        // The request is answered by whichever ends first, the work or its deadline; the other is left to end on its
        // own (a lease given up, a statement whose connection was closed). Structured child tasks would make the
        // request wait for both, and one that does not answer its cancellation (a connection being made to a frozen
        // server) would hold it for ever. The worker starts at once on this thread (`Task.immediate`), up to its first
        // wait: a task enqueued instead would wake another thread to start it while this one goes idle.
        return try await withCheckedThrowingContinuation { continuation in
            let answered = NIOLockedValueBox(false)
            let answer: @Sendable (Result<T, any Error>) -> Void = { result in
                if answered.withLockedValue({ done in defer { done = true }; return !done }) { continuation.resume(with: result) }
            }
            let worker = NIOLockedValueBox<Task<Void, Never>?>(nil)
            let leaseDeadline = deadlines.arm(at: queued + timeout) {
                let timedOut = lease.withLockedValue { state -> Bool in
                    guard case .waiting = state else { return false }
                    state = .timedOut
                    return true
                }
                guard timedOut else { return }
                answer(.failure(StoreError.unavailable("no database connection within \(timeout)")))
                worker.withLockedValue { $0?.cancel() }
            }
            let work: @Sendable () async -> Void = {
                do {
                    let value = try await pool.withConnection { connection in
                        let started = lease.withLockedValue { state -> Bool in
                            guard case .waiting = state else { return false }
                            state = .leased
                            return true
                        }
                        guard started else { throw StoreError.unavailable("no database connection within \(timeout)") }
                        deadlines.disarm(leaseDeadline)
                        // The deadline counts from the lease, not from the start of the wait for it. Past it the
                        // server stopped answering on this connection (a half-closed socket, a frozen server): the
                        // request is answered then; closing the connection fails the statement in flight, and the pool
                        // replaces the connection.
                        let workDeadline = deadline.map { deadline in
                            deadlines.arm(at: .now + deadline) {
                                let reason = "the database did not answer within \(deadline)"
                                answer(.failure(writing || committing.withLockedValue({ $0 }) ? StoreError.outcomeUnknown(reason) : StoreError.unavailable(reason)))
                                connection.close().whenComplete { _ in }
                            }
                        }
                        let result: Result<T, any Error>
                        do {
                            result = .success(try await metrics.leased(since: queued) { try await job(connection) })
                        } catch {
                            result = .failure(error)
                        }
                        if let workDeadline, !deadlines.disarm(workDeadline) {
                            // The deadline fired as the work ended: its action closes this connection. Closed before it
                            // goes back to the pool, it is never lent to another statement and closed under it.
                            try? await connection.connection.close()
                        }
                        return try result.get()
                    }
                    answer(.success(value))
                } catch {
                    answer(.failure(error))
                }
                // A failure before the lease (the pool's own) leaves the lease deadline armed.
                deadlines.disarm(leaseDeadline)
            }
            // Where `Task.immediate` is not available (Apple systems before 26), the worker is enqueued.
            let task: Task<Void, Never>
            if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
                // On the event loops when the caller is (an unstructured task does not inherit the preference).
                task = Task.immediate(executorPreference: EventLoopTaskExecutor.ofCurrentThread, operation: work)
            } else {
                task = Task(operation: work)
            }
            worker.withLockedValue { $0 = task }
            // The lease timeout may have fired before the task was stored (a timeout of nearly nothing): cancel it now.
            if lease.withLockedValue({ if case .timedOut = $0 { true } else { false } }) { task.cancel() }
        }
    }

    /// Where a statement's wait for a connection stands (``withConnection(writing:committing:_:)``).
    private enum LeaseState {
        case waiting, leased, timedOut
    }

    func ping() async throws {
        try await query("SELECT 1", [])
    }

    func close() async throws {
        shutdown()
    }

    /// Stops the pool: its connections close.
    func shutdown() {
        pool.shutdown()
    }

    private struct Connection: SQLExecutor {
        let connection: PostgresConnection
        let logger: Logger
        let wrote: NIOLockedValueBox<Bool>
        /// Errors are mapped here already, so that a caller inside the transaction can tell a conflict from other
        /// failures (the import names the line that conflicts); the transaction rolls back either way.
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            // Inside a transaction nothing is committed until COMMIT: a lost answer here writes nothing.
            if !PostgresDatabase.isRead(sql) { wrote.withLockedValue { $0 = true } }
            return try await PostgresDatabase.mapErrors(writing: false) { try await PostgresDatabase.run(sql, PostgresDatabase.bindings(binds), on: connection, logger: logger) }
        }
    }

    private static func bindings(_ binds: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .int(let i): bindings.append(i)
            case .text(let s): bindings.append(s)
            case .blob(let b): bindings.append(ByteBuffer(bytes: b))
            case .null: bindings.appendNull()
            }
        }
        return bindings
    }

    private static func run(_ sql: String, _ bindings: PostgresBindings, on connection: PostgresConnection, logger: Logger) async throws -> [SQLRow] {
        // Every row at once, collected on the connection's event loop: the rows are collected into an array anyway,
        // and the row sequence's end hops back to that loop to cancel its stream (a wake-up of the loop per statement).
        let collected: EventLoopFuture<PostgresQueryResult> = connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
        let rows = try await collected.get()
        var result: [SQLRow] = []
        result.reserveCapacity(rows.count)
        var columns: SQLColumns?
        for row in rows {
            var cells: [SQLValue] = []
            var names: [String] = []
            for cell in row {
                cells.append(try SQLValue(cell))
                if columns == nil { names.append(cell.columnName) }
            }
            if columns == nil { columns = Self.columns(of: sql, named: names) }
            result.append(SQLRow(columns: columns!, cells: cells))
        }
        return result
    }

    /// The columns of `sql`'s rows: those of its last result when they have the same names (a statement's columns are
    /// fixed unless the schema changes), so that their name index is not built again for every result.
    private static func columns(of sql: String, named names: [String]) -> SQLColumns {
        let key = ExactText(sql)
        if let known = knownColumns.withLock({ $0[key] }), known.names == names { return known }
        let columns = SQLColumns(names)
        knownColumns.withLock { table in
            if table.count < StatementFacts.limit || table[key] != nil { table[key] = columns }
        }
        return columns
    }

    private static let knownColumns = Mutex<[ExactText: SQLColumns]>([:])

    /// Unique violations become ``StoreError/conflict``; infrastructure faults ``StoreError/unavailable(_:)``, or
    /// ``StoreError/outcomeUnknown(_:)`` when a write on its own (`writing`) lost its answer.
    private static func mapErrors<T>(writing: Bool, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StoreError {
            throw error
        } catch let error as PSQLError {
            guard let state = error.serverInfo?[.sqlState] else {
                // No answer from the server: connection refused, lost or timed out.
                let reason = String(reflecting: error)
                throw writing ? StoreError.outcomeUnknown(reason) : StoreError.unavailable(reason)
            }
            // The server refused the statement, so it did not take effect (a COMMIT is handled by the caller).
            throw refusal(sqlState: state, message: error.serverInfo?[.message] ?? "") ?? error
        } catch let error as PostgresPool.Failure {
            throw StoreError.unavailable(error.description)
        } catch let error as ReadyForQueryWatch.ServerError {
            // The server failed the statement's commit (a deferred constraint, the session ended): it did not take
            // effect, and maps as the statement's own error would.
            throw refusal(sqlState: error.sqlState, message: "at commit: " + error.message) ?? error
        }
    }

    /// The store's error for a statement the server refused with `sqlState`: a unique violation is a conflict, an
    /// infrastructure fault unavailable; nil for any other (a fault of Gatehouse's, kept as it came).
    private static func refusal(sqlState: String, message: String) -> StoreError? {
        if sqlState == "23505" { return .conflict }
        if isInfrastructure(sqlState: sqlState) { return .unavailable("SQLSTATE \(sqlState): \(message)") }
        return nil
    }

    /// Waits for the end of the write just run on its own (``ReadyForQueryWatch``): returns once PostgreSQL committed it;
    /// throws the server's error when the commit failed (it rolled back), and ``StoreError/outcomeUnknown(_:)`` when
    /// the connection closed before the commit's answer.
    private static func committed(_ pooled: PostgresPool.Pooled) async throws {
        let outcome = await pooled.watch.settled()
        if outcome != .ready(nil) {
            // postgres-nio takes an error after a `CommandComplete` for a broken connection and closes it: closed
            // before it goes back to the pool, it is never lent again.
            try? await pooled.connection.close()
        }
        switch outcome {
        case .ready(nil):
            return
        case .ready(let error?):
            throw error
        case .closed(let error?) where error.severity == "ERROR" || error.severity == "FATAL":
            // An error before the commit's end, and no commit after it (a PANIC may come after the commit record).
            throw error
        case .closed(let error):
            throw StoreError.outcomeUnknown("the connection closed before the statement's commit was answered" + (error.map { " (\($0))" } ?? ""))
        }
    }

    /// Sends `COMMIT`; a transaction that PostgreSQL had already aborted (a statement in it failed, and the body went
    /// on) answers it with the tag `ROLLBACK` and no error, which is a failure here, never a success.
    private static func commit(on connection: PostgresConnection, logger: Logger) async throws {
        let answered: EventLoopFuture<PostgresQueryResult> = connection.query(PostgresQuery(unsafeSQL: "COMMIT"), logger: logger)
        let result = try await answered.get()
        guard result.metadata.command == "COMMIT" else { throw RolledBackAtCommit(tag: result.metadata.command) }
    }

    /// A `COMMIT` answered with another tag than `COMMIT`: the transaction did not take effect.
    private struct RolledBackAtCommit: Error, CustomStringConvertible {
        let tag: String
        var description: String { "the transaction was rolled back at COMMIT (\(tag))" }
    }

    /// SQLSTATEs that say the server, not the statement, is at fault: connection exceptions (class 08), a server
    /// shutting down, restarting or cancelling the statement (57: `admin_shutdown`, `query_canceled` by
    /// `statement_timeout`…), insufficient resources (53: disk full, too many connections), a lock not granted in
    /// time (55P03), a read-only server after a failover (25006), and transient serialization failures (40001, 40P01).
    static func isInfrastructure(sqlState state: String) -> Bool {
        ["08", "57", "53", "58"].contains(String(state.prefix(2))) || ["55P03", "25006", "40001", "40P01"].contains(state)
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether the bytes start with `prefix`, ASCII letters compared without case; `prefix` is lower-case ASCII.
    fileprivate func startsIgnoringASCIICase(with prefix: StaticString) -> Bool {
        startsIgnoringASCIICase(with: UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount), at: 0)
    }

    private func startsIgnoringASCIICase(with prefix: UnsafeBufferPointer<UInt8>, at offset: Int) -> Bool {
        guard count - offset >= prefix.count else { return false }
        for k in 0..<prefix.count where self[offset + k] | 0x20 != prefix[k] { return false }
        return true
    }

    /// Whether `needle` (lower-case ASCII) occurs in the bytes, ASCII letters compared without case.
    fileprivate func containsIgnoringASCIICase(_ needle: StaticString) -> Bool {
        let needle = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        guard let first = needle.first else { return true }
        guard count >= needle.count else { return false }
        for offset in 0...(count - needle.count) where self[offset] | 0x20 == first {
            if startsIgnoringASCIICase(with: needle, at: offset) { return true }
        }
        return false
    }
}

extension SQLValue {
    fileprivate init(_ cell: PostgresCell) throws {
        guard cell.bytes != nil else {
            self = .null
            return
        }
        switch cell.dataType {
        case .int2, .int4, .int8, .numeric: self = .int(try cell.decode(Int64.self))
        case .bytea: self = .blob(Array(try cell.decode(ByteBuffer.self).readableBytesView))
        default: self = .text(try cell.decode(String.self))
        }
    }
}

extension PostgresDatabase: KeyedReads {
    func read(_ read: KeyedRead, key: String) async throws -> [SQLRow] {
        try await query(read.sql, [.text(key)])
    }

    func read(_ read: KeyedRead, keys: [String]) async throws -> [SQLRow] {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(keys)
        return try await query(read.batchSQL, bindings)
    }
}

/// Creates and drops databases on a PostgreSQL server (for throwaway test databases and for setting up a deployment).
public enum PostgresAdmin {
    /// Creates `name` on the server `admin` points at and returns settings for it. `name` must be a plain
    /// identifier (letters, digits, `_`).
    public static func createDatabase(named name: String, admin: PostgresSettings, logger: Logger = Logger(label: "gatehouse")) async throws
        -> PostgresSettings
    {
        precondition(name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }, "database names are plain identifiers")
        let db = try await PostgresDatabase.open(admin.oneConnection, logger: logger)
        defer { db.shutdown() }
        // Creating a database copies a template and may wait for a checkpoint: no query_timeout for it.
        try await PostgresDatabase.$unbounded.withValue(true) { try await db.query("CREATE DATABASE \(name)", []) }
        var settings = admin
        settings.database = name
        return settings
    }

    /// Drops `name`, closing its connections first.
    public static func dropDatabase(named name: String, admin: PostgresSettings, logger: Logger = Logger(label: "gatehouse")) async throws {
        precondition(name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }, "database names are plain identifiers")
        let db = try await PostgresDatabase.open(admin.oneConnection, logger: logger)
        defer { db.shutdown() }
        try await PostgresDatabase.$unbounded.withValue(true) { try await db.query("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", []) }
    }
}

extension PostgresSettings {
    /// These settings with a pool of one connection: the pool opens all of its connections at start, and one
    /// statement of administration needs one.
    fileprivate var oneConnection: PostgresSettings {
        var settings = self
        settings.poolSize = 1
        return settings
    }
}
