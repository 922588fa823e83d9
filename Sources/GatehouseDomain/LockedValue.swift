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
