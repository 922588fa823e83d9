// bcrypt (Provos and Mazières, "A Future-Adaptable Password Scheme", USENIX 1999): the expensive Blowfish key
// schedule (EksBlowfishSetup) and the checksum it yields, as OpenBSD's `$2b$` computes them, and bcrypt's own base64.
//
// It lives in this module, beside Argon2, because the module is compiled with optimisation even in debug builds: the
// key schedule runs 2^cost · 2 + 1 Blowfish key expansions of 521 block encryptions each, and unoptimised Swift is
// about 10 times slower at that (measured on the project's 2-core machine, cost 10: ~0.75 s instead of ~70 ms; cost
// 12: ~3 s instead of ~0.3 s), which would make every test and `swift run gatehouse` that verifies an imported
// bcrypt hash crawl. Gatehouse only ever *verifies* bcrypt
// (imported users' hashes, replaced by Argon2id at their first login); the modular crypt forms and the policy on
// them (which variants, the highest cost) are the server's (`BcryptHash` in GatehouseServer).

/// bcrypt's key schedule and checksum, and its base64 alphabet, for verifying bcrypt hashes.
///
/// The checksum is what `$2b$` (OpenBSD since 2014), `$2y$` (crypt_blowfish, PHP), and `$2a$` as every maintained
/// implementation computes it (OpenBSD, crypt_blowfish/libxcrypt, Go's x/crypto/bcrypt, pyca/bcrypt): the key is
/// the password's bytes followed by one NUL byte, of which only the first 72 bytes are used.
public enum Bcrypt {
    /// The costs (base-2 logarithm of the number of key expansion rounds) the algorithm defines.
    public static let costRange: ClosedRange<Int> = 4...31
    /// The length of a bcrypt salt in bytes (22 characters of bcrypt's base64).
    public static let saltByteCount = 16
    /// The length of a bcrypt checksum in bytes (31 characters of bcrypt's base64): the first 23 of the 24 bytes
    /// "OrpheanBeholderScryDoubt" encrypts to.
    public static let checksumByteCount = 23
    /// How many bytes of the key (the password and its terminating NUL) bcrypt uses: the rest is ignored.
    public static let maxKeyByteCount = 72

    /// The bcrypt checksum of `password` with `salt` and `cost`: EksBlowfishSetup(cost, salt, key), then
    /// "OrpheanBeholderScryDoubt" encrypted 64 times in ECB mode, of which the first 23 bytes.
    ///
    /// The key is `password` followed by a NUL byte, cut to its first ``maxKeyByteCount`` bytes (so a password of
    /// 72 bytes or more counts by its first 72 bytes only). Bytes are used as they are: a NUL inside `password` is
    /// key material like any other byte, as in Go's and pyca's bcrypt (C implementations cannot receive one).
    ///
    /// - Precondition: `salt` has ``saltByteCount`` bytes and `cost` is in ``costRange``.
    /// - Note: The time is proportional to 2^`cost` (about 70 ms at cost 10 on one core of the
    ///   project's machine): bound
    ///   `cost` before calling with a value from storage.
    public static func checksum(password: [UInt8], salt: [UInt8], cost: Int) -> [UInt8] {
        // Never cancelled, so never nil.
        checksum(password: password, salt: salt, cost: cost, isCancelled: { false })!
    }

    /// ``checksum(password:salt:cost:)`` that asks `isCancelled` before every round of the key schedule (2^`cost` of
    /// them) and gives up, returning nil, once it answers true: a long one ends soon after its caller stops waiting.
    public static func checksum(password: [UInt8], salt: [UInt8], cost: Int, isCancelled: () -> Bool) -> [UInt8]? {
        precondition(salt.count == saltByteCount, "a bcrypt salt has 16 bytes")
        precondition(costRange.contains(cost), "bcrypt's cost is 4...31")
        var key = Array(password.prefix(maxKeyByteCount))
        if key.count < maxKeyByteCount { key.append(0) }
        // Blowfish reads the key and the salt as cyclic streams of big-endian words, from their start at every key
        // expansion: 18 words cover the P-array.
        var keyWords = cyclicWords(key, count: 18)
        let saltWords = cyclicWords(salt, count: 18)
        defer { for i in keyWords.indices { keyWords[i] = 0 } }

        let state = UnsafeMutablePointer<UInt32>.allocate(capacity: stateWordCount)
        defer {
            state.update(repeating: 0, count: stateWordCount)
            state.deallocate()
        }
        BlowfishConstants.p.withUnsafeBufferPointer { state.initialize(from: $0.baseAddress!, count: 18) }
        BlowfishConstants.s.withUnsafeBufferPointer { (state + 18).initialize(from: $0.baseAddress!, count: 1024) }

        var ciphertext: [UInt32] = [0x4F72_7068, 0x6561_6E42, 0x6568_6F6C, 0x6465_7253, 0x6372_7944, 0x6F75_6274]
        let finished = keyWords.withUnsafeBufferPointer { keyWords in
            saltWords.withUnsafeBufferPointer { saltWords in
                let key = keyWords.baseAddress!, salt = saltWords.baseAddress!
                expandState(state, key: key, salt: salt)
                for _ in 0..<(1 << cost) {
                    if isCancelled() { return false }
                    expandState(state, key: key)
                    expandState(state, key: salt)
                }
                return true
            }
        }
        guard finished else { return nil }
        for _ in 0..<64 {
            for block in 0..<3 {
                var (left, right) = (ciphertext[2 * block], ciphertext[2 * block + 1])
                encrypt(state, &left, &right)
                (ciphertext[2 * block], ciphertext[2 * block + 1]) = (left, right)
            }
        }
        var output: [UInt8] = []
        output.reserveCapacity(24)
        for word in ciphertext {
            output += [UInt8(truncatingIfNeeded: word >> 24), UInt8(truncatingIfNeeded: word >> 16),
                       UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word)]
        }
        return Array(output.prefix(checksumByteCount))
    }

    // MARK: bcrypt's base64

    /// bcrypt's base64 alphabet: `./A-Za-z0-9`, not the standard one (`A-Za-z0-9+/`).
    public static let base64Alphabet: [UInt8] = Array(
        "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8
    )

    private static let base64Values: [Int8] = {
        var values = [Int8](repeating: -1, count: 256)
        for (value, character) in base64Alphabet.enumerated() { values[Int(character)] = Int8(value) }
        return values
    }()

    /// `bytes` in bcrypt's base64, without padding: 16 bytes (a salt) give 22 characters, 23 bytes (a checksum) 31.
    public static func encodeBase64(_ bytes: [UInt8]) -> String {
        var characters: [UInt8] = []
        characters.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var group = 0
            for (offset, byte) in chunk.enumerated() { group |= Int(byte) << (16 - 8 * offset) }
            for sextet in 0...chunk.count { characters.append(base64Alphabet[(group >> (18 - 6 * sextet)) & 0x3F]) }
            index += 3
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// Decodes exactly `byteCount` bytes from `text` in bcrypt's base64 without padding; nil when `text` has another
    /// length (`(byteCount * 4 + 2) / 3` characters) or a character outside the alphabet.
    ///
    /// The last character may carry bits past the last byte: a salt's 22 characters hold 132 bits for 128 (the last
    /// character's low 4 bits are unused), a checksum's 31 hold 186 for 184 (2 bits). With `canonical` those bits must
    /// be zero, as every encoder writes them; otherwise they are ignored, as OpenBSD's and Go's decoders do.
    public static func decodeBase64(_ text: some StringProtocol, byteCount: Int, canonical: Bool) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard byteCount >= 0, characters.count == (byteCount * 4 + 2) / 3 else { return nil }
        var bits = 0
        var bitCount = 0
        var bytes: [UInt8] = []
        bytes.reserveCapacity(byteCount)
        for character in characters {
            let value = base64Values[Int(character)]
            guard value >= 0 else { return nil }
            bits = (bits << 6) | Int(value)
            bitCount += 6
            if bitCount >= 8, bytes.count < byteCount {
                bitCount -= 8
                bytes.append(UInt8(truncatingIfNeeded: bits >> bitCount))
                bits &= (1 << bitCount) - 1
            }
        }
        if canonical, bits != 0 { return nil }
        return bytes
    }

    /// Whether `a` and `b` are equal, in time that depends on their lengths only.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    // MARK: Blowfish

    /// The P-array (18 words) followed by the four S-boxes (256 words each), in one allocation.
    private static let stateWordCount = 18 + 4 * 256

    /// The first `count` words of `bytes` read as a cyclic stream of big-endian 32-bit words (Blowfish's
    /// `stream2word`).
    private static func cyclicWords(_ bytes: [UInt8], count: Int) -> [UInt32] {
        var position = 0
        return (0..<count).map { _ in
            var word: UInt32 = 0
            for _ in 0..<4 {
                word = (word << 8) | UInt32(bytes[position])
                position = (position + 1) % bytes.count
            }
            return word
        }
    }

    /// Blowfish's F: the four S-boxes indexed by the bytes of `x`.
    @inline(__always)
    private static func f(_ s: UnsafeMutablePointer<UInt32>, _ x: UInt32) -> UInt32 {
        let a = s[Int(truncatingIfNeeded: x >> 24)]
        let b = s[256 + Int(truncatingIfNeeded: (x >> 16) & 0xFF)]
        let c = s[512 + Int(truncatingIfNeeded: (x >> 8) & 0xFF)]
        let d = s[768 + Int(truncatingIfNeeded: x & 0xFF)]
        return ((a &+ b) ^ c) &+ d
    }

    /// Encrypts the block (`left`, `right`) with the P-array and S-boxes in `state`: 16 Feistel rounds.
    @inline(__always)
    private static func encrypt(_ state: UnsafeMutablePointer<UInt32>, _ left: inout UInt32, _ right: inout UInt32) {
        let p = state, s = state + 18
        var l = left ^ p[0]
        var r = right
        var round = 1
        while round < 17 {
            r ^= f(s, l) ^ p[round]
            l ^= f(s, r) ^ p[round + 1]
            round += 2
        }
        left = r ^ p[17]
        right = l
    }

    /// Blowfish's key expansion with a salt (`Blowfish_expandstate`): the P-array XORed with the key's words, then
    /// every word of P and S replaced in turn by encryptions of the previous block XORed with the salt's stream.
    private static func expandState(
        _ state: UnsafeMutablePointer<UInt32>, key: UnsafePointer<UInt32>, salt: UnsafePointer<UInt32>
    ) {
        for i in 0..<18 { state[i] ^= key[i] }
        var (left, right): (UInt32, UInt32) = (0, 0)
        var i = 0
        while i < stateWordCount {
            // The salt stream (4 words) continues from P into the S-boxes.
            left ^= salt[i & 3]
            right ^= salt[(i + 1) & 3]
            encrypt(state, &left, &right)
            state[i] = left
            state[i + 1] = right
            i += 2
        }
    }

    /// Blowfish's key expansion without a salt (`Blowfish_expand0state`), with `key` the P-array's 18 words of key
    /// stream: the bcrypt cost loop alternates the password and the salt as key.
    private static func expandState(_ state: UnsafeMutablePointer<UInt32>, key: UnsafePointer<UInt32>) {
        for i in 0..<18 { state[i] ^= key[i] }
        var (left, right): (UInt32, UInt32) = (0, 0)
        var i = 0
        while i < stateWordCount {
            encrypt(state, &left, &right)
            state[i] = left
            state[i + 1] = right
            i += 2
        }
    }
}

extension Bcrypt {
    /// One Blowfish encryption of the block (`left`, `right`) under `key` (1 to 56 bytes) with the standard key
    /// schedule: only for checking the cipher and its constants against published test vectors (Schneier's).
    public static func blowfishEncrypt(key: [UInt8], left: UInt32, right: UInt32) -> (UInt32, UInt32) {
        precondition((1...56).contains(key.count), "a Blowfish key has 1 to 56 bytes")
        let state = UnsafeMutablePointer<UInt32>.allocate(capacity: stateWordCount)
        defer { state.deallocate() }
        BlowfishConstants.p.withUnsafeBufferPointer { state.initialize(from: $0.baseAddress!, count: 18) }
        BlowfishConstants.s.withUnsafeBufferPointer { (state + 18).initialize(from: $0.baseAddress!, count: 1024) }
        cyclicWords(key, count: 18).withUnsafeBufferPointer { expandState(state, key: $0.baseAddress!) }
        var (l, r) = (left, right)
        encrypt(state, &l, &r)
        return (l, r)
    }
}
