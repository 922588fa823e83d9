import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import NIOConcurrencyHelpers
import Testing

/// The rate limiter's counting: shared through the database, most hits admitted without a write, exact on one
/// instance, over by at most a share per further instance (``RateLimiter``).
@Suite struct RateLimiterTests {
    /// Hits one counter `times` times at `now` through `limiter`: how many were admitted.
    func admitted(_ limiter: RateLimiter, key: String = "app|login|ip|192.0.2.1", limit: Int, times: Int, now: Date) async throws -> Int {
        var admitted = 0
        for _ in 0..<times {
            let verdict = try #require(try await limiter.hit([(RateCounter(key: key, window: 300), limit)], now: now)[key])
            if verdict.count.hits <= limit { admitted += 1 }
        }
        return admitted
    }

    /// The rate_limits writes among `statements`.
    func writes(_ statements: [String]) -> Int { statements.filter { $0.contains("INSERT INTO rate_limits") }.count }

    @Test func oneInstanceIsExactAndWritesAboutOnceAShare() async throws {
        try await withGatehouse { gatehouse, _ in
            let recording = RecordingDatabase((gatehouse.env.store as! SQLStore).db)
            let limiter = RateLimiter(store: SQLStore(db: recording))
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            // A limit of 1,000 (a share of 100): 1,000 admitted of 1,050, the rest refused.
            let thousand = try await admitted(limiter, limit: 1000, times: 1050, now: now)
            #expect(thousand == 1000)
            // Far fewer writes than hits: one per share below the last share, one per hit in it, one for the first
            // refusal; the refusals after it cost nothing.
            let written = writes(recording.drain())
            #expect(written > 0 && written <= 1000 / 100 + 100 + 1, "\(written) writes")
            // A small limit is exact too: 3 of 5.
            let small = try await admitted(limiter, key: "app|login|id|small", limit: 3, times: 5, now: now)
            #expect(small == 3)
        }
    }

    /// The race is in the limiter, whatever the database: on an SQLite file always, and on PostgreSQL too when the
    /// suite runs there (about twenty upserts of one row at once through the test's pool of four connections).
    @Test func racingHitsOnOneInstanceAdmitExactlyTheLimit() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("racing-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        var databases: [DatabaseURL] = [.sqliteFile(path)]
        if TestDatabase.postgresAdmin != nil { databases.append(.sqliteMemory) }  // withGatehouse: a PostgreSQL database of its own
        for database in databases {
            try await withGatehouse(testConfiguration(database: database)) { gatehouse, _ in
                let limiter = RateLimiter(store: gatehouse.env.store)
                let now = Date(timeIntervalSince1970: 1_800_000_000)
                let key = "app|refresh|ip|198.51.100.9"
                let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                    for _ in 0..<60 {
                        group.addTask { try await limiter.hit([(RateCounter(key: key, window: 60), 20)], now: now)[key]!.count.hits <= 20 }
                    }
                    return try await group.reduce(into: [Bool]()) { $0.append($1) }
                }
                #expect(results.filter { $0 }.count == 20, "\(database)")
            }
        }
    }

    /// The race above made certain: the database answers a later write of a counter before an earlier one that
    /// carries hits admitted without a write. A hit judged by that later answer would not count them (limit 20:
    /// 22 admitted), so the later hits wait for the earlier write instead and the count stays exact. When that write
    /// fails, its hit and the hits waiting for it fail, and the hits it carried are pending again.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aWriteAnsweredOutOfOrderCannotPassTheLimit(heldWriteFails: Bool) async throws {
        try await withGatehouse { gatehouse, _ in
            let store = OutOfOrderCounts(gatehouse.env.store)
            let limiter = RateLimiter(store: store)
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|login|ip|198.51.100.7"
            @Sendable func hit() async throws -> RateLimiter.Verdict {
                try #require(try await limiter.hit([(RateCounter(key: key, window: 300), 20)], now: now)[key])
            }
            // A share of 20 is 2: hits 1–15 are admitted two here and every third written with them; after 15,
            // nothing is pending.
            let first = try await admitted(limiter, key: key, limit: 20, times: 15, now: now)
            try #require(first == 15)
            try #require(await limiter.pendingHits == 0)
            await store.holdNextWriteOfSeveralHits()
            let local = try await admitted(limiter, key: key, limit: 20, times: 2, now: now)
            try #require(local == 2)
            try #require(await limiter.pendingHits == 2)
            // Hit 18 writes itself with 16 and 17 and is held; seven more come while it is.
            let held = Task { try await hit() }
            await store.waitUntilHolding()
            let finished = NIOLockedValueBox(0)
            let later = (0..<7).map { _ in Task { defer { finished.withLockedValue { $0 += 1 } }; return try await hit() } }
            while await limiter.waitingHits + finished.withLockedValue({ $0 }) < later.count {
                try Task.checkCancellation()  // the time limit ends a regression that leaves a hit neither waiting nor done
                await Task.yield()
            }
            #expect(await store.writesWhileHolding == 0)
            await store.release(failing: heldWriteFails)
            var verdicts: [RateLimiter.Verdict] = []
            if heldWriteFails {
                await #expect(throws: OutOfOrderCounts.Failed.self) { try await held.value }
                for task in later { await #expect(throws: OutOfOrderCounts.Failed.self) { try await task.value } }
                #expect(await limiter.pendingHits == 2)
                for _ in 0..<7 { verdicts.append(try await hit()) }
            } else {
                verdicts.append(try await held.value)
                for task in later { verdicts.append(try await task.value) }
            }
            // Held or not, the places 18, 19 and 20 are left, and only they are admitted.
            #expect(verdicts.filter { $0.count.hits <= 20 }.count == 3, "\(verdicts.map(\.count.hits))")
            #expect(verdicts.filter(\.firstRefusal).count == 1)
            #expect(try await admitted(limiter, key: key, limit: 20, times: 1, now: now) == 0)
        }
    }

    /// A flush leaves alone a counter with a write under way (two writes of one counter at once could be answered
    /// out of order); its pending hits go with a later write.
    @Test(.timeLimit(.minutes(1))) func aFlushWaitsItsTurnBehindACountersWrite() async throws {
        try await withGatehouse { gatehouse, _ in
            let store = OutOfOrderCounts(gatehouse.env.store)
            let limiter = RateLimiter(store: store)
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|refresh|ip|198.51.100.8"
            // A share of 1,000 is 100: hits 1–100 are admitted here, and 101 writes them with itself and is held.
            try #require(try await admitted(limiter, key: key, limit: 1000, times: 100, now: now) == 100)
            try #require(await limiter.pendingHits == 100)
            await store.holdNextWriteOfSeveralHits()
            let held = Task { try await limiter.hit([(RateCounter(key: key, window: 300), 1000)], now: now) }
            await store.waitUntilHolding()
            #expect(try await admitted(limiter, key: key, limit: 1000, times: 100, now: now) == 100)
            try await limiter.flush(now: now)
            #expect(await store.writesWhileHolding == 0)
            #expect(await limiter.pendingHits == 100)
            await store.release()
            _ = try await held.value
            try await limiter.flush(now: now)
            #expect(await limiter.pendingHits == 0)
            let stored = try await gatehouse.env.store.hitRateLimits([RateCounter(key: key, window: 300, hits: 0)], now: now)[key]
            #expect(stored?.hits == 201)
        }
    }

    /// What an instance may have counted unseen it asks the database at the counter's first hit: a counter counted
    /// in the database only while the instance had no room to keep it, and over its limit, gets room later in its
    /// window: still refused, and its first refusal was met once. (Without that, it would admit a share.) A restart
    /// is a further instance: its new run admits at most a share of a counter its earlier run took past the limit.
    @Test func aCounterCountedUnseenAsksFirstAndARestartAdmitsAtMostAShare() async throws {
        try await withGatehouse { gatehouse, _ in
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            let limiter = RateLimiter(store: gatehouse.env.store, maxCounters: 1)
            let short = "app|login|ip|192.0.2.50"
            _ = try await limiter.hit([(RateCounter(key: short, window: 1), 20)], now: start)  // takes the one place
            let crowded = "app|login|id|crowded"
            @Sendable func hit(_ at: Date) async throws -> RateLimiter.Verdict {
                try #require(try await limiter.hit([(RateCounter(key: crowded, window: 60), 20)], now: at)[crowded])
            }
            var verdicts: [RateLimiter.Verdict] = []
            for _ in 0..<21 { verdicts.append(try await hit(start)) }
            try await limiter.flush(now: start.addingTimeInterval(2))  // the short counter's window ends: room again
            for _ in 0..<5 { verdicts.append(try await hit(start.addingTimeInterval(2))) }
            #expect(verdicts.filter { $0.count.hits <= 20 }.count == 20)
            #expect(verdicts.filter(\.firstRefusal).count == 1)

            // A run that reached the limit and stopped gracefully; the next one admits at most a share (2 of 20).
            let key = "app|login|id|restarted"
            let earlier = RateLimiter(store: gatehouse.env.store)
            #expect(try await admitted(earlier, key: key, limit: 20, times: 25, now: start) == 20)
            try await earlier.flush(now: start)
            let next = RateLimiter(store: gatehouse.env.store)
            let afterRestart = try await admitted(next, key: key, limit: 20, times: 5, now: start.addingTimeInterval(1))
            #expect(afterRestart <= RateLimiter.share(of: 20))
        }
    }

    /// A hit that reaches the limiter after it has counted at a later time (it waited, or its request took long)
    /// counts at that later time: never in a window the limiter has already forgotten.
    @Test func aLateHitCountsInTheCurrentWindow() async throws {
        try await withGatehouse { gatehouse, _ in
            let limiter = RateLimiter(store: gatehouse.env.store)
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|login|ip|192.0.2.60"
            let windowStart = start.addingTimeInterval(1000)
            #expect(try await admitted(limiter, key: key, limit: 20, times: 21, now: windowStart) == 20)
            try await limiter.flush(now: windowStart.addingTimeInterval(301))  // the window has ended: forgotten
            let late = try #require(try await limiter.hit([(RateCounter(key: key, window: 300), 20)], now: windowStart.addingTimeInterval(299))[key])
            #expect(late.count.windowStart == windowStart.addingTimeInterval(301))
            #expect(late.count.hits == 1)
        }
    }

    /// Two instances on one database (an attacker balanced across them): each may admit its share unseen by the
    /// other, never more. Written pending counts (a flush) are seen by the other at its next write.
    @Test func twoInstancesOvershootByAtMostAShare() async throws {
        try await withGatehouse { gatehouse, _ in
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let (first, second) = (RateLimiter(store: gatehouse.env.store), RateLimiter(store: gatehouse.env.store))
            var admitted = 0
            for round in 0..<150 {
                admitted += try await self.admitted(round.isMultiple(of: 2) ? first : second, limit: 100, times: 1, now: now)
            }
            #expect(admitted >= 100 && admitted <= 110, "\(admitted) admitted")  // a share of 100 is 10

            // Pending hits reach the shared count at a flush.
            let key = "app|login|id|flushed"
            let flushed = try await self.admitted(first, key: key, limit: 1000, times: 50, now: now)
            #expect(flushed == 50)
            #expect(await first.pendingHits > 0)
            try await first.flush(now: now)
            #expect(await first.pendingHits == 0)
            let shared = try await gatehouse.env.store.hitRateLimits([RateCounter(key: key, window: 300, hits: 0)], now: now)[key]
            #expect(shared?.hits == 50)
        }
    }

    /// The audit log records each instance's first refusal of a window, even when the shared count jumped past
    /// `limit + 1` (another instance wrote several hits at once): the count alone would not say which refusal was
    /// first. Every later refusal is not first.
    @Test func eachInstanceMeetsItsFirstRefusalOnceEvenWhenTheCountJumps() async throws {
        try await withGatehouse { gatehouse, _ in
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let (first, second) = (RateLimiter(store: gatehouse.env.store), RateLimiter(store: gatehouse.env.store))
            let key = "app|code|id|jumping"
            @Sendable func hit(_ limiter: RateLimiter) async throws -> RateLimiter.Verdict {
                try #require(try await limiter.hit([(RateCounter(key: key, window: 300), 20)], now: now)[key])
            }
            // The second instance admits its share (2) on its own; the first then reaches the limit alone.
            for _ in 0..<2 { #expect(try await hit(second).count.hits <= 20) }
            var firstVerdicts: [RateLimiter.Verdict] = []
            for _ in 0..<23 { firstVerdicts.append(try await hit(first)) }
            #expect(firstVerdicts.filter { $0.count.hits <= 20 }.count == 20)
            #expect(firstVerdicts.map(\.firstRefusal).filter { $0 }.count == 1)
            #expect(firstVerdicts.firstIndex { $0.firstRefusal } == 20)
            // The second writes its two: the shared count jumps to 23, and its next hit, counted at 24, is its first.
            try await second.flush(now: now)
            let jumped = try await hit(second)
            #expect(jumped.count.hits == 24)
            #expect(jumped.firstRefusal)
            #expect(try await hit(second).firstRefusal == false)
            #expect(try await hit(first).firstRefusal == false)
        }
    }

    /// A server that stops gracefully writes what it admitted on its own: the next start counts on from there.
    @Test func closingTheServerWritesItsPendingCounts() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("closing-\(UUID()).sqlite").path
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(path))
        var config = testConfiguration()
        config.database.url = url
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let key = "test-app|login|ip|192.0.2.77"
        let server = try await AuthServer.open(configuration: config, logger: quietLogger)
        let admitted = try await self.admitted(server.env.rateLimiter, key: key, limit: 1000, times: 7, now: now)
        #expect(admitted == 7)
        #expect(await server.env.rateLimiter.pendingHits == 7)
        try await server.close()
        let reopened = try await AuthServer.open(configuration: config, logger: quietLogger)
        let stored = try await reopened.env.store.hitRateLimits([RateCounter(key: key, window: 300, hits: 0)], now: now)[key]
        try await reopened.close()
        await drop()
        #expect(stored?.hits == 7)
    }

    /// The window restarts after it ends; the database's window (another instance's) is the one that counts.
    @Test func aWindowRestartsWhenItEnds() async throws {
        try await withGatehouse { gatehouse, _ in
            let limiter = RateLimiter(store: gatehouse.env.store)
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|code|ip|203.0.113.5"
            let firstWindow = try await admitted(limiter, key: key, limit: 5, times: 7, now: start)
            #expect(firstWindow == 5)
            let refused = try #require(try await limiter.hit([(RateCounter(key: key, window: 300), 5)], now: start.addingTimeInterval(100))[key])
            #expect(refused.count.hits > 5)
            #expect(refused.count.windowStart == start)
            let nextWindow = try await admitted(limiter, key: key, limit: 5, times: 7, now: start.addingTimeInterval(300))
            #expect(nextWindow == 5)
        }
    }

    /// Past `maxCounters`, new counters are counted in the database at every hit, exactly.
    @Test func pastItsCapACounterIsCountedInTheDatabaseAtEveryHit() async throws {
        try await withGatehouse { gatehouse, _ in
            let recording = RecordingDatabase((gatehouse.env.store as! SQLStore).db)
            let limiter = RateLimiter(store: SQLStore(db: recording), maxCounters: 3)
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            for address in 1...3 { _ = try await admitted(limiter, key: "app|login|ip|192.0.2.\(address)", limit: 1000, times: 1, now: now) }
            #expect(writes(recording.drain()) == 0)
            // Counted in the database at every hit; the hit that takes it past the limit is the first refusal.
            let key = "app|login|ip|192.0.2.99"
            var verdicts: [RateLimiter.Verdict] = []
            for _ in 0..<4 { verdicts.append(try #require(try await limiter.hit([(RateCounter(key: key, window: 300), 2)], now: now)[key])) }
            #expect(verdicts.map(\.count.hits) == [1, 2, 3, 4])
            #expect(verdicts.map(\.firstRefusal) == [false, false, true, false])
            #expect(writes(recording.drain()) == 4)
        }
    }

    /// A failed write fails the request that needed it, and loses none of the hits admitted before.
    @Test func aFailedWriteKeepsWhatWasPending() async throws {
        try await withGatehouse { gatehouse, _ in
            let failing = RecordingDatabase((gatehouse.env.store as! SQLStore).db)
            let limiter = RateLimiter(store: SQLStore(db: failing))
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|flow|ip|192.0.2.7"
            let admitted10 = try await admitted(limiter, key: key, limit: 100, times: 10, now: now)
            #expect(admitted10 == 10)
            failing.failing = true
            await #expect(throws: (any Error).self) { try await limiter.hit([(RateCounter(key: key, window: 300), 100)], now: now) }
            await #expect(throws: (any Error).self) { try await limiter.flush(now: now) }
            #expect(await limiter.pendingHits == 10)
            failing.failing = false
            try await limiter.flush(now: now)
            let stored = try await gatehouse.env.store.hitRateLimits([RateCounter(key: key, window: 300, hits: 0)], now: now)[key]
            #expect(stored?.hits == 10)
        }
    }
}

/// Rate-limit counts that answer out of order when asked: the next write carrying several hits is held until
/// ``release(failing:)`` while every other write goes through.
actor OutOfOrderCounts: RateCountStore {
    struct Failed: Error {}
    private let base: any RateCountStore
    private var armed = false
    private var held: CheckedContinuation<Bool, Never>?
    private var holding: CheckedContinuation<Void, Never>?
    /// Writes of the held write's counters that came while it was held.
    private(set) var writesWhileHolding = 0
    private var heldKeys: Set<String> = []

    init(_ base: any RateCountStore) { self.base = base }

    func holdNextWriteOfSeveralHits() { armed = true }

    /// Returns once a write is held.
    func waitUntilHolding() async {
        guard held == nil else { return }
        await withCheckedContinuation { holding = $0 }
    }

    /// Lets the held write go to the database, or fail without reaching it.
    func release(failing: Bool = false) {
        held?.resume(returning: failing)
        held = nil
        heldKeys = []
    }

    func hitRateLimits(_ counters: [RateCounter], now: Date) async throws -> [String: RateCount] {
        if held != nil, counters.contains(where: { heldKeys.contains($0.key) }) { writesWhileHolding += 1 }
        if armed, counters.contains(where: { $0.hits > 1 }) {
            armed = false
            heldKeys = Set(counters.map(\.key))
            let fails = await withCheckedContinuation { continuation in
                held = continuation
                holding?.resume()
                holding = nil
            }
            if fails { throw Failed() }
        }
        return try await base.hitRateLimits(counters, now: now)
    }
}
