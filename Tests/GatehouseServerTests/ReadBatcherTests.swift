import Foundation
import GatehouseDomain
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
        let db = GatedReads(holding: true)
        let batcher = ReadBatcher()
        let first = Task { try await batcher.rows(of: Self.read, key: "a", from: db) }
        await db.started(1)
        // Four reads (one key twice) arrive while "a" is in flight.
        let keys = ["b", "c", "b", "d"]
        let waiting = keys.map { key in Task { (key, try await batcher.rows(of: Self.read, key: key, from: db)) } }
        try await until { batcher.waiting(Self.read) == keys.count }
        #expect(db.calls == [.one("a")], "nothing more runs while a read is in flight")
        db.release()
        #expect(try await first.value.map(\.values) == GatedReads.rows(of: "a").map(\.values))
        for task in waiting {
            let (key, rows) = try await task.value
            // Key "c" has two rows, in the statement's order; no read gets another key's rows.
            #expect(rows.map(\.values) == GatedReads.rows(of: key).map(\.values), "\(key)")
        }
        // One statement for the three keys (each once), in whatever order the four tasks queued.
        #expect(db.calls.count == 2)
        guard db.calls.count == 2, case .batch(let batched) = db.calls[1] else { Issue.record("\(db.calls)"); return }
        #expect(batched.count == 3 && Set(batched) == ["b", "c", "d"], "\(batched)")
        // The lane is idle again: the next read runs alone.
        _ = try await batcher.rows(of: Self.read, key: "e", from: db)
        #expect(db.calls.last == .one("e"))
    }

    /// Keys are compared as the database compares text, byte for byte: a key that Swift calls equal (the Kelvin sign
    /// and "K" are canonically equivalent) is another key, answered with its own rows (here none), never a neighbour's.
    @Test func aKeyThatOnlyResemblesAnotherGetsNoneOfItsRows() async throws {
        let db = GatedReads(holding: true)
        let batcher = ReadBatcher()
        let first = Task { try await batcher.rows(of: Self.read, key: "a", from: db) }
        await db.started(1)
        #expect("K" == "\u{212A}")
        let owner = Task { try await batcher.rows(of: Self.read, key: "K", from: db) }
        try await until { batcher.waiting(Self.read) == 1 }
        let lookalike = Task { try await batcher.rows(of: Self.read, key: "\u{212A}", from: db) }
        try await until { batcher.waiting(Self.read) == 2 }
        db.release()
        _ = try await first.value
        #expect(try await owner.value.map(\.values) == GatedReads.rows(of: "K").map(\.values))
        #expect(try await lookalike.value.isEmpty)
        // Both keys went to the database, each as itself (compared by bytes: the two Strings are equal).
        guard case .batch(let keys)? = db.calls.last else { Issue.record("no batch: \(db.calls)"); return }
        #expect(keys.map { Array($0.utf8) } == [Array("K".utf8), Array("\u{212A}".utf8)])
    }

    @Test func aFailedStatementFailsTheReadsItCarriedAndNoOthers() async throws {
        let db = GatedReads(holding: true)
        let batcher = ReadBatcher()
        let first = Task { try await batcher.rows(of: Self.read, key: "a", from: db) }
        await db.started(1)
        let waiting = ["b", "c"].map { key in Task { try await batcher.rows(of: Self.read, key: key, from: db) } }
        try await until { batcher.waiting(Self.read) == 2 }
        db.failBatches()
        db.release()
        #expect(try await first.value.count == 1)
        for task in waiting {
            await #expect(throws: GatedReads.Refused.self) { try await task.value }
        }
        // The failure did not stick to the lane.
        #expect(try await batcher.rows(of: Self.read, key: "f", from: db).count == 1)
    }

    /// A database that does not answer fails the read in flight as unavailable after its timeout; the reads that
    /// queued behind it fail with it at once, instead of a timeout each in turn. The next read tries again.
    @Test func whenTheDatabaseIsUnavailableTheReadsWaitingFailWithTheReadInFlight() async throws {
        let db = GatedReads(holding: true)
        db.failOnes(with: StoreError.unavailable("no database connection within 5 seconds"))
        let batcher = ReadBatcher()
        let first = Task { try await batcher.rows(of: Self.read, key: "a", from: db) }
        await db.started(1)
        let waiting = ["b", "c", "d"].map { key in Task { try await batcher.rows(of: Self.read, key: key, from: db) } }
        try await until { batcher.waiting(Self.read) == 3 }
        db.release()
        for task in [first] + waiting {
            await #expect(throws: StoreError.unavailable("no database connection within 5 seconds")) { try await task.value }
        }
        #expect(db.calls == [.one("a")], "no statement of their own")
        db.failOnes(with: nil)
        #expect(try await batcher.rows(of: Self.read, key: "e", from: db).count == 1)
        #expect(db.calls == [.one("a"), .one("e")])
    }

    @Test func aStatementCarriesAtMostTheLargestBatchTheRestGoNext() async throws {
        let db = GatedReads(holding: true)
        let batcher = ReadBatcher()
        let first = Task { try await batcher.rows(of: Self.read, key: "first", from: db) }
        await db.started(1)
        let count = ReadBatcher.maximumBatch + 1
        let waiting = (0..<count).map { n in Task { try await batcher.rows(of: Self.read, key: "k\(n)", from: db) } }
        try await until { batcher.waiting(Self.read) == count }
        db.release()
        _ = try await first.value
        for task in waiting { #expect(try await task.value.count == 1) }
        let calls = db.calls
        #expect(calls.count == 3, "\(calls.count)")
        guard calls.count == 3, case .batch(let big) = calls[1], case .one(let last) = calls[2] else { return }
        #expect(big.count == ReadBatcher.maximumBatch)
        #expect(Set(big + [last]) == Set((0..<count).map { "k\($0)" }))
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
    enum Call: Equatable { case one(String), batch([String]) }

    private struct State {
        var calls: [Call] = []
        var holding: Bool
        var held: [CheckedContinuation<Void, Never>] = []
        var startedWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
        var failingBatches = false
        var failingOnes: StoreError?
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

    func release() {
        let held = state.withLock { state in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    func failBatches() { state.withLock { $0.failingBatches = true } }

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
        let (ready, hold) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
            state.calls.append(call)
            let count = state.calls.count
            let ready = state.startedWaiters.filter { $0.0 <= count }.map(\.1)
            state.startedWaiters.removeAll { $0.0 <= count }
            return (ready, state.holding)
        }
        for continuation in ready { continuation.resume() }
        if hold {
            await withCheckedContinuation { continuation in
                let still = state.withLock { state -> Bool in
                    guard state.holding else { return false }
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
        return Self.rows(of: key)
    }

    func read(_ read: KeyedRead, keys: [String]) async throws -> [SQLRow] {
        await begin(.batch(keys))
        if state.withLock({ $0.failingBatches }) { throw Refused() }
        // Not the keys' order, and one key's rows apart: the batcher groups them by the key column.
        let rows = keys.reversed().map { Self.rows(of: $0) }
        return rows.compactMap(\.first) + rows.flatMap { $0.dropFirst() }
    }
}
