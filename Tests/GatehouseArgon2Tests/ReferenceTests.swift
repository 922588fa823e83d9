import Foundation
import GatehouseArgon2
import Testing

/// Differential test: Gatehouse's Argon2id against the reference C implementation (argon2-cffi),
/// run once through Benchmarks/argon2_reference.py with every case on stdin.
///
/// Needs `GATEHOUSE_ARGON2_REFERENCE` = a Python interpreter with argon2-cffi:
///
///     GATEHOUSE_ARGON2_REFERENCE=$(bash scripts/argon2-reference.sh) \
///         swift test --scratch-path .build-argon2 --filter GatehouseArgon2Tests
///
/// Without it the test fails, unless `GATEHOUSE_SKIP_REFERENCE=1`, which skips it.
/// The cases are random; `GATEHOUSE_ARGON2_SEED=<n>` replays the seed a failure prints.
@Suite("Differential test against the reference implementation")
struct ReferenceTests {
    static let environment = ProcessInfo.processInfo.environment

    @Test(
        "random cases match argon2-cffi",
        .enabled(if: environment["GATEHOUSE_SKIP_REFERENCE"] != "1", "GATEHOUSE_SKIP_REFERENCE=1 is set"),
        .timeLimit(.minutes(2))
    )
    func matchesReference() async throws {
        guard let python = Self.environment["GATEHOUSE_ARGON2_REFERENCE"], !python.isEmpty else {
            Issue.record("""
                GATEHOUSE_ARGON2_REFERENCE is not set, so Argon2id was not compared with the reference \
                implementation. Run:
                    GATEHOUSE_ARGON2_REFERENCE=$(bash scripts/argon2-reference.sh) swift test --scratch-path .build-argon2 --filter GatehouseArgon2Tests
                (scripts/argon2-reference.sh creates .build-venv with argon2-cffi and prints its interpreter), \
                or set GATEHOUSE_SKIP_REFERENCE=1 to skip this test.
                """)
            return
        }

        let seed = Self.environment["GATEHOUSE_ARGON2_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: .min ... .max)
        let replay = "seed \(seed) (replay with GATEHOUSE_ARGON2_SEED=\(seed))"
        var generator = SplitMix64(seed: seed)
        var cases = (0..<120).map { _ in ReferenceCase.random(using: &generator) }
        cases += ReferenceCase.fixed

        let tags: [String]
        do {
            tags = try await runReference(python: python, cases: cases)
        } catch {
            Issue.record("reference implementation failed: \(error)")
            return
        }
        try #require(tags.count == cases.count, "reference returned \(tags.count) tags for \(cases.count) cases")

        var failures = 0
        for (index, (testCase, expected)) in zip(cases, tags).enumerated() {
            let actual: String
            do {
                actual = hex(try Argon2.hash(
                    password: testCase.passwordBytes, salt: testCase.saltBytes,
                    parameters: testCase.parameters, secret: testCase.secretBytes, associatedData: testCase.adBytes
                ))
            } catch {
                Issue.record("case \(index) of \(replay) threw \(error): \(testCase)")
                failures += 1
                continue
            }
            if actual != expected {
                failures += 1
                if failures <= 5 {
                    Issue.record("case \(index) of \(replay): \(testCase)\n  swift     \(actual)\n  reference \(expected)")
                }
            }
        }
        #expect(failures == 0, "\(failures) of \(cases.count) cases differ from the reference; \(replay)")
    }

    /// Runs the reference script with the cases as JSON on stdin and returns its hex tags.
    private func runReference(python: String, cases: [ReferenceCase]) async throws -> [String] {
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Benchmarks/argon2_reference.py")
        let input = FileManager.default.temporaryDirectory
            .appendingPathComponent("gatehouse-argon2-cases-\(UUID().uuidString).json")
        try JSONEncoder().encode(["cases": cases]).write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }

        // stdout and stderr go to files too: no pipe can fill up and block either side.
        let output = input.appendingPathExtension("out")
        let errors = input.appendingPathExtension("err")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: output)
            try? FileManager.default.removeItem(at: errors)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path]
        process.standardInput = try FileHandle(forReadingFrom: input)
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        // Polled, not waitUntilExit(): a blocked thread is one fewer for every other test's tasks.
        while process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
        guard process.terminationStatus == 0 else {
            let message = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw ReferenceFailure(
                message: "\(python) \(script.path) exited with \(process.terminationStatus): \(message)"
            )
        }
        let data = try Data(contentsOf: output)
        return try JSONDecoder().decode([String: [String]].self, from: data)["tags"] ?? []
    }
}

struct ReferenceFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// One input set, in the JSON form Benchmarks/argon2_reference.py reads (hex byte strings).
struct ReferenceCase: Codable, CustomStringConvertible {
    var password: String
    var salt: String
    var secret: String
    var ad: String
    var m: UInt32
    var t: UInt32
    var p: UInt32
    var length: Int

    var passwordBytes: [UInt8] { unhex(password) }
    var saltBytes: [UInt8] { unhex(salt) }
    var secretBytes: [UInt8] { unhex(secret) }
    var adBytes: [UInt8] { unhex(ad) }
    var parameters: Argon2Parameters {
        Argon2Parameters(memoryKiB: m, iterations: t, parallelism: p, hashLength: length)
    }

    var description: String {
        "m=\(m) t=\(t) p=\(p) T=\(length) password=\(password) salt=\(salt) secret=\(secret) ad=\(ad)"
    }

    /// Password 0-64 random bytes, salt 8-32, m 8p...256, t 1...4, p 1...4, tag 4...64 bytes;
    /// a quarter of the cases also get a secret and associated data.
    static func random(using generator: inout SplitMix64) -> ReferenceCase {
        func bytes(_ count: Int) -> String {
            hex((0..<count).map { _ in UInt8.random(in: 0 ... 255, using: &generator) })
        }
        let p = UInt32.random(in: 1...4, using: &generator)
        let withExtras = Int.random(in: 0..<4, using: &generator) == 0
        return ReferenceCase(
            password: bytes(Int.random(in: 0...64, using: &generator)),
            salt: bytes(Int.random(in: 8...32, using: &generator)),
            secret: withExtras ? bytes(Int.random(in: 1...32, using: &generator)) : "",
            ad: withExtras ? bytes(Int.random(in: 1...32, using: &generator)) : "",
            m: UInt32.random(in: (8 * p)...256, using: &generator),
            t: UInt32.random(in: 1...4, using: &generator),
            p: p,
            length: Int.random(in: 4...64, using: &generator)
        )
    }

    /// Edge cases: tags longer than one BLAKE2b output (H' chaining), odd m, many lanes,
    /// more than 128 blocks per segment (several address blocks), and the RFC 9106 inputs.
    static let fixed: [ReferenceCase] = [
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 64, t: 1, p: 1, length: 65),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 64, t: 1, p: 1, length: 96),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 64, t: 1, p: 1, length: 97),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 64, t: 2, p: 2, length: 1024),
        ReferenceCase(password: "", salt: "0000000000000000", secret: "", ad: "",
                      m: 8, t: 1, p: 1, length: 4),
        ReferenceCase(password: "01", salt: "0102030405060708", secret: "", ad: "",
                      m: 103, t: 3, p: 3, length: 32),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 256, t: 2, p: 16, length: 32),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 2048, t: 3, p: 1, length: 32),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 4099, t: 2, p: 3, length: 32),
        ReferenceCase(password: String(repeating: "01", count: 32), salt: String(repeating: "02", count: 16),
                      secret: String(repeating: "03", count: 8), ad: String(repeating: "04", count: 12),
                      m: 32, t: 3, p: 4, length: 32),
    ]
}

/// SplitMix64: a small seeded generator, so a failing run can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func unhex(_ string: String) -> [UInt8] {
    let digits = Array(string.utf8)
    func value(_ c: UInt8) -> UInt8 { c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : (c | 0x20) - UInt8(ascii: "a") + 10 }
    return stride(from: 0, to: digits.count - 1, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
}
