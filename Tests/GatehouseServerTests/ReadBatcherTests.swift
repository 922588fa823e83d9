import Foundation
import GatehouseDomain
import NIOCore
import NIOPosix
@testable import GatehouseServer
import Synchronization
import Testing

/// ``ReadBatcher``: a keyed read with nothing in flight runs alone; the reads that wait for one in flight run
/// together, each answered with its own key's rows; a failed statement fails exactly the reads it carried.
struct ReadBatcherTests {
    static let read = KeyedRead("test", select: "SELECT id, n FROM t", key: "t.id", column: "id")

    @Test func aReadWithNothingInFlightRunsAloneAndAtOnce() async throws {
        let db = GatedReads(holding: false)
        let batcher = ReadBatcher()
        let rows = try await batcher.rows(of: Self.read, key: "a", from: db)
        #expect(rows.map(\.values) == GatedReads.rows(of: "a").map(\.values))
        let again = try await batcher.rows(of: Self.read, key: "b", from: db)
        #expect(again.map(\.values) == GatedReads.rows(of: "b").map(\.values))
        #expect(db.calls == [.one("a"), .one("b")])
    }

    @Test func readsThatWaitForOneInFlightRunAsOneStatementEachWithItsOwnRows() async throws {
        let (db, batcher) = (GatedReads(holding: true), ReadBatcher())
        let first = await inFlight("a", batcher, db)
        // Four reads (one key twice) arrive while "a" is in flight.
        let keys = ["b", "c", "b", "d"]
        let waiting = try await queue(keys, batcher, db)
        #expect(db.calls == [.one("a")], "nothing more runs while a read is in flight")
        db.release()
        #expect(try await first.value.map(\.values) == GatedReads.rows(of: "a").map(\.values))
        for (key, task) in zip(keys, waiting) {
            // Key "c" has two rows, in the statement's order; no read gets another key's rows.
            #expect(try await task.value.map(\.values) == GatedReads.rows(of: key).map(\.values), "\(key)")
        }
        // One statement for the three keys (each once), in whatever order the four tasks queued.
        #expect(db.calls.count == 2)
        guard db.calls.count == 2, case .batch(let batched) = db.calls[1] else { Issue.record("\(db.calls)"); return }
        #expect(batched.count == 3 && Set(batched) == ["b", "c", "d"], "\(batched)")
        // The lane is idle again: the next read runs alone.
        try await until { batcher.inFlight(Self.read) == 0 }
        _ = try await batcher.rows(of: Self.read, key: "e", from: db)
        #expect(db.calls.last == .one("e"))
    }

    /// Keys are compared as the database compares text, byte for byte: a key that Swift calls equal (the Kelvin sign
    /// and "K" are canonically equivalent) is another key, answered with its own rows (here none), never a neighbour's.
    @Test func aKeyThatOnlyResemblesAnotherGetsNoneOfItsRows() async throws {
        let (db, batcher) = (GatedReads(holding: true), ReadBatcher())
        let first = await inFlight("a", batcher, db)
        #expect("K" == "\u{212A}")
        // One after the other, so that the batch's order is known.
        let owner = try await queue(["K"], batcher, db)[0]
        let lookalike = try await queue(["\u{212A}"], batcher, db)[0]
        db.release()
        _ = try await first.value
        #expect(try await owner.value.map(\.values) == GatedReads.rows(of: "K").map(\.values))
        #expect(try await lookalike.value.isEmpty)
        // Both keys went to the database, each as itself (compared by bytes: the two Strings are equal).
        guard case .batch(let keys)? = db.calls.last else { Issue.record("no batch: \(db.calls)"); return }
        #expect(keys.map { Array($0.utf8) } == [Array("K".utf8), Array("\u{212A}".utf8)])
    }

    /// A statement the database refuses because of one key's value fails that key's read only: the others run again
    /// alone and get their rows, as they would have without the batch. An attacker's key cannot fail a neighbour.
    @Test func aKeyTheDatabaseRefusesFailsItsOwnReadAndNoOther() async throws {
        let (db, batcher) = (GatedReads(holding: true), ReadBatcher())
        db.refuse("bad\u{0}key")
        let first = await inFlight("a", batcher, db)
        let keys = ["b", "bad\u{0}key", "c"]
        let waiting = try await queue(keys, batcher, db)
        db.release()
        #expect(try await first.value.count == 1)
        #expect(try await waiting[0].value.map(\.values) == GatedReads.rows(of: "b").map(\.values))
        await #expect(throws: GatedReads.Refused.self) { try await waiting[1].value }
        #expect(try await waiting[2].value.map(\.values) == GatedReads.rows(of: "c").map(\.values))
        #expect(db.calls.count == 5, "the statement, then each of its reads alone: \(db.calls)")
        #expect(Set(db.calls.dropFirst(2)) == [.one("b"), .one("bad\u{0}key"), .one("c")])
        // The failure did not stick to the lane: no statement counted in flight (a leaked one fails here, at the
        // bound, instead of holding the next read for ever), and the next read runs.
        try await until { batcher.inFlight(Self.read) == 0 }
        #expect(try await batcher.rows(of: Self.read, key: "f", from: db).count == 1)
    }

    /// A database that does not answer fails a statement as unavailable after its timeout. Its reads fail with it,
    /// and so do those that queued behind it, at once, instead of a timeout each in turn. The next read tries again.
    @Test(arguments: [false, true])
    func whenTheDatabaseIsUnavailableEveryReadWaitingFailsWithTheStatementInFlight(batchFails: Bool) async throws {
        let (db, batcher) = (GatedReads(holding: true), ReadBatcher())
        let unavailable = StoreError.unavailable("no database connection within 5 seconds")
        // Either the read in flight fails, or (it succeeds and) the batch after it does, with reads queued behind it.
        if batchFails { db.failBatches(with: unavailable) } else { db.failOnes(with: unavailable) }
        let first = await inFlight("a", batcher, db)
        // One after the other, so that the batch's order is known.
        let carried = try await queue(["b"], batcher, db) + queue(["c"], batcher, db)
        var behind: [Task<[SQLRow], any Error>] = []
        if batchFails {
            db.release(holding: true)
            #expect(try await first.value.count == 1)
            await db.started(2)
            behind = try await queue(["d", "e"], batcher, db)
        }
        db.release()
        for task in carried + behind {
            await #expect(throws: unavailable) { try await task.value }
        }
        if !batchFails { await #expect(throws: unavailable) { try await first.value } }
        #expect(db.calls == (batchFails ? [.one("a"), .batch(["b", "c"])] : [.one("a")]), "no statement of their own")
        db.failOnes(with: nil)
        try await until { batcher.inFlight(Self.read) == 0 }
        #expect(try await batcher.rows(of: Self.read, key: "f", from: db).count == 1)
        #expect(db.calls.last == .one("f"))
    }

    @Test func aStatementCarriesAtMostTheLargestBatchTheRestGoNext() async throws {
        let (db, batcher) = (GatedReads(holding: true), ReadBatcher())
        let first = await inFlight("first", batcher, db)
        let count = ReadBatcher.maximumBatch + 1
        let waiting = try await queue((0..<count).map { "k\($0)" }, batcher, db)
        db.release()
        _ = try await first.value
        for task in waiting { #expect(try await task.value.count == 1) }
        let calls = db.calls
        #expect(calls.count == 3, "\(calls.count)")
        guard calls.count == 3, case .batch(let big) = calls[1], case .one(let last) = calls[2] else { return }
        #expect(big.count == ReadBatcher.maximumBatch)
        #expect(Set(big + [last]) == Set((0..<count).map { "k\($0)" }))
        try await until { batcher.inFlight(Self.read) == 0 }
    }

    /// The reads of every event loop share one lane: reads asked from both loops while one is in flight run as one
    /// statement, and each resumes on the loop it was asked from (where its request's connection is), not on the
    /// loop that ran the statement.
    @Test func readsFromEveryEventLoopShareOneStatementAndEachResumesOnItsOwnLoop() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loops = Array(group.makeIterator())
        let executor = EventLoopTaskExecutor(group: group)
        let (db, batcher) = (GatedReads(holding: true), ReadBatcher())
        // A read of `key` asked from `loop`: its rows, and whether its request came back on that loop.
        func read(_ key: String, on loop: any EventLoop) async throws -> Task<([SQLRow], Bool), any Error> {
            try await loop.submit {
                Task(executorPreference: executor) {
                    let rows = try await batcher.rows(of: Self.read, key: key, from: db)
                    return (rows, MultiThreadedEventLoopGroup.currentEventLoop === loop)
                }
            }.get()
        }
        let first = try await read("a", on: loops[0])
        await db.started(1)
        let keys = ["b", "c", "d", "e"]
        var waiting: [Task<([SQLRow], Bool), any Error>] = []
        for (index, key) in keys.enumerated() { waiting.append(try await read(key, on: loops[index % 2])) }
        try await until { batcher.waiting(Self.read) == keys.count }
        #expect(db.calls == [.one("a")], "nothing more runs while a read is in flight, whichever loop asks")
        db.release()
        let (rows, _) = try await first.value
        #expect(rows.map(\.values) == GatedReads.rows(of: "a").map(\.values))
        for (key, task) in zip(keys, waiting) {
            let (rows, home) = try await task.value
            #expect(rows.map(\.values) == GatedReads.rows(of: key).map(\.values), "\(key)")
            #expect(home, "\(key) resumed on another loop than the one it was asked from")
        }
        #expect(db.calls.count == 2, "one statement for the reads of both loops: \(db.calls)")
        if case .batch(let batched)? = db.calls.last { #expect(Set(batched) == Set(keys)) } else { Issue.record("\(db.calls)") }
        try await group.shutdownGracefully()
    }

    /// One lane must not cap what a distant database serves: when a full batch waits, it runs beside the statement in
    /// flight, up to the batcher's limit; past the limit, full batches wait for a statement to end.
    @Test func aFullBatchRunsBesideTheStatementInFlightUpToTheLimit() async throws {
        let (db, batcher) = (GatedReads(holding: true), ReadBatcher(maximumInFlight: 2))
        let first = await inFlight("first", batcher, db)
        let full = (0..<ReadBatcher.maximumBatch).map { "k\($0)" }
        let fullReads = full.map { key in Task { try await batcher.rows(of: Self.read, key: key, from: db) } }
        try await until { db.calls.count == 2 }
        #expect(batcher.waiting(Self.read) == 0)
        guard db.calls.count == 2, case .batch(let beside) = db.calls[1] else { Issue.record("\(db.calls)"); return }
        #expect(Set(beside) == Set(full), "the full batch started while the first read is still held")
        // Two statements in flight, the limit: the next full batch waits.
        let more = (0..<ReadBatcher.maximumBatch).map { "m\($0)" }
        let moreReads = try await queue(more, batcher, db)
        #expect(db.calls.count == 2)
        db.release()
        _ = try await first.value
        for (key, task) in zip(full + more, fullReads + moreReads) {
            #expect(try await task.value.map(\.values) == GatedReads.rows(of: key).map(\.values), "\(key)")
        }
        #expect(db.calls.count == 3, "\(db.calls.count)")
        if case .batch(let after)? = db.calls.last { #expect(Set(after) == Set(more)) } else { Issue.record("\(db.calls)") }
        // Both places in the lane are free again: the next read runs alone.
        try await until { batcher.inFlight(Self.read) == 0 }
        _ = try await batcher.rows(of: Self.read, key: "z", from: db)
        #expect(db.calls.last == .one("z"))
    }

    /// A read of `key` started and in flight (the database holds it).
    private func inFlight(_ key: String, _ batcher: ReadBatcher, _ db: GatedReads) async -> Task<[SQLRow], any Error> {
        let started = db.calls.count
        let task = Task { try await batcher.rows(of: Self.read, key: key, from: db) }
        await db.started(started + 1)
        return task
    }

    /// Reads of `keys`, started once a read is in flight, each returned once it waits in the batcher.
    private func queue(_ keys: [String], _ batcher: ReadBatcher, _ db: GatedReads) async throws -> [Task<[SQLRow], any Error>] {
        let before = batcher.waiting(Self.read)
        let tasks = keys.map { key in Task { try await batcher.rows(of: Self.read, key: key, from: db) } }
        try await until { batcher.waiting(Self.read) == before + keys.count }
        return tasks
    }

    /// Waits for `condition`, at most 10 s (a regression fails instead of hanging).
    private func until(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            try #require(ContinuousClock.now < deadline, "timed out")
            await Task.yield()
        }
    }
}

/// Reads whose first statement waits until released; records every statement.
private final class GatedReads: KeyedReads {
    struct Refused: Error {}
    enum Call: Hashable { case one(String), batch([String]) }

    private struct State {
        var calls: [Call] = []
        var holding: Bool
        /// Statements started before this index were released (`release(holding:)`), held or not yet.
        var released = 0
        var held: [CheckedContinuation<Void, Never>] = []
        var startedWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
        var failingBatches: StoreError?
        var failingOnes: StoreError?
        var refused: [UInt8]?
    }

    private let state: Mutex<State>

    init(holding: Bool) { state = Mutex(State(holding: holding)) }

    var calls: [Call] { state.withLock { $0.calls } }

    /// One row per key, two for "c", none for the Kelvin sign (a database compares text by its bytes: it is not
    /// "K", whose row it has).
    static func rows(of key: String) -> [SQLRow] {
        let columns = SQLColumns(["id", "n"])
        if key.utf8.elementsEqual("\u{212A}".utf8) { return [] }
        return (key.utf8.elementsEqual("c".utf8) ? [1, 2] : [1]).map { SQLRow(columns: columns, cells: [.text(key), .int($0)]) }
    }

    /// Lets the statements started so far go on, including one that has started but not yet begun to wait; with
    /// `holding`, the next ones are held again.
    func release(holding: Bool = false) {
        let held = state.withLock { state in
            state.holding = holding
            state.released = state.calls.count
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    /// Statements for several keys fail with `error`.
    func failBatches(with error: StoreError) { state.withLock { $0.failingBatches = error } }

    /// Every statement that carries `key` is refused, as a database refuses text it does not take.
    func refuse(_ key: String) { state.withLock { $0.refused = Array(key.utf8) } }

    private func refuses(_ keys: [String]) -> Bool {
        state.withLock { state in keys.contains { key in state.refused.map { key.utf8.elementsEqual($0) } ?? false } }
    }

    /// One-key statements fail with `error` (nil: they succeed).
    func failOnes(with error: StoreError?) { state.withLock { $0.failingOnes = error } }

    /// Returns once `count` statements have started.
    func started(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.calls.count >= count { return true }
                state.startedWaiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func begin(_ call: Call) async {
        let (ready, hold, index) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool, Int) in
            state.calls.append(call)
            let count = state.calls.count
            let ready = state.startedWaiters.filter { $0.0 <= count }.map(\.1)
            state.startedWaiters.removeAll { $0.0 <= count }
            return (ready, state.holding, count - 1)
        }
        for continuation in ready { continuation.resume() }
        if hold {
            await withCheckedContinuation { continuation in
                // A release that came between the start and here was for this statement too: it goes on.
                let still = state.withLock { state -> Bool in
                    guard index >= state.released else { return false }
                    state.held.append(continuation)
                    return true
                }
                if !still { continuation.resume() }
            }
        }
    }

    func read(_ read: KeyedRead, key: String) async throws -> [SQLRow] {
        await begin(.one(key))
        if let error = state.withLock({ $0.failingOnes }) { throw error }
        if refuses([key]) { throw Refused() }
        return Self.rows(of: key)
    }

    func read(_ read: KeyedRead, keys: [String]) async throws -> [SQLRow] {
        await begin(.batch(keys))
        if let error = state.withLock({ $0.failingBatches }) { throw error }
        if refuses(keys) { throw Refused() }
        // Not the keys' order, and one key's rows apart: the batcher groups them by the key column.
        let rows = keys.reversed().map { Self.rows(of: $0) }
        return rows.compactMap(\.first) + rows.flatMap { $0.dropFirst() }
    }
}
