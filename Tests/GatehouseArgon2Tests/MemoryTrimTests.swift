@testable import GatehouseArgon2
import Testing

/// The kept matrix goes back to the system once hashing pauses (``Argon2/releaseIdleMemory(force:)``), on a
/// `Spare` of the test's own so that hashes of other suites running alongside cannot interfere.
@Suite("Matrix memory trim")
struct MemoryTrimTests {
    static func block() -> UnsafeMutableRawPointer { .allocate(byteCount: 64, alignment: 64) }

    @Test("a matrix used since the last trim stays; one idle for a whole interval is handed back")
    func idleTrim() throws {
        let spare = MatrixMemory.Spare()
        let matrix = Self.block()
        #expect(spare.keep(matrix, byteCount: 64) == nil)
        #expect(spare.takeIfIdle(force: false) == nil)                 // returned during this interval: used
        let idle = try #require(spare.takeIfIdle(force: false))       // a whole interval without hashing
        #expect(idle.bytes == matrix && idle.byteCount == 64)
        #expect(spare.take(byteCount: 64) == nil)                     // nothing kept any more
        idle.bytes.deallocate()
    }

    @Test("taking the matrix for a hash counts as use; force hands it back at once")
    func useAndForce() throws {
        let spare = MatrixMemory.Spare()
        let matrix = Self.block()
        _ = spare.keep(matrix, byteCount: 64)
        _ = spare.takeIfIdle(force: false)
        let taken = try #require(spare.take(byteCount: 64))          // a hash starts with it
        #expect(taken == matrix)
        #expect(spare.keep(taken, byteCount: 64) == nil)              // and returns it
        #expect(spare.takeIfIdle(force: false) == nil)
        #expect(try #require(spare.takeIfIdle(force: true)).bytes == matrix)
        #expect(spare.takeIfIdle(force: true) == nil)                 // empty: nothing to free
        matrix.deallocate()
    }

    @Test("hashes after a forced release still agree with earlier ones")
    func hashAfterRelease() throws {
        let before = try MemoryTests.tag("c", memoryKiB: 4104)
        Argon2.releaseIdleMemory(force: true)
        #expect(try MemoryTests.tag("c", memoryKiB: 4104) == before)
    }
}
