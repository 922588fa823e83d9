import NIOConcurrencyHelpers

/// The deadlines of many short pieces of work (every PostgreSQL statement has two: its wait for a connection, then the
/// work on it), checked by one task every tick. A timer task per statement cost a task and a clock wake-up each,
/// about 4.5% of a PostgreSQL refresh; here arming and disarming a deadline is an insertion into and a removal from a
/// locked table. A deadline fires up to one tick (100 ms) late, which is nothing next to the seconds these deadlines are.
final class Deadlines: Sendable {
    /// Names an armed deadline, to disarm it.
    struct Token: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    private struct Entry {
        var due: ContinuousClock.Instant
        var action: @Sendable () -> Void
    }

    private struct Table {
        var next: UInt64 = 0
        var entries: [UInt64: Entry] = [:]
    }

    private let table = NIOLockedValueBox(Table())
    private let sweeper: Task<Void, Never>

    /// `tick`: how often the sweeper looks for deadlines that are due.
    init(tick: Duration = .milliseconds(100)) {
        let table = table
        // The sweeper holds the table, not `self`: dropping the last reference ends it (deinit).
        sweeper = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: tick)
                Self.fire(table, now: .now)
            }
        }
    }

    deinit {
        sweeper.cancel()
    }

    /// Runs `action` once, at `due` or up to a tick later, unless ``disarm(_:)`` comes first.
    func arm(at due: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> Token {
        table.withLockedValue { table in
            table.next += 1
            table.entries[table.next] = Entry(due: due, action: action)
            return Token(id: table.next)
        }
    }

    /// Disarms a deadline. Returns false when it had fired already (or was disarmed before).
    @discardableResult
    func disarm(_ token: Token) -> Bool {
        table.withLockedValue { $0.entries.removeValue(forKey: token.id) } != nil
    }

    /// Runs the actions of every deadline due by `now`, as the sweeper does every tick.
    func fire(now: ContinuousClock.Instant) {
        Self.fire(table, now: now)
    }

    /// Runs the actions of every deadline due by `now`, outside the lock (an action may arm or disarm others).
    private static func fire(_ table: NIOLockedValueBox<Table>, now: ContinuousClock.Instant) {
        let due = table.withLockedValue { table -> [Entry] in
            let due = table.entries.filter { $0.value.due <= now }
            for id in due.keys { table.entries.removeValue(forKey: id) }
            return Array(due.values)
        }
        for entry in due { entry.action() }
    }
}
