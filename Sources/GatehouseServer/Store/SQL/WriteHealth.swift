import Foundation
import NIOConcurrencyHelpers

/// Whether the database's last real write failed for lack of space, for `/readyz`.
///
/// `/readyz` commits a small write, but on a full disk that write may still succeed: SQLite reuses the pages of its
/// write-ahead log and PostgreSQL its preallocated WAL segment and the free space in its pages, while the writes of
/// real requests, which need new pages, fail. So a write that failed with a "full" error (SQLITE_FULL, PostgreSQL's
/// 53100 `disk_full`, ENOSPC in any message) marks the database not ready, whatever the probe's own write does, until a
/// real write succeeds again. For an SQLite file, whose filesystem the process can see, that also takes
/// ``spaceToRecover`` free on it, and the probe's success counts once there is.
final class WriteHealth: Sendable {
    /// Set while `/readyz`'s probe writes: its success says nothing about space (it may fit in reused pages).
    @TaskLocal static var probing = false
    /// The free bytes on an SQLite file's filesystem above which the probe's success counts as a real write.
    static let spaceToRecover: Int64 = 1 << 20

    /// Why the last real write failed for lack of space; nil once one succeeded after it.
    private let full = NIOLockedValueBox<String?>(nil)

    init() {}

    /// Nil unless the last real write failed for lack of space: then why.
    var fullReason: String? { full.withLockedValue { $0 } }

    /// A real write committed (not the probe's): there is space again, unless `freeSpace` (the database's filesystem,
    /// where it can be read) says otherwise. Near the end of the space a small write may still fit in reused pages.
    func wrote(freeSpace: () -> Int64? = { nil }) {
        guard !Self.probing, full.withLockedValue({ $0 != nil }) else { return }
        if let free = freeSpace(), free < Self.spaceToRecover { return }
        full.withLockedValue { $0 = nil }
    }

    /// The probe's write succeeded while space was free on the database's filesystem: counted as a real write.
    func recovered() {
        full.withLockedValue { $0 = nil }
    }

    /// A write failed; `reason` is kept when it says the disk is full (``isFull(_:)``).
    func failed(_ reason: String, full isFull: Bool) {
        guard isFull else { return }
        full.withLockedValue { $0 = String(reason.prefix(300)) }
    }

    /// Whether an error message is the operating system's "no space left on device" (ENOSPC).
    static func mentionsNoSpace(_ message: String) -> Bool {
        message.contains("No space left on device") || message.contains("ENOSPC")
    }
}
