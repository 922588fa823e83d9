import GatehouseDomain
import NIOPosix
import Synchronization

/// Runs the keyed reads (``KeyedRead``) that wait at the same time as one statement: while a read of one kind is in
/// flight on an event loop, the reads of that kind that its requests ask for wait, and when it ends they run
/// together (`key = ANY($1)`), each answered with the rows of its key.
///
/// Why: on PostgreSQL a statement's round trip — the query written to the socket, the server's process woken, the
/// answer read back — costs Gatehouse more CPU than the rest of a refresh beside its signature
/// (`Benchmarks/PROFILING.md`), and the same round trip carries many keys for little more. An idle server never
/// waits here: a read with nothing in flight runs at once, as one key. Under load the reads of a loop share round
/// trips, so a statement's cost is shared by the requests that arrived while the one before was on its way.
///
/// What it does not change:
/// - Every read still starts after its request asked for it (it waits for the read in flight, then runs in the
///   next statement), so it sees every write committed before: a session revoked before a refresh asks is seen
///   revoked.
/// - A read waiting here waits for the statements ahead of it (first come, first served, at most
///   ``maximumBatch`` keys each: one, unless more than that many wait), each under the database's deadlines (the
///   lease timeout, `query_timeout`); a cancelled request's read still ends with its statement.
/// - A read fails only as it would have failed alone. When the database is unavailable, the statement's reads fail
///   with it, and so do the reads waiting behind it, at once (``next(_:_:_:after:)``): a stalled database never holds
///   a queue of reads for a timeout each. When the statement itself is refused (a key the database does not take),
///   each of its reads runs again alone, and only the one at fault fails.
/// - Reads are grouped per event loop (and per kind), so a batch's answers resume their requests on the loop they
///   run on, without waking another thread.
final class ReadBatcher: Sendable {
    /// The most keys one statement carries; more wait for the next.
    static let maximumBatch = 64

    private struct Waiting {
        let key: String
        let continuation: CheckedContinuation<[SQLRow], any Error>
    }

    private struct Lane {
        var running = false
        var waiting: [Waiting] = []

        /// Marks the lane running if it was idle: whether the caller runs now.
        mutating func start() -> Bool {
            if running { return false }
            running = true
            return true
        }
    }

    private struct LaneKey: Hashable {
        let read: String
        let loop: ObjectIdentifier?
    }

    private let lanes = Mutex<[LaneKey: Lane]>([:])

    /// The rows of `read` for `key`, read alone when no read of its kind is in flight on this loop, else with the
    /// others that wait for it.
    func rows(of read: KeyedRead, key: String, from database: some KeyedReads) async throws -> [SQLRow] {
        let lane = LaneKey(read: read.name, loop: MultiThreadedEventLoopGroup.currentEventLoop.map { ObjectIdentifier($0 as AnyObject) })
        if lanes.withLock({ lanes in lanes[lane, default: Lane()].start() }) {
            do {
                let rows = try await database.read(read, key: key)
                next(read, lane, database, after: nil)
                return rows
            } catch {
                next(read, lane, database, after: error)
                throw error
            }
        }
        return try await withCheckedThrowingContinuation { continuation in
            let waiting = Waiting(key: key, continuation: continuation)
            // The read in flight may have ended since: then this one runs now, as the next batch.
            let leads = lanes.withLock { lanes -> Bool in
                if lanes[lane, default: Lane()].start() { return true }
                lanes[lane]!.waiting.append(waiting)
                return false
            }
            if leads { launch([waiting], read, lane, database) }
        }
    }

    /// The reads of `read`'s kind waiting, on every loop (for tests).
    func waiting(_ read: KeyedRead) -> Int {
        lanes.withLock { lanes in lanes.filter { $0.key.read == read.name }.reduce(0) { $0 + $1.value.waiting.count } }
    }

    /// Starts the next batch of `lane`, if any waits; else the lane is idle. After a statement that failed because
    /// the database is unavailable (`failure`), every read waiting fails with it instead: a database that failed one
    /// read now would most likely fail theirs, each after the same wait in turn (a lease timeout, a deadline), while
    /// more requests queued behind them. So a read waits here for at most the statement in flight and its own.
    private func next(_ read: KeyedRead, _ lane: LaneKey, _ database: some KeyedReads, after failure: (any Error)?) {
        let unavailable = (failure as? StoreError)?.isInfrastructure ?? false
        let batch = lanes.withLock { lanes -> [Waiting] in
            guard var state = lanes[lane] else { return [] }
            let batch = unavailable ? state.waiting : Array(state.waiting.prefix(Self.maximumBatch))
            state.waiting.removeFirst(batch.count)
            if batch.isEmpty || unavailable { state.running = false }
            lanes[lane] = state
            return batch
        }
        if unavailable, let failure {
            for waiting in batch { waiting.continuation.resume(throwing: failure) }
        } else if !batch.isEmpty {
            launch(batch, read, lane, database)
        }
    }

    /// Runs `batch` in a task of its own, on this loop after what runs now (no other thread is woken for it).
    /// Detached: it serves many requests, and must not carry the task-local values of the one that happened to start it.
    private func launch(_ batch: [Waiting], _ read: KeyedRead, _ lane: LaneKey, _ database: some KeyedReads) {
        Task.detached(executorPreference: EventLoopTaskExecutor.ofCurrentThread) {
            let failure = await self.run(batch, read, database)
            self.next(read, lane, database, after: failure)
        }
    }

    /// Runs `batch` and answers its reads; returns the statement's failure, if it failed.
    private func run(_ batch: [Waiting], _ read: KeyedRead, _ database: some KeyedReads) async -> (any Error)? {
        if batch.count == 1 {
            do {
                batch[0].continuation.resume(returning: try await database.read(read, key: batch[0].key))
                return nil
            } catch {
                batch[0].continuation.resume(throwing: error)
                return error
            }
        }
        var keys: [String] = []
        var seen = Set<ExactKey>()
        for waiting in batch where seen.insert(ExactKey(waiting.key)).inserted { keys.append(waiting.key) }
        do {
            let rows = try await database.read(read, keys: keys)
            var byKey: [ExactKey: [SQLRow]] = [:]
            for row in rows { byKey[ExactKey(try row.text(read.keyColumn)), default: []].append(row) }
            for waiting in batch { waiting.continuation.resume(returning: byKey[ExactKey(waiting.key)] ?? []) }
            return nil
        } catch let error as StoreError where error.isInfrastructure {
            for waiting in batch { waiting.continuation.resume(throwing: error) }
            return error
        } catch {
            // The statement itself was refused, which one key's value may have caused (text the database does not
            // take): each read runs alone, so that it fails only its own request, as it would have without the batch.
            for waiting in batch {
                do { waiting.continuation.resume(returning: try await database.read(read, key: waiting.key)) } catch {
                    waiting.continuation.resume(throwing: error)
                }
            }
            return nil
        }
    }
}

/// A key compared by its UTF-8 bytes, as the database compares text: two `String`s are equal when they are
/// canonically equivalent ("K" and the Kelvin sign U+212A), and a key presented by a client must never be answered
/// with the rows of another key it merely resembles.
private struct ExactKey: Hashable {
    let bytes: [UInt8]

    init(_ key: String) { bytes = Array(key.utf8) }
}

/// A database that runs ``KeyedRead``s for ``ReadBatcher``.
protocol KeyedReads: Sendable {
    /// The rows of `read.sql` for `key`.
    func read(_ read: KeyedRead, key: String) async throws -> [SQLRow]
    /// The rows of `read.batchSQL` for `keys` (distinct, more than one), in one statement.
    func read(_ read: KeyedRead, keys: [String]) async throws -> [SQLRow]
}
