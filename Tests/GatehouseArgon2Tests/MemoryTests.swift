@testable import GatehouseArgon2
import Testing

/// The block matrix is recycled between hashes and, when large, backed by huge pages:
/// results must not depend on what ran before or alongside.
@Suite("Matrix memory reuse")
struct MemoryTests {
    static let salt = [UInt8](repeating: 0x5A, count: 16)

    static func tag(_ password: String, memoryKiB: UInt32, parallelism: UInt32 = 1) throws -> [UInt8] {
        try Argon2.hash(
            password: Array(password.utf8), salt: salt,
            parameters: Argon2Parameters(memoryKiB: memoryKiB, iterations: 1, parallelism: parallelism)
        )
    }

    @Test("hashes agree whether their memory is fresh or recycled, small or huge-page sized")
    func recycled() throws {
        let big = try Self.tag("a", memoryKiB: 4096)      // 4 MiB: huge-page path
        let small = try Self.tag("a", memoryKiB: 64)
        #expect(try Self.tag("a", memoryKiB: 4096) == big)  // after a different size
        #expect(try Self.tag("a", memoryKiB: 4096) == big)  // recycled matrix of the same size
        #expect(try Self.tag("a", memoryKiB: 64) == small)
        #expect(try Self.tag("b", memoryKiB: 4096) != big)
    }

    @Test("concurrent hashes give the same tags as sequential ones")
    func concurrent() async throws {
        let sizes: [UInt32] = [64, 4096, 64, 4100, 4096, 256, 4096, 4100]
        let expected = try sizes.map { try Self.tag("pw", memoryKiB: $0, parallelism: $0 == 4100 ? 4 : 1) }
        let results = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for (index, size) in sizes.enumerated() {
                group.addTask {
                    (index, try Self.tag("pw", memoryKiB: size, parallelism: size == 4100 ? 4 : 1))
                }
            }
            var tags = [[UInt8]](repeating: [], count: sizes.count)
            for try await (index, tag) in group {
                tags[index] = tag
            }
            return tags
        }
        #expect(results == expected)
    }
}
