import Foundation

/// The public base URL, fixed once the real port is known (when the configured port is 0).
package final class PublicURL: Sendable {
    private let storage: LockedValue<String>
    package init(_ value: String) { storage = LockedValue(value) }
    package var value: String { storage.withLockedValue { $0 } }
    package func set(_ value: String) { storage.withLockedValue { $0 = value } }
}
