import Foundation

/// Counts requests against rate limits (``AuthEnvironment/checkRateLimit(_:app:account:identifier:countingAddress:)``) with
/// the database as the count every instance shares, without a database write for most requests.
///
/// The database holds each counter's count in its window. Each instance also keeps, per counter, the count the
/// database last gave it (`known`) and the hits it has admitted since without writing them (`pending`). A hit is
/// admitted here, with no statement, while all hold:
/// - `pending` is below the counter's **share**: a tenth of its limit, at least 1;
/// - `known + pending + 1` (with hits on their way to the database) stays a share or more below the limit;
/// - this instance knows everything it counted of the counter: a counter new to it in the window after it kept no
///   counter for lack of room (it may have counted this one then, in the database only) asks at its first hit.
///
/// Otherwise the hit and everything pending go to the database in one upsert, and its answer, the shared count,
/// decides, as it does for every hit of a counter near its limit. A counter the database says is over its limit is
/// refused here until its window ends, so a flood of refused requests costs no writes either. ``flush(now:)`` writes
/// every pending count; the server calls it every second and when it stops.
///
/// An instance has at most one write of a kept counter under way: a hit that must ask while one is waits for its
/// answer, then decides again (often here, with the count just learnt), or fails with it when the write failed. Were
/// two writes of one counter under way at once, the database could apply a later one-hit write before an earlier one
/// carrying hits admitted here, and judge the later hit by a count without them. Time never runs backwards here: a
/// hit that waited counts at the latest time this instance has counted at, never in a window it has forgotten.
///
/// **Error bound.** One instance alone is exact: each hit takes its own place in the count (the count it saw, or
/// the database's answer to its write, which holds every hit of the counter this instance wrote before), a hit is
/// admitted only at a place within the limit, and every place is taken once. With k instances sharing a database,
/// what one admitted here is unseen by the others until written — at most a share per counter (two while the
/// database fails writes: the hits of the failed write and those admitted meanwhile) — and a burst that reaches
/// several instances at once can meet every one of them holding such hits as the count crosses the limit. So a
/// counter can let through about k × share requests more than its limit in one window: a tenth of the limit per
/// instance, one request per instance for limits under 20 (two instances and a burst of concurrent requests measured
/// 12 for a limit of 10 and 35 for 30). A restart is a further instance in this sense: its new
/// run may admit a counter's share before it learns a count its earlier run took near or past the limit (knowing
/// it at once would cost a write per counter for a whole window after every start). An instance that stops without a
/// graceful shutdown loses at most that much of each counter (hits never written).
///
/// A hit's ``Verdict`` says whether it is the first refusal this instance met in the counter's window (the one the
/// audit log records): the count itself can jump past `limit + 1` when several hits are written at once.
///
/// At most ``maxCounters`` counters are kept; past that (say, a flood from very many addresses), new counters are
/// counted in the database at every hit, each judged by its own write's answer, as exact as before and as costly.
package actor RateLimiter {
    /// A counter's count after a hit (over its limit: refused), and whether this is the first refused hit this
    /// instance met in the counter's window. Of a counter it did not know the count of (not kept, or not yet learnt),
    /// only the write that took the count past the limit is: across instances, one such refusal per window.
    package struct Verdict: Sendable {
        package var count: RateCount
        package var firstRefusal: Bool
    }

    private struct Counter {
        /// Seconds.
        var window: Int
        var windowStart: Date
        var windowEnd: Date
        /// The shared count of this window as the database last answered it.
        var known: Int
        /// Hits admitted here and not yet sent to the database.
        var pending: Int
        /// Hits sent and not yet answered.
        var inFlight: Int
        /// The database said the count is over the limit: refused here until `windowEnd`.
        var refused: Bool
        /// This instance knows every hit it counted of the counter (see ``RateLimiter``); until then each hit asks.
        var learned: Bool

        init(start: Date, window: Int, learned: Bool) {
            self.window = window
            windowStart = start
            windowEnd = start.addingTimeInterval(TimeInterval(window))
            known = 0
            pending = 0
            inFlight = 0
            refused = false
            self.learned = learned
        }

        var seen: Int { known + inFlight + pending }

        /// `hits` of this counter for the database, in this window.
        func write(_ key: String, hits: Int) -> RateCounter {
            RateCounter(key: key, window: window, hits: hits, windowStart: windowStart)
        }
    }

    private let store: any RateCountStore
    private var counters: [String: Counter] = [:]
    /// Counters with a write of this instance under way (one at a time each).
    private var writing: Set<String> = []
    /// Hits waiting for their counter's write to end, by counter.
    private var waiting: [String: [CheckedContinuation<Void, any Error>]] = [:]
    /// The latest time this instance counted at.
    private var latest: Date?
    /// When a counter was last not kept for lack of room (``maxCounters``).
    private var overflowed: Date?
    /// Counters kept at most (each a key of up to ~100 bytes and a few numbers): 100,000 unless told otherwise.
    package let maxCounters: Int
    /// Counters per upsert when flushing (4 parameters each).
    package static let flushBatch = 500

    package init(store: any RateCountStore, maxCounters: Int = 100_000) {
        self.store = store
        self.maxCounters = maxCounters
    }

    /// A tenth of `limit`, at least 1: what an instance may admit without asking the database.
    package static func share(of limit: Int) -> Int { max(1, limit / 10) }

    /// Counts one request against each of `limits` and returns each counter's verdict. Throws what the database
    /// throws when it had to be asked.
    package func hit(_ limits: [(counter: RateCounter, limit: Int)], now requested: Date) async throws -> [String: Verdict] {
        assert(Set(limits.map(\.counter.key)).count == limits.count, "one hit per counter")
        var now = advance(to: requested)
        // A hit that must ask waits while its counter has a write under way, then decides again.
        while let busy = limits.first(where: { writing.contains($0.counter.key) && mustAsk($0.counter, limit: $0.limit, now: now) }) {
            try await withCheckedThrowingContinuation { waiting[busy.counter.key, default: []].append($0) }
            now = advance(to: requested)
        }
        var verdicts: [String: Verdict] = [:]
        var ask: [(counter: RateCounter, limit: Int, pending: Int, kept: Bool)] = []
        for (counter, limit) in limits {
            guard var entry = current(counter, now: now) else {
                ask.append((counter, limit, 0, false))
                continue
            }
            if entry.refused {
                let count = RateCount(hits: max(entry.known, limit + 1) + 1, windowStart: entry.windowStart)
                verdicts[counter.key] = Verdict(count: count, firstRefusal: false)
            } else if Self.admitsHere(entry, limit: limit) {
                entry.pending += 1
                verdicts[counter.key] = Verdict(count: RateCount(hits: entry.seen, windowStart: entry.windowStart), firstRefusal: false)
            } else {
                ask.append((entry.write(counter.key, hits: entry.pending + 1), limit, entry.pending, true))
                entry.inFlight += entry.pending + 1
                entry.pending = 0
                writing.insert(counter.key)
            }
            counters[counter.key] = entry
        }
        guard !ask.isEmpty else { return verdicts }
        let written = ask.filter(\.kept).map(\.counter.key)
        let answers: [String: RateCount]
        do {
            let answered = try await store.hitRateLimits(ask.map(\.counter), now: now)
            guard ask.allSatisfy({ answered[$0.counter.key] != nil }) else {
                throw StoreError.unavailable("the database answered no count for a rate-limit counter")
            }
            answers = answered
        } catch {
            // This request's hit is not counted (it fails); what was pending before it is pending again.
            for (counter, _, pending, kept) in ask where kept {
                settle(counter, answer: nil, limit: nil, returningPending: pending)
            }
            endWrites(written, failure: error)
            throw error
        }
        defer { endWrites(written, failure: nil) }
        for (counter, limit, _, kept) in ask {
            let answer = answers[counter.key]!
            let first =
                kept
                ? settle(counter, answer: answer, limit: limit, returningPending: 0)
                // Not kept here: the write that took the count past the limit is the first refusal.
                : Self.crossed(limit, with: counter, answer: answer)
            verdicts[counter.key] = Verdict(count: answer, firstRefusal: first)
        }
        return verdicts
    }

    /// Writes every pending count to the database (in upserts of ``flushBatch``) and forgets counters whose window
    /// has ended. A failed write leaves its counts pending for the next flush.
    ///
    /// A counter with a write under way is left alone: its pending hits go with its next write (the next hit that
    /// asks, or the next flush), and it is forgotten once that write has ended.
    package func flush(now requested: Date) async throws {
        let now = advance(to: requested)
        for (key, entry) in counters where entry.windowEnd <= now && !writing.contains(key) {
            counters[key] = nil
        }
        let keys = counters.compactMap { $0.value.pending > 0 ? $0.key : nil }
        var failure: (any Error)?
        for start in stride(from: 0, to: keys.count, by: Self.flushBatch) {
            // Taken batch by batch: while one is written, hits may write or add to the next batch's counters.
            var group: [(counter: RateCounter, pending: Int)] = []
            for key in keys[start..<min(keys.count, start + Self.flushBatch)] {
                guard !writing.contains(key), var entry = counters[key], entry.pending > 0 else { continue }
                group.append((entry.write(key, hits: entry.pending), entry.pending))
                entry.inFlight += entry.pending
                entry.pending = 0
                counters[key] = entry
                writing.insert(key)
            }
            guard !group.isEmpty else { continue }
            do {
                let answers = try await store.hitRateLimits(group.map(\.counter), now: now)
                for (counter, pending) in group {
                    settle(counter, answer: answers[counter.key], limit: nil, returningPending: answers[counter.key] == nil ? pending : 0)
                }
                endWrites(group.map(\.counter.key), failure: nil)
            } catch {
                for (counter, pending) in group { settle(counter, answer: nil, limit: nil, returningPending: pending) }
                endWrites(group.map(\.counter.key), failure: error)
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// Hits admitted here and not yet written, over every counter (for tests and metrics).
    package var pendingHits: Int { counters.values.reduce(0) { $0 + $1.pending } }

    /// Hits waiting for a write of their counter to end (for tests).
    package var waitingHits: Int { waiting.values.reduce(0) { $0 + $1.count } }

    /// Whether the write of `counter`, answered `answer`, took the count past `limit`: of all writes to a counter in a
    /// window, across instances, exactly one does.
    private static func crossed(_ limit: Int, with counter: RateCounter, answer: RateCount) -> Bool {
        answer.hits > limit && answer.hits - counter.hits <= limit
    }

    /// Whether a hit of `entry`'s counter against `limit` is admitted here without asking the database.
    private static func admitsHere(_ entry: Counter, limit: Int) -> Bool {
        let share = share(of: limit)
        return entry.learned && entry.pending < share && entry.seen + 1 <= limit - share
    }

    /// Whether a hit of `counter` at `now` has to ask the database (not refused or admitted here).
    private func mustAsk(_ counter: RateCounter, limit: Int, now: Date) -> Bool {
        guard let entry = current(counter, now: now) else { return false }
        return !entry.refused && !Self.admitsHere(entry, limit: limit)
    }

    /// Ends this instance's writes of `keys` and wakes the hits waiting for them, with the write's failure if it
    /// failed: they had to ask too, and a database that failed one write now would most likely fail theirs, after
    /// the same wait for each in turn.
    private func endWrites(_ keys: [String], failure: (any Error)?) {
        for key in keys {
            writing.remove(key)
            for waiter in waiting.removeValue(forKey: key) ?? [] {
                if let failure { waiter.resume(throwing: failure) } else { waiter.resume() }
            }
        }
    }

    /// `now`, or the latest time counted at if that is later.
    private func advance(to now: Date) -> Date {
        let now = max(now, latest ?? now)
        latest = now
        return now
    }

    /// Whether the database may hold hits of a counter (of `window` seconds) that this instance counted and does not
    /// know of: within a window after it last kept no counter for lack of room.
    private func mayHaveMissed(window: Int, now: Date) -> Bool {
        overflowed.map { now < $0.addingTimeInterval(TimeInterval(window)) } ?? false
    }

    /// The counter's entry for a hit at `now`, a new one when its window has ended or it had none; nil when no more
    /// counters may be kept.
    private func current(_ counter: RateCounter, now: Date) -> Counter? {
        if var entry = counters[counter.key] {
            guard entry.windowEnd <= now else { return entry }
            // The window ended: what was pending counted in it and no longer matters.
            let (inFlight, learned) = (entry.inFlight, entry.learned)
            entry = Counter(start: now, window: counter.window, learned: learned || !mayHaveMissed(window: counter.window, now: now))
            entry.inFlight = inFlight
            return entry
        }
        guard counters.count < maxCounters else {
            overflowed = now
            return nil
        }
        return Counter(start: now, window: counter.window, learned: !mayHaveMissed(window: counter.window, now: now))
    }

    /// Takes the database's answer for `counter.hits` hits sent from here (nil when the write failed, and then
    /// `returningPending` of them are pending again if their window is still this counter's). True when the answer,
    /// for a hit against `limit`, is the first this instance met over the limit in the counter's window.
    @discardableResult
    private func settle(_ counter: RateCounter, answer: RateCount?, limit: Int?, returningPending: Int) -> Bool {
        guard var entry = counters[counter.key] else { return false }
        var first = false
        entry.inFlight = max(0, entry.inFlight - counter.hits)
        if let answer {
            let crossed = limit.map { Self.crossed($0, with: counter, answer: answer) } ?? false
            // An instance that did not know the counter's count cannot know it met the first refusal either.
            let knew = entry.learned
            let answerEnd = answer.windowStart.addingTimeInterval(TimeInterval(counter.window))
            if answer.windowStart == entry.windowStart {
                entry.known = max(entry.known, answer.hits)
                entry.learned = true
            } else if answerEnd > entry.windowStart {
                // The database's window is the one that counts (another instance, or an earlier life of this one,
                // started it): take it over.
                entry.windowStart = answer.windowStart
                entry.windowEnd = answerEnd
                entry.known = answer.hits
                entry.learned = true
            }
            if let limit, answer.hits > limit {
                if answer.windowStart == entry.windowStart {
                    first = knew ? !entry.refused : crossed && !entry.refused
                    entry.refused = true
                } else {
                    // A window this instance has left: the write that took it past the limit met the first refusal.
                    first = crossed
                }
            }
        } else if counter.windowStart == entry.windowStart {
            entry.pending += returningPending
        }
        counters[counter.key] = entry
        return first
    }
}
