@testable import GatehouseArgon2
import Testing

/// bcrypt's engine against published values: pi's digits (the generated constants), Schneier's Blowfish vectors and
/// the bcrypt vectors of OpenBSD's and jBCrypt's test suites. The differential tests against pyca/bcrypt, libxcrypt
/// and passlib are GatehouseServerTests' BcryptTests.
@Suite("bcrypt engine")
struct BcryptEngineTests {
    @Test("The generated constants are pi's hexadecimal fraction: P-array, then the S-boxes")
    func constantsArePi() {
        #expect(BlowfishConstants.p.count == 18)
        #expect(BlowfishConstants.s.count == 4 * 256)
        #expect(Array(BlowfishConstants.p.prefix(4)) == [0x243F_6A88, 0x85A3_08D3, 0x1319_8A2E, 0x0370_7344])
        #expect(BlowfishConstants.p[17] == 0x8979_FB1B)
        #expect(BlowfishConstants.s[0] == 0xD131_0BA6)  // S-box 0, word 0: pi's 19th word
        #expect(BlowfishConstants.s[256] == 0x4B7A_70E9)  // S-box 1, word 0
        #expect(BlowfishConstants.s[1023] == 0x3AC3_72E6)  // S-box 3, word 255: the 1042nd word
    }

    /// Schneier's test vectors (https://www.schneier.com/wp-content/uploads/2015/12/vectors-2.txt): key, plaintext,
    /// ciphertext, each 64 bits.
    @Test("Blowfish: Schneier's ECB test vectors", arguments: [
        (0x0000_0000_0000_0000, 0x0000_0000_0000_0000, 0x4EF9_9745_6198_DD78),
        (0xFFFF_FFFF_FFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFF, 0x5186_6FD5_B85E_CB8A),
        (0x3000_0000_0000_0000, 0x1000_0000_0000_0001, 0x7D85_6F9A_6130_63F2),
        (0x0123_4567_89AB_CDEF, 0x1111_1111_1111_1111, 0x61F9_C380_2281_B096),
        (0xFEDC_BA98_7654_3210, 0x0123_4567_89AB_CDEF, 0x0ACE_AB0F_C6A0_A28D),
    ] as [(UInt64, UInt64, UInt64)])
    func blowfishVectors(key: UInt64, plaintext: UInt64, ciphertext: UInt64) {
        let keyBytes = (0..<8).map { UInt8(truncatingIfNeeded: key >> (56 - 8 * $0)) }
        let (left, right) = Bcrypt.blowfishEncrypt(
            key: keyBytes, left: UInt32(truncatingIfNeeded: plaintext >> 32), right: UInt32(truncatingIfNeeded: plaintext)
        )
        #expect(UInt64(left) << 32 | UInt64(right) == ciphertext)
    }

    /// From OpenBSD's regress/lib/libc and jBCrypt's TestBCrypt (also checked against pyca/bcrypt).
    @Test("bcrypt: published vectors", arguments: [
        ("", "DCq7YPn5Rq63x1Lad4cll.", "TV4S6ytwfsfvkgY8jIucDrjc8deX1s."),
        ("a", "m0CrhHm10qJ3lXRY.5zDGO", "3rS2KdeeWLuGmsfGlMfOxih58VYVfxe"),
        ("abc", "If6bvum7DFjUnE9p2uDeDu", "0YHzrHM6tf.iqN8.yx.jNN1ILEf7h0i"),
        ("abcdefghijklmnopqrstuvwxyz", ".rCVZVOThsIa97pEDOxvGu", "RRgzG64bvtJ0938xuqzv18d3ZpQhstC"),
        ("~!@#$%^&*()      ~!@#$%^&*()PNBFRD", "fPIsBO8qRqkjj273rfaOI.", "HtSV9jLDpTbZn782DC6/t7qT67P6FfO"),
    ])
    func bcryptVectors(password: String, salt: String, checksum: String) throws {
        let saltBytes = try #require(Bcrypt.decodeBase64(salt, byteCount: 16, canonical: true))
        let computed = Bcrypt.checksum(password: Array(password.utf8), salt: saltBytes, cost: 6)
        #expect(Bcrypt.encodeBase64(computed) == checksum)
        #expect(Bcrypt.encodeBase64(saltBytes) == salt)
    }

    @Test("bcrypt's base64: lengths, alphabet, unused bits")
    func base64() {
        let bytes: [UInt8] = (0..<23).map { UInt8($0 * 11) }
        let text = Bcrypt.encodeBase64(bytes)
        #expect(text.count == 31)
        #expect(Bcrypt.decodeBase64(text, byteCount: 23, canonical: true) == bytes)
        #expect(Bcrypt.decodeBase64(text, byteCount: 22, canonical: false) == nil)  // 31 characters are 23 bytes
        #expect(Bcrypt.decodeBase64(String(text.dropLast()), byteCount: 23, canonical: false) == nil)
        #expect(Bcrypt.decodeBase64(String(text.dropLast()) + "+", byteCount: 23, canonical: false) == nil)
        #expect(Bcrypt.decodeBase64(String(text.dropLast()) + "=", byteCount: 23, canonical: false) == nil)
        #expect(Bcrypt.encodeBase64([0, 0, 0]) == "....")
        #expect(Bcrypt.encodeBase64([0xFF, 0xFF, 0xFF]) == "9999")
        // A salt's last character uses 2 of its 6 bits: "." is 0, "/" sets an unused bit.
        let salt = "DCq7YPn5Rq63x1Lad4cll."
        let edited = String(salt.dropLast()) + "/"
        #expect(Bcrypt.decodeBase64(edited, byteCount: 16, canonical: true) == nil)
        let decoded = Bcrypt.decodeBase64(salt, byteCount: 16, canonical: true)
        #expect(decoded != nil && Bcrypt.decodeBase64(edited, byteCount: 16, canonical: false) == decoded)
    }

    @Test("bcrypt uses the first 72 bytes of password + NUL")
    func keyTruncation() {
        let salt = [UInt8](repeating: 0x5A, count: 16)
        let seventyTwo = [UInt8](repeating: UInt8(ascii: "x"), count: 72)
        let base = Bcrypt.checksum(password: seventyTwo, salt: salt, cost: 4)
        #expect(Bcrypt.checksum(password: seventyTwo + [UInt8(ascii: "y")], salt: salt, cost: 4) == base)
        #expect(Bcrypt.checksum(password: Array(seventyTwo.dropLast()), salt: salt, cost: 4) != base)
        // 71 bytes + NUL is a 72-byte key too, different from 72 bytes.
        #expect(Bcrypt.checksum(password: Array(seventyTwo.dropLast()) + [0], salt: salt, cost: 4) != base)
        #expect(Bcrypt.checksum(password: Array(seventyTwo.dropLast()) + [0], salt: salt, cost: 4)
            == Bcrypt.checksum(password: Array(seventyTwo.dropLast()), salt: salt, cost: 4))
    }
}
