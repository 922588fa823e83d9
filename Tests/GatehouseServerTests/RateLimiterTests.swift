import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import Testing

/// The rate limiter's counting: shared through the database, most hits admitted without a write, exact on one
/// instance, over by at most a share per further instance (``RateLimiter``).
@Suite struct RateLimiterTests {
    /// Hits one counter `times` times at `now` through `limiter`: how many were admitted.
    func admitted(_ limiter: RateLimiter, key: String = "app|login|ip|192.0.2.1", limit: Int, times: Int, now: Date) async throws -> Int {
        var admitted = 0
        for _ in 0..<times {
            let count = try #require(try await limiter.hit([(RateCounter(key: key, window: 300), limit)], now: now)[key])
            if count.hits <= limit { admitted += 1 }
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
            let admitted1 = try await admitted(limiter, limit: 1000, times: 1050, now: now)
            #expect(admitted1 == 1000)
            // Far fewer writes than hits: one per share below the last share, one per hit in it, one for the first
            // refusal; the refusals after it cost nothing.
            let written = writes(recording.drain())
            #expect(written > 0 && written <= 1000 / 100 + 100 + 1, "\(written) writes")
            // A small limit is exact too: 3 of 5.
            let admitted2 = try await admitted(limiter, key: "app|login|id|small", limit: 3, times: 5, now: now)
            #expect(admitted2 == 3)
        }
    }

    /// The race is in the limiter, whatever the database: on SQLite always. (On PostgreSQL, under the whole suite's
    /// load, this burst — about twenty upserts of one row at once through a pool of four — waited past the
    /// pool's 10 s connection deadline in two full runs, though it passes alone: Benchmarks/PROFILING.md, "Left open".)
    @Test func racingHitsOnOneInstanceAdmitExactlyTheLimit() async throws {
        var config = testConfiguration()
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(FileManager.default.temporaryDirectory.appendingPathComponent("racing-\(UUID()).sqlite").path))
        config.database.url = url
        try await withGatehouse(config) { gatehouse, _ in
            let limiter = RateLimiter(store: gatehouse.env.store)
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|refresh|ip|198.51.100.9"
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<60 {
                    group.addTask { try await limiter.hit([(RateCounter(key: key, window: 60), 20)], now: now)[key]!.hits <= 20 }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(results.filter { $0 }.count == 20)
        }
        await drop()
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
            let admitted3 = try await self.admitted(first, key: key, limit: 1000, times: 50, now: now)
            #expect(admitted3 == 50)
            #expect(await first.pendingHits > 0)
            try await first.flush(now: now)
            #expect(await first.pendingHits == 0)
            let shared = try await gatehouse.env.store.hitRateLimits([RateCounter(key: key, window: 300, hits: 0)], now: now)[key]
            #expect(shared?.hits == 50)
        }
    }

    /// The window restarts after it ends; the database's window (another instance's) is the one that counts.
    @Test func aWindowRestartsWhenItEnds() async throws {
        try await withGatehouse { gatehouse, _ in
            let limiter = RateLimiter(store: gatehouse.env.store)
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|code|ip|203.0.113.5"
            let admitted4 = try await admitted(limiter, key: key, limit: 5, times: 7, now: start)
            #expect(admitted4 == 5)
            let refused = try #require(try await limiter.hit([(RateCounter(key: key, window: 300), 5)], now: start.addingTimeInterval(100))[key])
            #expect(refused.hits > 5)
            #expect(refused.windowStart == start)
            let admitted5 = try await admitted(limiter, key: key, limit: 5, times: 7, now: start.addingTimeInterval(300))
            #expect(admitted5 == 5)
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
            let admitted6 = try await admitted(limiter, key: "app|login|ip|192.0.2.99", limit: 2, times: 4, now: now)
            #expect(admitted6 == 2)
            #expect(writes(recording.drain()) == 4)
        }
    }

    /// A failed write fails the request that needed it, and loses none of the hits admitted before.
    @Test func aFailedWriteKeepsWhatWasPending() async throws {
        try await withGatehouse { gatehouse, _ in
            let failing = FailingDatabase((gatehouse.env.store as! SQLStore).db)
            let limiter = RateLimiter(store: SQLStore(db: failing))
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let key = "app|flow|ip|192.0.2.7"
            let admitted7 = try await admitted(limiter, key: key, limit: 100, times: 10, now: now)
            #expect(admitted7 == 10)
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

/// A database whose statements fail while `failing` is set.
final class FailingDatabase: SQLDatabase, @unchecked Sendable {
    struct Refused: Error {}
    private let base: any SQLDatabase
    private let lock = NSLock()
    private var _failing = false
    var failing: Bool {
        get { lock.withLock { _failing } }
        set { lock.withLock { _failing = newValue } }
    }
    var dialect: SQLDialect { base.dialect }

    init(_ base: any SQLDatabase) { self.base = base }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        if failing { throw Refused() }
        return try await base.query(sql, binds)
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        if failing { throw Refused() }
        return try await base.transaction(body)
    }

    func ping() async throws { try await base.ping() }
    func close() async throws { try await base.close() }
}
