import Foundation

/// A value behind a lock, for the few pieces of shared state the domain keeps (signing keys, provider keys, a test
/// clock). The domain depends on no NIO module, so this stands in for `NIOLockedValueBox`.
package final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, under the lock.
    package func withLockedValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

extension LockedValue {
    /// The value kept under `key`, made by `make` (outside the lock) and kept at its first use. Of racing first
    /// uses, the one kept first is the one every caller gets.
    package func value<Key: Hashable, Kept>(for key: Key, orMake make: () -> Kept) -> Kept where Value == [Key: Kept] {
        if let found = withLockedValue({ $0[key] }) { return found }
        let made = make()
        return withLockedValue { kept in
            if let found = kept[key] { return found }
            kept[key] = made
            return made
        }
    }
}
