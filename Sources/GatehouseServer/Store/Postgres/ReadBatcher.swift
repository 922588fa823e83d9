import GatehouseDomain
import NIOCore
import NIOPosix
import Synchronization

/// Runs the keyed reads (``KeyedRead``) that wait at the same time as one statement: while a read of one kind is in
/// flight, the reads of that kind that requests ask for wait, and when it ends they run together (`key = ANY($1)`),
/// each answered with the rows of its key.
///
/// Why: on PostgreSQL a statement's round trip — the query written to the socket, the server's process woken, the
/// answer read back — costs Gatehouse more CPU than the rest of a refresh beside its signature
/// (`Benchmarks/PROFILING.md`), and the same round trip carries many keys for little more. An idle server never
/// waits here: a read with nothing in flight runs at once, as one key. Under load the reads share round trips, so a
/// statement's cost is shared by the requests that arrived while the one before was on its way.
///
/// What it does not change:
/// - Every read still starts after its request asked for it (it waits for the read in flight, then runs in the
///   next statement), so it sees every write committed before: a session revoked before a refresh asks is seen
///   revoked.
/// - A read waiting here waits for the statements ahead of it (first come, first served, at most
///   ``maximumBatch`` keys each: one, unless more than that many wait), each under the database's deadlines (the
///   lease timeout, `query_timeout`); a cancelled request's read still ends with its statement.
/// - A read fails only as it would have failed alone. When the database is unavailable, the statement's reads fail
///   with it, and so do the reads waiting behind it, at once (``next(_:_:after:)``): a stalled database never holds
///   a queue of reads for a timeout each. When the statement itself is refused (a key the database does not take),
///   each of its reads runs again alone, and only the one at fault fails.
///
/// One lane per kind of read serves every event loop: the reads of all the server's requests share a statement, and
/// each answer resumes its request on the loop it asked from (``answer(_:)``: one hand-off per other loop and
/// statement). Lanes per loop, as this was first, carried half as many reads per statement on two loops, and a
/// statement costs more than the hand-offs it saves (`Benchmarks/PROFILING.md`, 2026-12-01). So that one lane cannot
/// cap what a distant database serves (a round trip of milliseconds carries at most ``maximumBatch`` keys), a second
/// statement starts beside the one in flight when a full batch waits, up to ``maximumInFlight`` at once; below that
/// load one statement is in flight at a time.
final class ReadBatcher: Sendable {
    /// The most keys one statement carries; more wait for the next.
    static let maximumBatch = 64

    /// The most statements of one kind in flight at once; the next starts beside those only when a full batch waits.
    let maximumInFlight: Int

    /// `maximumInFlight`: at least one.
    init(maximumInFlight: Int = 1) {
        self.maximumInFlight = max(1, maximumInFlight)
    }

    private struct Waiting {
        let key: String
        let continuation: CheckedContinuation<[SQLRow], any Error>
        /// The event loop the read was asked from (nil off the loops): where its answer resumes it.
        let loop: (any EventLoop)?
    }

    private struct Lane {
        /// Statements in flight.
        var running = 0
        var waiting: [Waiting] = []

        /// Marks a statement running if none was: whether the caller runs now.
        mutating func start() -> Bool {
            if running > 0 { return false }
            running = 1
            return true
        }

        /// A full batch to run beside the statements in flight, when one waits and fewer than `limit` are in flight.
        mutating func overflow(limit: Int) -> [Waiting]? {
            guard waiting.count >= ReadBatcher.maximumBatch, running < limit else { return nil }
            running += 1
            defer { waiting.removeFirst(ReadBatcher.maximumBatch) }
            return Array(waiting.prefix(ReadBatcher.maximumBatch))
        }
    }

    /// The lanes, by ``KeyedRead/name``.
    private let lanes = Mutex<[String: Lane]>([:])

    /// The rows of `read` for `key`, read alone when no read of its kind is in flight, else with the others that wait
    /// for it.
    func rows(of read: KeyedRead, key: String, from database: some KeyedReads) async throws -> [SQLRow] {
        let lane = read.name
        if lanes.withLock({ lanes in lanes[lane, default: Lane()].start() }) {
            do {
                let rows = try await database.read(read, key: key)
                next(read, database, after: nil)
                return rows
            } catch {
                next(read, database, after: error)
                throw error
            }
        }
        return try await withCheckedThrowingContinuation { continuation in
            let waiting = Waiting(key: key, continuation: continuation, loop: MultiThreadedEventLoopGroup.currentEventLoop)
            // The read in flight may have ended since: then this one runs now, as the next batch.
            let batch = lanes.withLock { lanes -> [Waiting]? in
                if lanes[lane, default: Lane()].start() { return [waiting] }
                lanes[lane]!.waiting.append(waiting)
                return lanes[lane]!.overflow(limit: maximumInFlight)
            }
            if let batch { launch(batch, read, database) }
        }
    }

    /// The reads of `read`'s kind waiting (for tests).
    func waiting(_ read: KeyedRead) -> Int {
        lanes.withLock { lanes in lanes[read.name]?.waiting.count ?? 0 }
    }

    /// The statements of `read`'s kind in flight (for tests).
    func inFlight(_ read: KeyedRead) -> Int {
        lanes.withLock { lanes in lanes[read.name]?.running ?? 0 }
    }

    /// Starts the next batch of `read`'s lane when a statement of it ends, if any waits; else that statement's place
    /// in the lane is free. After a statement that failed because the database is unavailable (`failure`), every read
    /// waiting fails with it instead: a database that failed one read now would most likely fail theirs, each after
    /// the same wait in turn (a lease timeout, a deadline), while more requests queued behind them. So a read waits
    /// here for at most the statement in flight and its own.
    private func next(_ read: KeyedRead, _ database: some KeyedReads, after failure: (any Error)?) {
        let unavailable = (failure as? StoreError)?.isInfrastructure ?? false
        let batch = lanes.withLock { lanes -> [Waiting] in
            guard var state = lanes[read.name] else { return [] }
            let batch = unavailable ? state.waiting : Array(state.waiting.prefix(Self.maximumBatch))
            state.waiting.removeFirst(batch.count)
            if batch.isEmpty || unavailable { state.running -= 1 }
            lanes[read.name] = state
            return batch
        }
        if unavailable, let failure {
            answer(batch, with: .failure(failure))
        } else if !batch.isEmpty {
            launch(batch, read, database)
        }
    }

    /// Runs `batch` in a task of its own, on this loop after what runs now (no other thread is woken for it).
    /// Detached: it serves many requests, and must not carry the task-local values of the one that happened to start it.
    private func launch(_ batch: [Waiting], _ read: KeyedRead, _ database: some KeyedReads) {
        Task.detached(executorPreference: EventLoopTaskExecutor.ofCurrentThread) {
            let failure = await self.run(batch, read, database)
            self.next(read, database, after: failure)
        }
    }

    /// Runs `batch` and answers its reads; returns the statement's failure, if it failed.
    private func run(_ batch: [Waiting], _ read: KeyedRead, _ database: some KeyedReads) async -> (any Error)? {
        if batch.count == 1 {
            do {
                answer(batch, with: .success(try await database.read(read, key: batch[0].key)))
                return nil
            } catch {
                answer(batch, with: .failure(error))
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
            answer(batch.map { ($0, .success(byKey[ExactKey($0.key)] ?? [])) })
            return nil
        } catch let error as StoreError where error.isInfrastructure {
            answer(batch, with: .failure(error))
            return error
        } catch {
            // The statement itself was refused, which one key's value may have caused (text the database does not
            // take): each read runs alone, so that it fails only its own request, as it would have without the batch.
            for waiting in batch {
                do { answer([waiting], with: .success(try await database.read(read, key: waiting.key))) } catch {
                    answer([waiting], with: .failure(error))
                }
            }
            return nil
        }
    }

    private func answer(_ batch: [Waiting], with result: Result<[SQLRow], any Error>) {
        answer(batch.map { ($0, result) })
    }

    /// Resumes each read with its answer on the event loop its request asked from, where its connection is: the reads
    /// of the loop running here at once, those of each other loop in one job handed to that loop (one wake-up per
    /// loop and statement, not per read). A request resumed here instead would run the rest of its work on this loop
    /// and hand its answer's write to its connection's loop, one hop per request.
    private func answer(_ answers: [(Waiting, Result<[SQLRow], any Error>)]) {
        let here = MultiThreadedEventLoopGroup.currentEventLoop.map { ObjectIdentifier($0) }
        var elsewhere: [ObjectIdentifier: (loop: any EventLoop, answers: [(Waiting, Result<[SQLRow], any Error>)])] = [:]
        for (waiting, result) in answers {
            guard let loop = waiting.loop, ObjectIdentifier(loop) != here else {
                waiting.continuation.resume(with: result)
                continue
            }
            elsewhere[ObjectIdentifier(loop), default: (loop, [])].answers.append((waiting, result))
        }
        for (loop, answers) in elsewhere.values {
            loop.execute {
                for (waiting, result) in answers { waiting.continuation.resume(with: result) }
            }
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
