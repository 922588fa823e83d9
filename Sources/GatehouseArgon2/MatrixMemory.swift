// Memory for Argon2's block matrix: aligned, backed by huge pages where the OS allows, wiped
// after use, and recycled between hashes.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Allocation of the block matrix (m KiB per hash).
///
/// - Alignment: 64 bytes, so that each 1 KiB block spans exactly 16 cache lines.
/// - Recycling: the last released matrix is kept (zeroed) for the next hash of the same size, so
///   that a server hashing with one configuration does not page-fault fresh, kernel-zeroed memory
///   on every call (about 10% of a hash at m=19456). At most one matrix is kept, so m KiB stay
///   allocated between hashes; concurrent hashes beyond the first allocate their own.
/// - Huge pages (Linux): a matrix of 4 MiB or more is 2 MiB aligned and advised as transparent
///   huge pages, since Argon2 reads blocks at random across all of it and 4 KiB pages make many
///   of those reads miss the TLB too (a few percent at m=19456). Where THP is disabled, the
///   advice is a no-op.
/// - Wiping: released memory is zeroed first, as the reference implementation does.
enum MatrixMemory {
    private static let hugePage = 1 << 21

    /// `byteCount` bytes for a matrix, 64-byte aligned (2 MiB on Linux for large matrices).
    static func allocate(byteCount: Int) -> UnsafeMutableRawPointer {
        if let recycled = spare.take(byteCount: byteCount) {
            return recycled
        }
        #if os(Linux)
        if byteCount >= 2 * hugePage {
            let bytes = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: hugePage)
            _ = madvise(bytes, byteCount, MADV_HUGEPAGE)
            return bytes
        }
        #endif
        return UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 64)
    }

    /// Wipes a matrix from ``allocate(byteCount:)`` and keeps it for reuse or frees it.
    static func release(_ bytes: UnsafeMutableRawPointer, byteCount: Int) {
        wipe(bytes, byteCount: byteCount)
        if let evicted = spare.keep(bytes, byteCount: byteCount) {
            evicted.deallocate()
        }
    }

    /// Zeroes `byteCount` bytes. Not inlined, so that it stays one memset call (which the
    /// optimiser cannot drop: the memory is then recycled or freed through opaque calls).
    @inline(never)
    static func wipe(_ bytes: UnsafeMutableRawPointer, byteCount: Int) {
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: byteCount)
    }

    private static let spare = Spare()

    /// One recycled matrix, guarded by a mutex.
    private final class Spare: @unchecked Sendable {
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private var bytes: UnsafeMutableRawPointer?
        private var byteCount = 0

        init() {
            mutex = .allocate(capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }

        /// The kept matrix if it has exactly `byteCount` bytes (taking it out), else nil.
        func take(byteCount wanted: Int) -> UnsafeMutableRawPointer? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            guard let kept = bytes, byteCount == wanted else { return nil }
            bytes = nil
            return kept
        }

        /// Keeps `candidate`; returns the allocation to free instead (the previous spare, if any).
        func keep(_ candidate: UnsafeMutableRawPointer, byteCount size: Int) -> UnsafeMutableRawPointer? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            let previous = bytes
            bytes = candidate
            byteCount = size
            return previous
        }
    }
}
