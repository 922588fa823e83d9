import Foundation
import GatehouseArgon2
import Testing

@Suite("PHC strings and parameters")
struct PHCTests {
    let small = Argon2Parameters(memoryKiB: 64, iterations: 2, parallelism: 2)

    @Test("hashPHC writes $argon2id$v=19$m=..,t=..,p=..$salt$hash and verifyPHC accepts it")
    func roundTrip() throws {
        let phc = try Argon2.hashPHC(password: "hunter2 ✓", parameters: small)
        #expect(phc.hasPrefix("$argon2id$v=19$m=64,t=2,p=2$"))
        let fields = phc.split(separator: "$", omittingEmptySubsequences: false)
        #expect(fields.count == 6)
        #expect(fields[4].count == 22)  // 16-byte salt, unpadded base64
        #expect(fields[5].count == 43)  // 32-byte tag, unpadded base64
        #expect(!fields[4].contains("=") && !fields[5].contains("="))
        #expect(try Argon2.verifyPHC(password: "hunter2 ✓", phc: phc))
    }

    @Test("verifyPHC rejects a wrong password")
    func wrongPassword() throws {
        let phc = try Argon2.hashPHC(password: "hunter2", parameters: small)
        #expect(try !Argon2.verifyPHC(password: "hunter3", phc: phc))
        #expect(try !Argon2.verifyPHC(password: "", phc: phc))
        #expect(try !Argon2.verifyPHC(password: "hunter2 ", phc: phc))
    }

    @Test("hashPHC draws a fresh salt each time")
    func freshSalt() throws {
        let a = try Argon2.hashPHC(password: "same", parameters: small)
        let b = try Argon2.hashPHC(password: "same", parameters: small)
        #expect(a != b)
        #expect(try Argon2.verifyPHC(password: "same", phc: a))
        #expect(try Argon2.verifyPHC(password: "same", phc: b))
    }

    @Test("hashPHC with a non-default hash length round-trips")
    func otherHashLength() throws {
        let parameters = Argon2Parameters(memoryKiB: 32, iterations: 1, parallelism: 1, hashLength: 70)
        let phc = try Argon2.hashPHC(password: "x", parameters: parameters)
        #expect(try Argon2.parseParameters(phc: phc) == parameters)
        #expect(try Argon2.verifyPHC(password: "x", phc: phc))
    }

    @Test("parseParameters reads m, t, p and the tag length")
    func parse() throws {
        let owasp = Argon2Parameters(memoryKiB: 19456, iterations: 2, parallelism: 1)
        #expect(try Argon2.parseParameters(
            phc: "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Sr6N/nCmohWCvF7EZislLIdwA8ojCXux0K30ccqFS30"
        ) == owasp)
        let phc = try Argon2.hashPHC(password: "pw", parameters: small)
        #expect(try Argon2.parseParameters(phc: phc) == small)
        #expect(try Argon2.parseParameters(phc: phc) != owasp)  // i.e. a rehash is due
        #expect(try Argon2.parseParameters(
            phc: "$argon2id$v=19$m=4294967295,t=4294967295,p=16777215$c29tZXNhbHRzb21lc2FsdA$AAAAAA"
        ) == Argon2Parameters(memoryKiB: .max, iterations: .max, parallelism: 16_777_215, hashLength: 4))
    }

    static let salt = "c29tZXNhbHRzb21lc2FsdA"  // "somesaltsomesalt"
    static let tag = "Sr6N/nCmohWCvF7EZislLIdwA8ojCXux0K30ccqFS30"
    static let malformed: [String] = [
        "",
        "$",
        "$$$$$",
        "argon2id$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        " $argon2id$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$\(tag) ",
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$\(tag)$",
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)",
        "$argon2i$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2d$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$ARGON2ID$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$scrypt$ln=16,r=8,p=1$aM15713r3Xsvxbi31lqr1Q$nFNh2CVHVjNldFVKDHDlm4CbdRSCdEBsjjJxD+iCs5E",
        "$argon2id$m=64,t=2,p=1$\(salt)$\(tag)",  // no v= means version 1.0
        "$argon2id$v=16$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=019$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$t=2,m=64,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=64,t=2$\(salt)$\(tag)",
        "$argon2id$v=19$m=64,t=2,p=1,x=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=64,t=2,p=1,$\(salt)$\(tag)",
        "$argon2id$v=19$m=,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=064,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=+64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=-64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=6 4,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=٦٤,t=2,p=1$\(salt)$\(tag)",  // Arabic-Indic digits
        "$argon2id$v=19$m=4294967296,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=99999999999999999999999,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=64,t=0,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=64,t=2,p=0$\(salt)$\(tag)",
        "$argon2id$v=19$m=15,t=2,p=2$\(salt)$\(tag)",  // m < 8p
        "$argon2id$v=19$m=4294967295,t=1,p=16777216$\(salt)$\(tag)",  // p > 2^24-1
        "$argon2id$v=19$m=64,t=2,p=1$$\(tag)",  // empty salt
        "$argon2id$v=19$m=64,t=2,p=1$c29tZXNhbA$\(tag)",  // 7-byte salt
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$",  // empty tag
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$AAAA",  // 3-byte tag
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)==$\(tag)",  // padding
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$\(tag)=",
        "$argon2id$v=19$m=64,t=2,p=1$c29tZXNhbHRzb21lc2FsdB$\(tag)",  // non-zero trailing bits
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$\(tag)AA",  // length 1 mod 4
        "$argon2id$v=19$m=64,t=2,p=1$c29tZXNhbHRz-21lc2FsdA$\(tag)",  // base64url
        "$argon2id$v=19$m=64,t=2,p=1$c29tZXNhbHRz_21lc2FsdA$\(tag)",
        "$argon2id$v=19$m=64,t=2,p=1$c29tZXNh bHRzb21lc2FsdA$\(tag)",
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$Sr6N/nCmohWCvF7EZislLIdwA8ojCXux0K30ccqFS3é",
        "$argon2id$v=19$m=64,t=2,p=1$\(salt)$\u{0}\(tag)",
        "$argon2id\u{301}$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=19$m=64,t=2,p=1$\u{301}\(salt)$\(tag)",
    ]

    /// Other variants and versions: well-formed, but not what `parseParameters` and `verifyPHC` take.
    static let otherVariantsAndVersions: Set<String> = [
        "$argon2i$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2d$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2id$v=16$m=64,t=2,p=1$\(salt)$\(tag)",
    ]

    /// Malformed for every variant and version.
    static let malformedForAny: [String] = malformed.filter { !otherVariantsAndVersions.contains($0) } + [
        "$argon2i$v=19$m=64,t=2,p=1,keyid=c29tZWtleQ$\(salt)$\(tag)",
        "$argon2i$v=19$m=64,t=2,p=1,data=c29tZWRhdGE$\(salt)$\(tag)",
        "$argon2i$m=64,t=2,p=1,keyid=c29tZWtleQ,data=c29tZWRhdGE$\(salt)$\(tag)",
        "$argon2i$v=17$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i$v=20$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i$v=016$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i$v=0x13$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i$v=$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i$V=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i$v=19$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i$v=19$m=64,t=2,p=1$\(salt)",  // version, no tag
        "$argon2i$v=16$\(salt)$\(tag)",  // version, no parameters
        "$argon2i$m=64,t=2,p=1$\(salt)",  // no version, no tag
        "$argon2i$$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2ds$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2di$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$Argon2i$v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2i $v=19$m=64,t=2,p=1$\(salt)$\(tag)",
        "$argon2d$m=064,t=2,p=1$\(salt)$\(tag)",
        "$argon2d$m=64,t=0,p=1$\(salt)$\(tag)",
        "$argon2d$m=15,t=2,p=2$\(salt)$\(tag)",
        "$argon2d$m=64,t=2,p=1$\(salt)==$\(tag)",
        "$argon2d$m=64,t=2,p=1$c29tZXNhbA$\(tag)",  // 7-byte salt
        "$argon2d$m=64,t=2,p=1$\(salt)$AAAA",  // 3-byte tag
    ]

    @Test("parseAnyPHC reads every variant and version, with or without v=",
          arguments: [
              ("$argon2d$v=19$m=64,t=2,p=1$\(salt)$\(tag)", Argon2Variant.d, Argon2Version.v13),
              ("$argon2i$v=19$m=64,t=2,p=1$\(salt)$\(tag)", .i, .v13),
              ("$argon2id$v=19$m=64,t=2,p=1$\(salt)$\(tag)", .id, .v13),
              ("$argon2d$v=16$m=64,t=2,p=1$\(salt)$\(tag)", .d, .v10),
              ("$argon2i$v=16$m=64,t=2,p=1$\(salt)$\(tag)", .i, .v10),
              ("$argon2id$v=16$m=64,t=2,p=1$\(salt)$\(tag)", .id, .v10),
              ("$argon2d$m=64,t=2,p=1$\(salt)$\(tag)", .d, .v10),
              ("$argon2i$m=64,t=2,p=1$\(salt)$\(tag)", .i, .v10),
              ("$argon2id$m=64,t=2,p=1$\(salt)$\(tag)", .id, .v10),
          ])
    func parseAny(phc: String, variant: Argon2Variant, version: Argon2Version) throws {
        let info = try Argon2.parseAnyPHC(phc)
        #expect(info.variant == variant)
        #expect(info.version == version)
        #expect(info.parameters == Argon2Parameters(memoryKiB: 64, iterations: 2, parallelism: 1, hashLength: 32))
        #expect(info == Argon2HashInfo(variant: variant, version: version, parameters: info.parameters))
        #expect(phc.hasPrefix("$\(variant.phcIdentifier)$"))
        // Only Argon2id version 19 is current: parseParameters throws for the rest, so they read as "rehash".
        if variant == .id && version == .v13 {
            #expect(try Argon2.parseParameters(phc: phc) == info.parameters)
        } else {
            let error = #expect(throws: Argon2Error.self) { try Argon2.parseParameters(phc: phc) }
            #expect(error?.isMalformedHash == true)
        }
    }

    @Test("variants and versions have RFC 9106's type and version numbers")
    func identifiers() {
        #expect(Argon2Variant.allCases.map(\.typeID) == [0, 1, 2])
        #expect(Argon2Variant.allCases.map(\.phcIdentifier) == ["argon2d", "argon2i", "argon2id"])
        #expect(Argon2Version.allCases.map(\.rawValue) == [0x10, 0x13])
        #expect(Argon2.version == Argon2Version.v13.rawValue)
    }

    @Test("malformed PHC strings throw malformedHash from parseAnyPHC and verifyAnyPHC", arguments: malformedForAny)
    func malformedForAnyThrows(phc: String) {
        let parseError = #expect(throws: Argon2Error.self) { try Argon2.parseAnyPHC(phc) }
        #expect(parseError?.isMalformedHash == true)
        let verifyError = #expect(throws: Argon2Error.self) {
            try Argon2.verifyAnyPHC(password: "pw", phc: phc, maxMemoryKiB: .max)
        }
        #expect(verifyError?.isMalformedHash == true)
        #expect(verifyError?.isCostLimitExceeded == false)
        // What the Argon2id-only API refuses too.
        #expect(throws: Argon2Error.self) { try Argon2.parseParameters(phc: phc) }
    }

    /// Strings that would need 4 TiB or years of work: refused at once. Were the memory allocated first, the
    /// mapping would fail (a trap); were the passes run, the test would not finish.
    @Test("verifyAnyPHC refuses memory or passes above its limits before any work", .timeLimit(.minutes(1)))
    func costLimits() throws {
        let huge = [
            "$argon2d$v=19$m=4294967295,t=1,p=1$\(Self.salt)$\(Self.tag)",
            "$argon2i$m=4294967295,t=4294967295,p=16777215$\(Self.salt)$\(Self.tag)",
            "$argon2id$v=16$m=65,t=2,p=1$\(Self.salt)$\(Self.tag)",
        ]
        for phc in huge {
            let error = #expect(throws: Argon2Error.self) {
                try Argon2.verifyAnyPHC(password: "pw", phc: phc, maxMemoryKiB: 64)
            }
            #expect(error?.isCostLimitExceeded == true, "\(phc)")
            #expect(error?.isMalformedHash == false, "\(phc)")
            #expect(error?.description.hasPrefix("Argon2 hash too costly to verify: m=") == true, "\(phc)")
            #expect(error?.description.contains(Self.tag) == false)
        }
        let passes = Argon2.maxVerifyIterations + 1
        let error = #expect(throws: Argon2Error.self) {
            try Argon2.verifyAnyPHC(
                password: "pw", phc: "$argon2d$v=19$m=8,t=\(passes),p=1$\(Self.salt)$\(Self.tag)", maxMemoryKiB: .max
            )
        }
        #expect(error?.isCostLimitExceeded == true)
        #expect(error?.description.contains("t=\(passes)") == true)
        #expect(Argon2Error.costLimitExceeded("a") != Argon2Error.malformedHash("a"))
    }

    @Test("verifyAnyPHC takes memory and passes right at its limits")
    func atLimits() throws {
        // At most maxVerifyIterations passes (8 blocks each: a few milliseconds), m equal to maxMemoryKiB.
        let parameters = Argon2Parameters(memoryKiB: 8, iterations: Argon2.maxVerifyIterations, parallelism: 1)
        let salt = Array("somesaltsomesalt".utf8)
        for variant in Argon2Variant.allCases {
            for version in Argon2Version.allCases {
                let tag = try Argon2.hash(
                    password: Array("pw".utf8), salt: salt, parameters: parameters, variant: variant, version: version
                )
                let phc = "$\(variant.phcIdentifier)$v=\(version == .v13 ? 19 : 16)$m=8,t=\(parameters.iterations),p=1$"
                    + "c29tZXNhbHRzb21lc2FsdA$" + base64(tag)
                #expect(try Argon2.verifyAnyPHC(password: "pw", phc: phc, maxMemoryKiB: 8), "\(phc)")
                #expect(try !Argon2.verifyAnyPHC(password: "pX", phc: phc, maxMemoryKiB: 8), "\(phc)")
            }
        }
    }

    @Test("verifyAnyPHC accepts what hashPHC writes; each variant and version gives a different tag")
    func verifyAnyRoundTrip() throws {
        let phc = try Argon2.hashPHC(password: "hunter2 ✓", parameters: small)
        #expect(try Argon2.verifyAnyPHC(password: "hunter2 ✓", phc: phc, maxMemoryKiB: 64))
        #expect(try !Argon2.verifyAnyPHC(password: "hunter2", phc: phc, maxMemoryKiB: 64))
        #expect(try Argon2.parseAnyPHC(phc) == Argon2HashInfo(variant: .id, version: .v13, parameters: small))
        var tags = Set<[UInt8]>()
        for variant in Argon2Variant.allCases {
            for version in Argon2Version.allCases {
                tags.insert(try Argon2.hash(
                    password: [1, 2, 3], salt: [UInt8](repeating: 7, count: 8), parameters: small,
                    variant: variant, version: version
                ))
            }
        }
        #expect(tags.count == 6)
        #expect(tags.contains(try Argon2.hash(password: [1, 2, 3], salt: [UInt8](repeating: 7, count: 8), parameters: small)))
    }

    /// Random byte edits of valid strings of each form: parseAnyPHC either succeeds or throws malformedHash.
    @Test("parseAnyPHC survives 3000 random mutations")
    func anyMutations() {
        let valid = [
            "$argon2i$m=64,t=2,p=1$\(Self.salt)$\(Self.tag)",
            "$argon2d$v=16$m=64,t=2,p=1$\(Self.salt)$\(Self.tag)",
            "$argon2id$v=19$m=64,t=2,p=1$\(Self.salt)$\(Self.tag)",
        ].map { Array($0.utf8) }
        let alphabet = Array("$=,0123456789mtpvdiAZaz+/é\u{0} argon2id".utf8)
        var generator = SplitMix64(seed: 0xA2_6012)
        var parsed = 0
        for round in 0..<3000 {
            var bytes = valid[round % valid.count]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                if bytes.isEmpty { break }
                let position = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[position] = alphabet.randomElement(using: &generator)!
                case 1: bytes.remove(at: position)
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: position)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            do {
                _ = try Argon2.parseAnyPHC(text)
                parsed += 1
            } catch let error as Argon2Error {
                #expect(error.isMalformedHash, "\(text)")
            } catch {
                Issue.record("unexpected error \(error) for \(text)")
            }
        }
        #expect(parsed > 0 && parsed < 3000)
    }

    @Test("malformed PHC strings throw Argon2Error.malformedHash", arguments: malformed)
    func malformedThrows(phc: String) {
        let parseError = #expect(throws: Argon2Error.self) { try Argon2.parseParameters(phc: phc) }
        #expect(parseError?.isMalformedHash == true)
        let verifyError = #expect(throws: Argon2Error.self) { try Argon2.verifyPHC(password: "pw", phc: phc) }
        #expect(verifyError?.isMalformedHash == true)
        #expect(verifyError?.description.hasPrefix("malformed Argon2 PHC string: ") == true)
    }

    /// Random byte edits of a valid string: parsing either succeeds or throws Argon2Error, never traps.
    @Test("parseParameters survives 5000 random mutations")
    func mutations() {
        let valid = Array("$argon2id$v=19$m=64,t=2,p=1$\(Self.salt)$\(Self.tag)".utf8)
        let alphabet = Array("$=,0123456789mtpvAZaz+/é\u{0} argon2id".utf8)
        var generator = SplitMix64(seed: 0xA2_6011)
        var parsed = 0
        for _ in 0..<5000 {
            var bytes = valid
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let position = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[position] = alphabet.randomElement(using: &generator)!
                case 1: bytes.remove(at: position)
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: position)
                }
                if bytes.isEmpty { break }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            do {
                _ = try Argon2.parseParameters(phc: text)
                parsed += 1
            } catch let error as Argon2Error {
                #expect(error.isMalformedHash, "\(text)")
            } catch {
                Issue.record("unexpected error \(error) for \(text)")
            }
        }
        #expect(parsed < 5000)
    }

    @Test("a valid string from the same pieces parses (control for the malformed cases)")
    func control() throws {
        #expect(try Argon2.verifyPHC(
            password: "correct horse battery staple",
            phc: "$argon2id$v=19$m=64,t=2,p=1$\(Self.salt)$\(Self.tag)"
        ))
    }

    @Test("a tampered tag or salt fails verification without throwing")
    func tampered() throws {
        #expect(try !Argon2.verifyPHC(
            password: "correct horse battery staple",
            phc: "$argon2id$v=19$m=64,t=2,p=1$\(Self.salt)$Tr6N/nCmohWCvF7EZislLIdwA8ojCXux0K30ccqFS30"
        ))
        #expect(try !Argon2.verifyPHC(
            password: "correct horse battery staple",
            phc: "$argon2id$v=19$m=64,t=2,p=1$c29tZXNhbHRzb21lc2FsdQ$\(Self.tag)"  // last salt byte changed
        ))
        // Same salt and password, truncated tag: different length, so no match.
        #expect(try !Argon2.verifyPHC(
            password: "correct horse battery staple",
            phc: "$argon2id$v=19$m=64,t=2,p=1$\(Self.salt)$Sr6N/nCmohWCvF7EZislLIdwA8ojCXux0K30ccqFSw"
        ))
    }

    static let invalid: [(Argon2Parameters, Int)] = [
        (Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 0), 16),
        (Argon2Parameters(memoryKiB: 7, iterations: 1, parallelism: 1), 16),
        (Argon2Parameters(memoryKiB: 31, iterations: 1, parallelism: 4), 16),
        (Argon2Parameters(memoryKiB: 64, iterations: 0, parallelism: 1), 16),
        (Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1, hashLength: 3), 16),
        (Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1, hashLength: -1), 16),
        (Argon2Parameters(memoryKiB: .max, iterations: 1, parallelism: 16_777_216), 16),
        (Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1), 7),  // salt < 8 bytes
        (Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1), 0),
    ]

    @Test("invalid parameters throw Argon2Error.invalidParameters", arguments: invalid)
    func invalidParameters(parameters: Argon2Parameters, saltLength: Int) {
        #expect(throws: Argon2Error.invalidParameters) {
            try Argon2.hash(password: [1, 2, 3], salt: [UInt8](repeating: 9, count: saltLength), parameters: parameters)
        }
        if saltLength >= 8 {
            #expect(!parameters.isValid)
            #expect(throws: Argon2Error.invalidParameters) {
                try Argon2.hashPHC(password: "pw", parameters: parameters)
            }
        }
    }

    @Test("the smallest valid parameters work")
    func minimum() throws {
        for p in UInt32(1)...4 {
            let parameters = Argon2Parameters(memoryKiB: 8 * p, iterations: 1, parallelism: p, hashLength: 4)
            #expect(parameters.isValid)
            #expect(try Argon2.hash(password: [], salt: [UInt8](repeating: 0, count: 8), parameters: parameters).count == 4)
        }
    }

    @Test("errors are equatable and describe themselves")
    func errors() {
        #expect(Argon2Error.invalidParameters == Argon2Error.invalidParameters)
        #expect(Argon2Error.malformedHash("a") == Argon2Error.malformedHash("a"))
        #expect(Argon2Error.malformedHash("a") != Argon2Error.malformedHash("b"))
        #expect(!Argon2Error.invalidParameters.isMalformedHash)
        #expect(Argon2Error.invalidParameters.description.contains("parameters"))
        #expect(Argon2Error.malformedHash("bad").description == "malformed Argon2 PHC string: bad")
    }
}

/// Standard base64 without padding, as in PHC strings (through Foundation, independently of the module's encoder).
func base64(_ bytes: [UInt8]) -> String {
    String(Data(bytes).base64EncodedString().prefix { $0 != "=" })
}
