import Foundation

/// The source of "now" for everything that expires: tokens, sessions, one-time secrets.
/// Production uses the system clock; tests inject a ``ManualClock`` and move time forward instead of sleeping.
public struct GatehouseClock: Sendable {
    private let read: @Sendable () -> Date
    public init(_ read: @escaping @Sendable () -> Date) { self.read = read }
    public var now: Date { read() }

    /// The system's wall clock.
    public static var system: GatehouseClock { GatehouseClock { Date() } }
}

/// A clock that only moves when told to. For tests.
public final class ManualClock: Sendable {
    private let current: LockedValue<Date>
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = LockedValue(start) }
    public var now: Date { current.withLockedValue { $0 } }
    public func advance(by seconds: TimeInterval) { current.withLockedValue { $0 += seconds } }
    public var clock: GatehouseClock { GatehouseClock { self.now } }
}

extension Date {
    /// Whole milliseconds since 1970, the unit timestamps are stored in.
    package var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }
    package init(milliseconds: Int64) { self.init(timeIntervalSince1970: TimeInterval(milliseconds) / 1000) }
}
