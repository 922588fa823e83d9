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
///   ``Argon2/releaseIdleMemory(force:)`` gives the kept matrix back once hashing has paused, so an
///   idle server does not hold m KiB it is not using.
/// - Large matrices (Linux, 4 MiB or more) are mapped with mmap and unmapped when freed, so their
///   memory really returns to the system (freed through malloc, glibc keeps such blocks in its heap
///   once its mmap threshold has risen). They are 2 MiB aligned and advised as transparent huge
///   pages, since Argon2 reads blocks at random across all of it and 4 KiB pages make many of those
///   reads miss the TLB too (a few percent at m=19456). Where THP is disabled, the advice is a no-op.
/// - Wiping: released memory is zeroed first, as the reference implementation does.
enum MatrixMemory {
    private static let hugePage = 1 << 21

    /// `byteCount` bytes for a matrix, 64-byte aligned (2 MiB on Linux for large matrices).
    static func allocate(byteCount: Int) -> UnsafeMutableRawPointer {
        if let recycled = spare.take(byteCount: byteCount) {
            return recycled
        }
        #if os(Linux)
        if isMapped(byteCount) {
            return map(byteCount)
        }
        #endif
        return UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 64)
    }

    /// Wipes a matrix from ``allocate(byteCount:)`` and keeps it for reuse or frees it.
    static func release(_ bytes: UnsafeMutableRawPointer, byteCount: Int) {
        wipe(bytes, byteCount: byteCount)
        if let evicted = spare.keep(bytes, byteCount: byteCount) {
            free(evicted.bytes, byteCount: evicted.byteCount)
        }
    }

    /// Frees the kept matrix when no hash has taken or returned it since the previous call (or at once with
    /// `force`). True when memory was given back.
    static func trim(force: Bool) -> Bool {
        guard let idle = spare.takeIfIdle(force: force) else { return false }
        free(idle.bytes, byteCount: idle.byteCount)
        return true
    }

    /// Zeroes `byteCount` bytes. Not inlined, so that it stays one memset call (which the
    /// optimiser cannot drop: the memory is then recycled or freed through opaque calls).
    @inline(never)
    static func wipe(_ bytes: UnsafeMutableRawPointer, byteCount: Int) {
        bytes.initializeMemory(as: UInt8.self, repeating: 0, count: byteCount)
    }

    private static func isMapped(_ byteCount: Int) -> Bool {
        #if os(Linux)
        byteCount >= 2 * hugePage
        #else
        false
        #endif
    }

    #if os(Linux)
    /// A private anonymous mapping of `byteCount` bytes (rounded up to whole huge pages) at a 2 MiB boundary.
    /// Out of address space it traps, as Swift's own allocations do.
    private static func map(_ byteCount: Int) -> UnsafeMutableRawPointer {
        let length = mappedLength(byteCount)
        guard let raw = mmap(nil, length + hugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            raw != MAP_FAILED
        else { fatalError("Argon2: cannot map \(length) bytes for the block matrix") }
        let address = UInt(bitPattern: raw)
        let aligned = (address + UInt(hugePage) - 1) & ~UInt(hugePage - 1)
        let head = Int(aligned - address)
        if head > 0 { munmap(raw, head) }
        let tail = hugePage - head
        let bytes = UnsafeMutableRawPointer(bitPattern: aligned)!
        if tail > 0 { munmap(bytes + length, tail) }
        _ = madvise(bytes, length, MADV_HUGEPAGE)
        return bytes
    }

    private static func mappedLength(_ byteCount: Int) -> Int {
        (byteCount + hugePage - 1) / hugePage * hugePage
    }
    #endif

    private static func free(_ bytes: UnsafeMutableRawPointer, byteCount: Int) {
        #if os(Linux)
        if isMapped(byteCount) {
            munmap(bytes, mappedLength(byteCount))
            return
        }
        #endif
        bytes.deallocate()
    }

    static let spare = Spare()

    /// One recycled matrix, guarded by a mutex, and whether it was used since the last trim.
    final class Spare: @unchecked Sendable {
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private var bytes: UnsafeMutableRawPointer?
        private var byteCount = 0
        private var used = false

        init() {
            mutex = .allocate(capacity: 1)
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }

        /// The kept matrix if it has exactly `byteCount` bytes (taking it out), else nil.
        func take(byteCount wanted: Int) -> UnsafeMutableRawPointer? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            used = true
            guard let kept = bytes, byteCount == wanted else { return nil }
            bytes = nil
            return kept
        }

        /// Keeps `candidate`; returns the allocation to free instead (the previous spare, if any).
        func keep(_ candidate: UnsafeMutableRawPointer, byteCount size: Int) -> (bytes: UnsafeMutableRawPointer, byteCount: Int)? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            let previous = bytes.map { ($0, byteCount) }
            bytes = candidate
            byteCount = size
            used = true
            return previous
        }

        /// Takes out the kept matrix when it was not used since the last call (or with `force`), to be freed.
        func takeIfIdle(force: Bool) -> (bytes: UnsafeMutableRawPointer, byteCount: Int)? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            let idle = force || !used
            used = false
            guard idle, let kept = bytes else { return nil }
            bytes = nil
            return (kept, byteCount)
        }
    }
}
