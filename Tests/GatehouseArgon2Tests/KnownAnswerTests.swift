import Foundation
import GatehouseArgon2
import Testing

/// Fixed vectors: RFC 9106, RFC 7693 and values produced by the reference implementations.
@Suite("Known answers")
struct KnownAnswerTests {
    @Test("Argon2id: RFC 9106 §5.3 test vector")
    func rfc9106Argon2id() throws {
        let tag = try Argon2.hash(
            password: [UInt8](repeating: 0x01, count: 32),
            salt: [UInt8](repeating: 0x02, count: 16),
            parameters: Argon2Parameters(memoryKiB: 32, iterations: 3, parallelism: 4, hashLength: 32),
            secret: [UInt8](repeating: 0x03, count: 8),
            associatedData: [UInt8](repeating: 0x04, count: 12)
        )
        #expect(hex(tag) == "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659")
    }

    /// RFC 9106 §5.1-5.3 (version 0x13), and the version 0x10 answers to the same inputs published with the
    /// reference implementation (phc-winner-argon2, kats/argon2d_v16, argon2i_v16, argon2id_v16).
    @Test("Argon2d, Argon2i, Argon2id: RFC 9106 §5 and reference version 0x10 test vectors",
          arguments: [
              (Argon2Variant.d, Argon2Version.v13, "512b391b6f1162975371d30919734294f868e3be3984f3c1a13a4db9fabe4acb"),
              (.i, .v13, "c814d9d1dc7f37aa13f0d77f2494bda1c8de6b016dd388d29952a4c4672b6ce8"),
              (.id, .v13, "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659"),
              (.d, .v10, "96a9d4e5a1734092c85e29f410a45914a5dd1f5cbf08b2670da68a0285abf32b"),
              (.i, .v10, "87aeedd6517ab830cd9765cd8231abb2e647a5dee08f7c05e02fcb763335d0fd"),
              (.id, .v10, "b64615f07789b66b645b67ee9ed3b377ae350b6bfcbb0fc95141ea8f322613c0"),
          ])
    func rfc9106Variants(variant: Argon2Variant, version: Argon2Version, expected: String) throws {
        let tag = try Argon2.hash(
            password: [UInt8](repeating: 0x01, count: 32),
            salt: [UInt8](repeating: 0x02, count: 16),
            parameters: Argon2Parameters(memoryKiB: 32, iterations: 3, parallelism: 4, hashLength: 32),
            variant: variant,
            version: version,
            secret: [UInt8](repeating: 0x03, count: 8),
            associatedData: [UInt8](repeating: 0x04, count: 12)
        )
        #expect(hex(tag) == expected)
    }

    /// PHC strings from the reference implementation's own tests (phc-winner-argon2 src/test.c, password
    /// "password"): version 0x10 without a v= field, as the reference wrote it before version 1.3.
    @Test("verifyAnyPHC accepts the reference implementation's test strings",
          arguments: [
              "$argon2i$m=256,t=2,p=1$c29tZXNhbHQ$/U3YPXYsSb3q9XxHvc0MLxur+GP960kN9j7emXX8zwY",
              "$argon2i$m=256,t=2,p=2$c29tZXNhbHQ$tsEVYKap1h6scGt5ovl9aLRGOqOth+AMB+KwHpDFZPs",
              "$argon2i$v=19$m=256,t=2,p=1$c29tZXNhbHQ$iekCn0Y3spW+sCcFanM2xBT63UP2sghkUoHLIUpWRS8",
              "$argon2i$v=19$m=256,t=2,p=2$c29tZXNhbHQ$T/XOJ2mh1/TIpJHfCdQan76Q5esCFVoT5MAeIM1Oq2E",
              "$argon2id$v=19$m=256,t=2,p=1$c29tZXNhbHQ$nf65EOgLrQMR/uIPnA4rEsF5h7TKyQwu9U1bMCHGi/4",
              "$argon2id$v=19$m=256,t=2,p=2$c29tZXNhbHQ$bQk8UB/VmZZF4Oo79iDXuL5/0ttZwg2f/5U52iv1cDc",
          ])
    func referenceTestStrings(phc: String) throws {
        #expect(try Argon2.verifyAnyPHC(password: "password", phc: phc, maxMemoryKiB: 256))
        #expect(try !Argon2.verifyAnyPHC(password: "passwore", phc: phc, maxMemoryKiB: 256))
        // The same tag under the other version (v=16 <-> v=19) must not verify: the version changes the hash.
        let swapped = phc.contains("$v=19$")
            ? phc.replacingOccurrences(of: "$v=19$", with: "$v=16$")
            : phc.replacingOccurrences(of: "$m=", with: "$v=19$m=")
        #expect(try !Argon2.verifyAnyPHC(password: "password", phc: swapped, maxMemoryKiB: 256))
    }

    @Test("BLAKE2b-512: RFC 7693 Appendix A (\"abc\")")
    func blake2bABC() {
        #expect(hex(Blake2b.hash(Array("abc".utf8))) == """
            ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1\
            7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923
            """)
    }

    @Test("BLAKE2b-512: empty input")
    func blake2bEmpty() {
        #expect(hex(Blake2b.hash([])) == """
            786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419\
            d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce
            """)
    }

    @Test("BLAKE2b-512 keyed: official KAT, key 00..3f, empty input")
    func blake2bKeyed() {
        let key = (0..<64).map { UInt8($0) }
        #expect(hex(Blake2b.hash([], key: key)) == """
            10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786\
            b5e996e8f0f4eb981fc214b005f42d2ff4233499391653df7aefcbc13fc51568
            """)
    }

    /// Every input length 0...300 (across the 128-byte block boundaries) with varying output
    /// lengths, checked through one digest of all the outputs (computed with Python's hashlib).
    @Test("BLAKE2b: lengths 0...300 and output lengths 1...64 match hashlib")
    func blake2bLengths() {
        var outputs: [UInt8] = []
        for n in 0...300 {
            let data = (0..<n).map { UInt8($0 % 251) }
            outputs += Blake2b.hash(data, outputLength: n % 64 + 1)
        }
        #expect(outputs.count == 9355)
        #expect(hex(Blake2b.hash(outputs)) == """
            b7b2da4f1310fa8c9238c4bfb26020fd378f5820868ebf6715df970c0c4b892a\
            7562615445e1f533f523c016f32dc90b9daec0065b8e731b1bef442cf314588f
            """)
    }

    @Test("BLAKE2b keyed: key lengths 0...64 match hashlib")
    func blake2bKeyLengths() {
        var outputs: [UInt8] = []
        for n in stride(from: 0, through: 300, by: 7) {
            let data = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 7) }
            let key = (0..<(n % 65)).map { UInt8($0) }
            outputs += Blake2b.hash(data, outputLength: (n * 3) % 64 + 1, key: key)
        }
        #expect(outputs.count == 1534)
        #expect(hex(Blake2b.hash(outputs)) == """
            e04eff4e85549175dd87ea1bf703f931e5d16bfdd39316815082737e33e76e1b\
            f057a5cf1c29663aff18b81ae416be8a8b7f60dc7aedacc7fb87c31e72796b0b
            """)
    }

    /// PHC strings written by argon2-cffi (the reference C implementation).
    @Test("verifyPHC accepts hashes written by the reference implementation",
          arguments: [
              ("correct horse battery staple",
               "$argon2id$v=19$m=64,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Sr6N/nCmohWCvF7EZislLIdwA8ojCXux0K30ccqFS30"),
              ("pässwörd",
               "$argon2id$v=19$m=96,t=1,p=3$MDEyMzQ1Njc4OWFiY2RlZg$ESSou0zAjS8MbP9hXFvcmgAk8maCWzno"),
          ])
    func referencePHC(password: String, phc: String) throws {
        #expect(try Argon2.verifyPHC(password: password, phc: phc))
        #expect(try !Argon2.verifyPHC(password: password + "!", phc: phc))
    }
}

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}
