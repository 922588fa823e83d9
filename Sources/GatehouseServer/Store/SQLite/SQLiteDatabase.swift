import Foundation
import GatehouseDomain
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization
import VaporCSQLite

/// The embedded SQLite database: one connection, WAL journal, foreign keys on.
///
/// The connection (``SQLiteHandle``) has a thread of its own: SQLite's calls block, and a statement that waits for a
/// lock held by another process (up to the busy timeout) or for the disk must not hold one of the few threads that
/// run every request. A statement (or the writes of ``SQLDatabase/writeTogether(_:)``, with their `BEGIN` and
/// `COMMIT`) that finds the connection free runs on the calling thread, failing at once instead of waiting if another
/// process holds the write lock; otherwise, and then, it goes to the connection's thread in its turn and its answer
/// comes back, one hop each way. The WAL's checkpoints, which wait for the disk, run on that thread only. Prepared
/// statements are kept. A statement, once sent, runs to its end even if the task that sent it is cancelled, so that
/// the connection is never left inside a half-done transaction.
///
/// SQLite allows one writer at a time, so statements and transactions take turns through a FIFO lock; a
/// transaction holds it from `BEGIN IMMEDIATE` to `COMMIT`, so nothing interleaves with it.
///
/// A file database also has read-only connections, one per core, for statements that only read and are not part of
/// a transaction (a `SELECT` that SQLite itself says cannot write): the session read of every refresh and every
/// authenticated request. It runs on the calling thread (a request's event loop), on the first reader not in use,
/// under a lock held only while the statement runs, so such a
/// read costs no hop to the connection's thread and back (two thread wake-ups, most of what the read cost:
/// `Benchmarks/PROFILING.md`). In WAL mode a reader never waits for the writer and sees every transaction committed
/// before it began, so a request reads what the requests before it wrote. What it gives up: a read blocks the calling
/// thread for as long as it runs, so the reads sent there are Gatehouse's own indexed lookups (a page already in
/// memory takes microseconds); and a reader that finds the database locked (WAL recovery by another process) does not
/// wait on the calling thread but goes to the connection's thread, which waits up to the busy timeout as before.
final class SQLiteDatabase: SQLDatabase {
    let dialect = SQLDialect.sqlite
    private let handle: SQLiteHandle
    /// The read-only connections of a file database, one per core (none in memory, where a second connection would
    /// open another database), each used by one caller at a time: a read takes the first that is free, so the event
    /// loops, which run the requests (``EventLoopTaskExecutor``), do not wait for each other's reads.
    private let readers: [ReaderSlot]

    /// One per event loop (a core), at most 16: each keeps a page cache of its own (up to 2 MB, SQLite's default).
    static let readerCount = min(max(1, System.coreCount), 16)

    private final class ReaderSlot: Sendable {
        let state: Mutex<Reader>
        init(_ handle: SQLiteHandle) { state = Mutex(Reader(handle: handle)) }
    }

    private struct Reader {
        let handle: SQLiteHandle
        /// Statements it ran, and statements it handed to the writer (busy, or SQLite said they could write).
        var ran = 0
        var handedOver = 0
    }

    /// How many statements the read-only connections ran, and how many they handed to the writer (tests).
    var readerCounts: (ran: Int, handedOver: Int) {
        readers.reduce((0, 0)) { sum, slot in slot.state.withLock { (sum.0 + $0.ran, sum.1 + $0.handedOver) } }
    }

    /// The statements each read-only connection ran (tests).
    var readerRuns: [Int] { readers.map { slot in slot.state.withLock(\.ran) } }

    /// Holds read-only connection `index` while `body` runs, as a read in progress does (tests).
    func holdingReader(_ index: Int, _ body: () -> Void) {
        readers[index].state.withLock { _ in body() }
    }
    /// One thread, which alone touches `handle`.
    private let thread: NIOThreadPool
    private let lock = AsyncLock()
    /// The wait for the connection (its lock), the work on it, and whether it is in use.
    private let metrics: QueuedWorkMetrics
    /// Whether the last real write failed with SQLITE_FULL, for `/readyz`.
    let writeHealth: WriteHealth? = WriteHealth()
    /// The database file's folder (nil in memory), whose filesystem's free space `/readyz` reads after a full disk.
    private let folder: String?

    private init(handle: SQLiteHandle, readers: [SQLiteHandle], thread: NIOThreadPool, metrics: QueuedWorkMetrics, folder: String?) {
        self.handle = handle
        self.readers = readers.map(ReaderSlot.init)
        self.thread = thread
        self.metrics = metrics
        self.folder = folder
    }

    func freeSpace() -> Int64? {
        guard let folder else { return nil }
        var stats = statvfs()
        guard statvfs(folder, &stats) == 0 else { return nil }
        return Int64(stats.f_bavail) * Int64(stats.f_frsize)
    }

    deinit {
        // Never closed (an error path): the thread ends after the work sent to it, and the handle, which that work
        // holds, closes itself when the last of it lets go (``SQLiteHandle`` closes in its deinit).
        thread.shutdownGracefully { _ in }
    }

    /// Opens (creating if needed) the database at `url`; creates the parent folder of a file database. A statement
    /// that finds the file locked by another process waits up to `busyTimeout`, then fails as unavailable.
    /// - Parameter readers: how many read-only connections a file database opens (tests; ``readerCount`` by default).
    static func open(
        _ url: DatabaseURL, logger: Logger, metrics: QueuedWorkMetrics = .none, busyTimeout: Duration = .seconds(5),
        readers readerCount: Int = SQLiteDatabase.readerCount
    ) async throws -> SQLiteDatabase {
        let path: String
        var folder: String?
        switch url {
        case .sqliteMemory:
            path = ":memory:"
        case .sqliteFile(let file):
            let parent = URL(fileURLWithPath: file).deletingLastPathComponent()
            try Self.prepareOwnerOnly(file: file, in: parent, logger: logger)
            path = file
            folder = parent.path
        case .postgres:
            preconditionFailure("SQLiteDatabase opens SQLite URLs only")
        }
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        let handle: SQLiteHandle
        do {
            handle = try await Self.run(on: thread) { try SQLiteHandle(path: path, busyTimeout: busyTimeout) }
        } catch {
            try? await thread.shutdownGracefully()
            throw StoreError.unavailable("cannot open the SQLite database at \(path): \(error)")
        }
        do {
            if case .sqliteFile = url {
                try await Self.run(on: thread) {
                    _ = try handle.run("PRAGMA journal_mode = WAL", [])
                    _ = try handle.run("PRAGMA synchronous = NORMAL", [])
                }
            }
            try await Self.run(on: thread) {
                _ = try handle.run("PRAGMA foreign_keys = ON", [])
                handle.keepCheckpoints()
            }
        } catch {
            try? await Self.run(on: thread) { handle.close() }
            try? await thread.shutdownGracefully()
            throw StoreError.unavailable("cannot open the SQLite database at \(path): \(error)")
        }
        // Opened after the writer made the file a WAL database. A reader waits for no lock: busy, it hands the
        // statement to the writer's thread.
        var readers: [SQLiteHandle] = []
        if case .sqliteFile = url {
            readers = (0..<max(1, readerCount)).compactMap { _ in try? SQLiteHandle(path: path, busyTimeout: .zero, readOnly: true) }
        }
        return SQLiteDatabase(handle: handle, readers: readers, thread: thread, metrics: metrics, folder: folder)
    }

    /// A database file holds the private signing keys, every password hash and the links in the outbox: what Gatehouse
    /// creates for it is its user's alone, whatever the umask. A missing folder is made `0700` and a missing file
    /// `0600` before SQLite opens it (SQLite gives the `-wal` and `-shm` files the database file's mode). An existing
    /// file keeps the mode its operator chose; one other users may read or write is named in a warning.
    static func prepareOwnerOnly(file: String, in parent: URL, logger: Logger) throws {
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // O_EXCL: a file (or a link) already there is never truncated nor followed.
        if createExclusively(file, mode: 0o600) { return }
        // The mode of what SQLite will open: a link's target.
        let target = URL(fileURLWithPath: file).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: target), attributes[.type] as? FileAttributeType == .typeRegular
        else { return }
        if let mode = attributes[.posixPermissions] as? Int, mode & 0o077 != 0 {
            logger.warning(
                "the SQLite database can be read or written by other users of this machine; it holds the signing keys and password hashes: chmod 600 it and its -wal and -shm files",
                metadata: ["path": "\(file)", "mode": "\(String(mode & 0o777, radix: 8))"]
            )
        }
    }

    @discardableResult
    private func raw(_ sql: String, _ binds: [SQLValue] = []) async throws -> [SQLRow] {
        try await onConnection { handle in try handle.run(sql, binds) }
    }

    /// How many statements, and writes sent together, went to the connection's thread (tests: each hand-off is two
    /// thread wake-ups). Opening, closing and the statement-table checks are not counted.
    var handOffs: Int { handOffCount.withLock { $0 } }
    private let handOffCount = Mutex(0)

    /// Runs `body` with the connection on its thread, SQLite's failures turned into the store's.
    private func onConnection<T: Sendable>(_ body: @escaping @Sendable (SQLiteHandle) throws -> T) async throws -> T {
        let handle = handle
        handOffCount.withLock { $0 += 1 }
        do {
            return try await Self.run(on: thread) { [self] in
                defer { if handle.checkpointIfDue() { checkpointCount.add(1, ordering: .relaxed) } }
                return try body(handle)
            }
        } catch {
            throw storeError(error)
        }
    }

    /// SQLite's failure as the store's: a unique key a conflict; I/O errors, a full disk, a database locked past the
    /// busy timeout, a closed connection unavailable — the request cannot be served now (503), and nothing was
    /// half-written (statements of a transaction roll back together).
    private func storeError(_ error: any Error) -> any Error {
        if let failure = error as? SQLiteFailure, failure.isConflict { return StoreError.conflict }
        let reason = String(describing: error)
        let full = (error as? SQLiteFailure).map { $0.code & 0xff == SQLITE_FULL } ?? false
        writeHealth?.failed(reason, full: full || WriteHealth.mentionsNoSpace(reason))
        return StoreError.unavailable(reason)
    }

    /// Runs `body` on `thread` and answers with its result, on the event loop that asked. Not cancellable: once sent,
    /// the work runs.
    private static func run<T: Sendable>(on thread: NIOThreadPool, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await thread.run(inactive: { SQLiteFailure.closed }, body)
    }

    @discardableResult
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        let queued = ContinuousClock.now
        let isRead = PostgresDatabase.isRead(sql)
        if isRead, !readers.isEmpty, let rows = try read(sql, binds, since: queued) { return rows }
        let rows = try await withConnection(since: queued) { handle in try handle.run(sql, binds) }
        if !isRead { writeHealth?.wrote(freeSpace: freeSpace) }
        return rows
    }

    /// Runs `work` with the connection: on the calling thread when no one holds the connection and `work` finds no
    /// other process's lock in its way (``SQLiteHandle/withoutWaitingForLocks(_:)``), else on the connection's thread,
    /// in its turn, waiting up to the busy timeout there. `work` must be all-or-nothing when it fails with
    /// `SQLITE_BUSY` (a statement on its own, or a transaction that rolls back), because it then runs again there.
    ///
    /// What running it here saves is the hand-off to the connection's thread and back: two thread wake-ups, which
    /// cost more than a login's few indexed writes (`Benchmarks/PROFILING.md`). What it costs the calling thread (a
    /// request's event loop) is the writes' own time: Gatehouse's writes are a few rows each (the retention service
    /// deletes in small batches), and the WAL's checkpoints, which wait for the disk, stay on the connection's thread
    /// (``SQLiteHandle/keepCheckpoints()``).
    private func withConnection<T: Sendable>(
        since queued: ContinuousClock.Instant, _ work: @escaping @Sendable (SQLiteHandle) throws -> T
    ) async throws -> T {
        guard lock.tryLock() else {
            return try await lock.withLock { try await self.metrics.leased(since: queued) { try await self.onConnection(work) } }
        }
        defer { lock.unlock() }
        let handle = handle
        // A checkpoint is due (the last commit took the WAL past SQLite's threshold): this work goes to the
        // connection's thread, which runs the checkpoint after it, as SQLite's own would have run in that commit.
        if !handle.checkpointDue {
            do {
                let result = try metrics.run(since: queued) { try handle.withoutWaitingForLocks { try work(handle) } }
                ranHereCount.add(1, ordering: .relaxed)
                return result
            } catch let failure as SQLiteFailure where failure.isBusy {
                // Another process holds the write lock: wait for it where waiting blocks no request.
            } catch {
                throw storeError(error)
            }
        }
        return try await metrics.leased(since: queued) { try await onConnection(work) }
    }

    /// How many statements, and writes sent together, ran on the calling thread (``withConnection(since:_:)``).
    var ranHere: Int { ranHereCount.load(ordering: .relaxed) }
    private let ranHereCount = Atomic<Int>(0)
    /// How many statements wait for their turn on the connection (tests).
    var waitingForConnection: Int { lock.waiting }
    /// How many WAL checkpoints the connection's thread ran (tests).
    var checkpoints: Int { checkpointCount.load(ordering: .relaxed) }
    private let checkpointCount = Atomic<Int>(0)

    /// Runs a `SELECT` on a read-only connection, on the calling thread; nil when it must go to the writer
    /// instead: SQLite says the statement could write, or the reader found the database locked.
    private func read(_ sql: String, _ binds: [SQLValue], since queued: ContinuousClock.Instant) throws -> [SQLRow]? {
        let metrics = metrics
        let read = { (reader: inout Reader) throws -> [SQLRow]? in
            do {
                let rows = try metrics.run(since: queued) { try reader.handle.run(sql, binds, readOnly: true) }
                reader.ran += 1
                return rows
            } catch let failure as SQLiteFailure where failure.code & 0xff == SQLITE_READONLY || failure.isBusy {
                reader.handedOver += 1
                return nil
            } catch {
                throw StoreError.unavailable(String(describing: error))
            }
        }
        for slot in readers {
            if let done = try slot.state.withLockIfAvailable({ try read(&$0) }) { return done }
        }
        return try readers[0].state.withLock { try read(&$0) }
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        let queued = ContinuousClock.now
        return try await lock.withLock {
            try await self.metrics.leased(since: queued) {
                try await self.raw("BEGIN IMMEDIATE")
                let transaction = Transaction(db: self)
                do {
                    let result = try await body(transaction)
                    try await self.raw("COMMIT")
                    if transaction.wrote.withLockedValue({ $0 }) { self.writeHealth?.wrote(freeSpace: self.freeSpace) }
                    return result
                } catch {
                    _ = try? await self.raw("ROLLBACK")
                    throw error
                }
            }
        }
    }

    /// The writes of ``SQLDatabase/writeTogether(_:)`` as one piece of work: `BEGIN IMMEDIATE`, each write and
    /// `COMMIT`, `ROLLBACK` when one fails; on the calling thread when the connection is free, else in one hand-off to
    /// its thread (``withConnection(since:_:)``). The lock is held throughout, as ``transaction(_:)`` holds it.
    @discardableResult
    func transaction(running writes: [SQLWrite]) async throws -> [[SQLRow]] {
        let queued = ContinuousClock.now
        let returned = try await withConnection(since: queued) { handle in
            try handle.run("BEGIN IMMEDIATE", [])
            do {
                let returned = try writes.map { try handle.run($0.sql, $0.binds) }
                try handle.run("COMMIT", [])
                return returned
            } catch {
                _ = try? handle.run("ROLLBACK", [])
                throw error
            }
        }
        if !writes.isEmpty { writeHealth?.wrote(freeSpace: freeSpace) }
        return returned
    }

    /// How many prepared statements the connection keeps (at most ``SQLiteHandle/statementLimit``).
    func keptStatements() async throws -> Int {
        let handle = handle
        return try await lock.withLock { try await Self.run(on: self.thread) { handle.keptStatements } }
    }

    /// How often SQLite has prepared the kept statement for `sql` again (``SQLiteHandle/timesPreparedAgain(_:)``).
    func timesPreparedAgain(_ sql: String) async throws -> Int32? {
        let handle = handle
        return try await lock.withLock { try await Self.run(on: self.thread) { handle.timesPreparedAgain(sql) } }
    }

    /// The kept statements, the writer's and the readers', that SQLite has prepared again
    /// (``SQLiteHandle/statementsPreparedAgain``).
    func statementsPreparedAgain() async throws -> [String] {
        let handle = handle
        let written = try await lock.withLock { try await Self.run(on: self.thread) { handle.statementsPreparedAgain } }
        return written + readers.flatMap { slot in slot.state.withLock { $0.handle.statementsPreparedAgain } }
    }

    func ping() async throws {
        try await query("SELECT 1", [])
    }

    /// Closes the connection (after the statements before it) and stops its thread; statements after it fail.
    func close() async throws {
        for slot in readers { slot.state.withLock { $0.handle.close() } }
        let (handle, thread) = (handle, thread)
        try await lock.withLock {
            try await Self.run(on: thread) { handle.close() }
            try await thread.shutdownGracefully()
        }
    }

    /// Runs statements of a transaction that already holds the lock.
    private struct Transaction: SQLExecutor {
        let db: SQLiteDatabase
        /// Whether a statement that writes ran in it: its COMMIT then wrote to the disk.
        let wrote = NIOLockedValueBox(false)
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            if !PostgresDatabase.isRead(sql) { wrote.withLockedValue { $0 = true } }
            return try await db.raw(sql, binds)
        }
    }
}

/// A FIFO mutual-exclusion lock for async code: waiters resume in arrival order. Taking a free lock and letting it
/// go are a mutex's lock and unlock on the calling thread (no hop to an actor's executor); only a caller that finds
/// it held suspends.
final class AsyncLock: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Takes the lock if it is free, without waiting; true when the caller now holds it.
    func tryLock() -> Bool {
        state.withLock { state in
            if state.locked { return false }
            state.locked = true
            return true
        }
    }

    func lock() async {
        if tryLock() { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let taken = state.withLock { state in
                if state.locked {
                    state.waiters.append(continuation)
                    return false
                }
                state.locked = true
                return true
            }
            if taken { continuation.resume() }
        }
    }

    /// How many callers wait for the lock (tests).
    var waiting: Int { state.withLock(\.waiters.count) }

    /// Lets go of the lock: the first waiter, if any, holds it now.
    func unlock() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }

    func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await lock()
        defer { unlock() }
        return try await body()
    }
}

/// Creates `path` with `mode`, failing if anything is there (`O_EXCL` follows no link); true when created. At file
/// scope, where `open` is the C library's and not ``SQLiteDatabase/open(_:logger:metrics:busyTimeout:)``.
private func createExclusively(_ path: String, mode: mode_t) -> Bool {
    let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode)
    if fd >= 0 { _ = close(fd) }
    return fd >= 0
}
