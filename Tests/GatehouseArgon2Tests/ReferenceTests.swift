import Foundation
import GatehouseArgon2
import Testing

/// Differential test: Gatehouse's Argon2 (Argon2d, Argon2i and Argon2id, versions 0x10 and 0x13) against the
/// reference C implementation (argon2-cffi), run once through Benchmarks/argon2_reference.py with every case on
/// stdin; for about a third of the cases the script also writes the PHC string argon2-cffi makes and passlib's
/// form of it, which ``Argon2/verifyAnyPHC(password:phc:maxMemoryKiB:)`` must accept.
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

        let output: ReferenceOutput
        do {
            output = try await runReference(python: python, cases: cases)
        } catch {
            Issue.record("reference implementation failed: \(error)")
            return
        }
        let tags = output.tags
        try #require(tags.count == cases.count, "reference returned \(tags.count) tags for \(cases.count) cases")
        try #require(output.phc.count == cases.count && output.passlib.count == cases.count)
        for variant in Argon2Variant.allCases {
            for version in Argon2Version.allCases {
                #expect(cases.contains { $0.variant == variant && $0.argon2Version == version && $0.phc },
                        "no PHC case for \(variant) \(version); \(replay)")
            }
        }

        var failures = 0
        for (index, (testCase, expected)) in zip(cases, tags).enumerated() {
            let actual: String
            do {
                actual = hex(try Argon2.hash(
                    password: testCase.passwordBytes, salt: testCase.saltBytes, parameters: testCase.parameters,
                    variant: testCase.variant, version: testCase.argon2Version,
                    secret: testCase.secretBytes, associatedData: testCase.adBytes
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

        var phcCases = 0
        for (index, testCase) in cases.enumerated() where testCase.phc {
            guard let phc = output.phc[index], let passlib = output.passlib[index] else {
                Issue.record("case \(index) of \(replay): the reference wrote no PHC string")
                continue
            }
            phcCases += 1
            checkPHC(phc, passlib: passlib, testCase, "case \(index) of \(replay): \(testCase)")
        }
        #expect(phcCases >= 20, "only \(phcCases) PHC cases; \(replay)")
    }

    /// argon2-cffi's PHC string `phc` for `testCase` (and passlib's form of it): parsed as the case's variant,
    /// version and parameters, accepted for the password, refused for another one or beyond the memory limit.
    private func checkPHC(_ phc: String, passlib: String, _ testCase: ReferenceCase, _ context: String) {
        let password = String(decoding: testCase.passwordBytes, as: UTF8.self)
        let expected = Argon2HashInfo(
            variant: testCase.variant, version: testCase.argon2Version, parameters: testCase.parameters
        )
        #expect(phc.hasPrefix("$\(testCase.variant.phcIdentifier)$v=\(testCase.version)$m="), "\(phc); \(context)")
        if testCase.argon2Version == .v10 {
            #expect(passlib == phc.replacingOccurrences(of: "$v=16$", with: "$"), "\(passlib); \(context)")
        } else {
            #expect(passlib == phc, "\(passlib); \(context)")
        }
        for string in Set([phc, passlib]) {
            do {
                #expect(try Argon2.parseAnyPHC(string) == expected, "\(string); \(context)")
                #expect(try Argon2.verifyAnyPHC(password: password, phc: string, maxMemoryKiB: testCase.m),
                        "\(string); \(context)")
                #expect(try !Argon2.verifyAnyPHC(password: password + "x", phc: string, maxMemoryKiB: .max),
                        "\(string); \(context)")
                // The Argon2id-v19-only API reads every other variant or version as malformed (so: rehash).
                if testCase.variant == .id && testCase.argon2Version == .v13 {
                    #expect(try Argon2.parseParameters(phc: string) == testCase.parameters, "\(context)")
                    #expect(try Argon2.verifyPHC(password: password, phc: string), "\(context)")
                }
            } catch {
                Issue.record("\(string) threw \(error); \(context)")
            }
            let capped = #expect(throws: Argon2Error.self, "\(string); \(context)") {
                try Argon2.verifyAnyPHC(password: password, phc: string, maxMemoryKiB: testCase.m - 1)
            }
            #expect(capped?.isCostLimitExceeded == true, "\(string); \(context)")
            if testCase.variant != .id || testCase.argon2Version != .v13 {
                #expect(throws: Argon2Error.self, "\(string); \(context)") { try Argon2.parseParameters(phc: string) }
                #expect(throws: Argon2Error.self, "\(string); \(context)") {
                    try Argon2.verifyPHC(password: password, phc: string)
                }
            }
        }
    }

    /// Runs the reference script with the cases as JSON on stdin and returns its hex tags and PHC strings.
    private func runReference(python: String, cases: [ReferenceCase]) async throws -> ReferenceOutput {
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
        return try JSONDecoder().decode(ReferenceOutput.self, from: data)
    }
}

/// What Benchmarks/argon2_reference.py answers: a hex tag per case, and for cases with `phc` the PHC strings
/// argon2-cffi and passlib write (nil for the others).
struct ReferenceOutput: Decodable {
    var tags: [String]
    var phc: [String?]
    var passlib: [String?]
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
    /// "d", "i" or "id".
    var type = "id"
    /// 16 or 19, as in PHC strings.
    var version = 19
    /// Whether the reference also writes the case's PHC string (the password is then UTF-8 text, and there is
    /// no secret or associated data).
    var phc = false

    var passwordBytes: [UInt8] { unhex(password) }
    var saltBytes: [UInt8] { unhex(salt) }
    var secretBytes: [UInt8] { unhex(secret) }
    var adBytes: [UInt8] { unhex(ad) }
    var parameters: Argon2Parameters {
        Argon2Parameters(memoryKiB: m, iterations: t, parallelism: p, hashLength: length)
    }
    var variant: Argon2Variant {
        switch type {
        case "d": .d
        case "i": .i
        default: .id
        }
    }
    var argon2Version: Argon2Version { version == 16 ? .v10 : .v13 }

    var description: String {
        "argon2\(type) v=\(version) m=\(m) t=\(t) p=\(p) T=\(length) password=\(password) salt=\(salt) "
            + "secret=\(secret) ad=\(ad)\(phc ? " phc" : "")"
    }

    /// Variant d, i or id and version 16 or 19 at random; salt 8-32 random bytes, m 8p...256, t 1...4, p 1...4,
    /// tag 4...64 bytes. A quarter of the cases also get a secret and associated data and a password of 0-64
    /// random bytes; of the others, half get a password of 0-64 random bytes, half one of 0-20 random characters
    /// (ASCII and not) and their PHC strings from the reference.
    static func random(using generator: inout SplitMix64) -> ReferenceCase {
        func bytes(_ count: Int) -> String {
            hex((0..<count).map { _ in UInt8.random(in: 0 ... 255, using: &generator) })
        }
        let p = UInt32.random(in: 1...4, using: &generator)
        let withExtras = Int.random(in: 0..<4, using: &generator) == 0
        let phc = !withExtras && Bool.random(using: &generator)
        let characters = Array("abcXYZ019 $=,+/\\\"'äßé€✓日本🔑\u{0}")
        let text = String((0..<Int.random(in: 0...20, using: &generator)).map { _ in
            characters.randomElement(using: &generator)!
        })
        return ReferenceCase(
            password: phc ? hex(Array(text.utf8)) : bytes(Int.random(in: 0...64, using: &generator)),
            salt: bytes(Int.random(in: 8...32, using: &generator)),
            secret: withExtras ? bytes(Int.random(in: 1...32, using: &generator)) : "",
            ad: withExtras ? bytes(Int.random(in: 1...32, using: &generator)) : "",
            m: UInt32.random(in: (8 * p)...256, using: &generator),
            t: UInt32.random(in: 1...4, using: &generator),
            p: p,
            length: Int.random(in: 4...64, using: &generator),
            type: ["d", "i", "id"].randomElement(using: &generator)!,
            version: Bool.random(using: &generator) ? 16 : 19,
            phc: phc
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
        // The other variants and version 0x10 with several address blocks per segment, many lanes, odd m.
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 2048, t: 3, p: 1, length: 32, type: "i", version: 16, phc: true),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 2048, t: 2, p: 1, length: 32, type: "i", version: 19, phc: true),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 2048, t: 3, p: 1, length: 32, type: "d", version: 16),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 4099, t: 2, p: 3, length: 32, type: "d", version: 19),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 4099, t: 2, p: 3, length: 32, type: "id", version: 16, phc: true),
        ReferenceCase(password: "70617373776f7264", salt: "73616c7473616c74", secret: "", ad: "",
                      m: 256, t: 2, p: 16, length: 32, type: "i", version: 16),
        ReferenceCase(password: String(repeating: "01", count: 32), salt: String(repeating: "02", count: 16),
                      secret: String(repeating: "03", count: 8), ad: String(repeating: "04", count: 12),
                      m: 32, t: 3, p: 4, length: 32, type: "d", version: 16),
        ReferenceCase(password: String(repeating: "01", count: 32), salt: String(repeating: "02", count: 16),
                      secret: String(repeating: "03", count: 8), ad: String(repeating: "04", count: 12),
                      m: 32, t: 3, p: 4, length: 32, type: "i", version: 16),
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
