import Crypto
import Foundation
import GatehouseDomain
import Testing

@Suite struct SecretsTests {
    /// FIPS 180-2's examples of SHA-256 (appendix B), and a string that is not ASCII.
    @Test(arguments: [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func sha256IsTheStandardDigestOfTheUTF8(text: String, digest: String) {
        #expect(Secrets.hex(Secrets.sha256(text)) == digest)
    }

    @Test func sha256HashesTheTextsOwnBytesWhateverItsStorage() {
        let text = "Zoë 🙂 " + String(repeating: "x", count: 300)
        let small = "abc"  // stored in the string itself, not in a buffer
        #expect(Secrets.sha256(small) == Array(SHA256.hash(data: Data(small.utf8))))
        for form in [text, String(text.dropFirst(0)), String(decoding: Array(text.utf8), as: UTF8.self), (text as NSString) as String] {
            #expect(Secrets.sha256(form) == Array(SHA256.hash(data: Data(text.utf8))))
        }
    }

    @Test func hexWritesEveryByteAsTwoLowercaseDigits() {
        let bytes = (0...255).map(UInt8.init)
        #expect(Secrets.hex(bytes) == bytes.map { String(format: "%02x", $0) }.joined())
        #expect(Secrets.hex([]) == "")
    }

    /// Rate-limit counters are kept under a hash of the identifier, the same whatever its case.
    @Test(arguments: ["Zoe@Example.COM", "ÉLODIE@exemple.fr", "5f3a9c0e1b2d4e6f7a8b9c0d", "İstanbul", "plain"])
    func aLimitsIdentifierIsHashedCaseBlind(identifier: String) {
        let expected = Array(SHA256.hash(data: Data(("gatehouse-limit:" + identifier.lowercased()).utf8))).prefix(16)
            .map { String(format: "%02x", $0) }.joined()
        #expect(AuthEnvironment.hashedIdentifier(identifier) == expected)
        #expect(AuthEnvironment.hashedIdentifier(identifier.lowercased()) == expected)
        // Capitals take the lowercasing path, lowercase text the one without: both give the same counter.
        #expect(AuthEnvironment.hashedIdentifier(identifier.uppercased()) == AuthEnvironment.hashedIdentifier(identifier.uppercased().lowercased()))
    }
}
