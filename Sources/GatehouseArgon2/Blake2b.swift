// BLAKE2b (RFC 7693) in pure Swift: the hash Argon2 builds on.

/// BLAKE2b, the cryptographic hash of RFC 7693, with optional keying (MAC mode).
///
/// Used by Argon2 for its initial hash H0 and its variable-length hash H'; exposed
/// because it is handy on its own (e.g. hashing tokens) and so it can be tested
/// against the RFC's vectors.
public enum Blake2b {
    /// The BLAKE2b digest of `input`.
    ///
    /// - Parameters:
    ///   - input: The message.
    ///   - outputLength: Digest length in bytes, 1...64 (default 64, i.e. BLAKE2b-512).
    ///   - key: Optional key of 0...64 bytes; a non-empty key makes this a MAC.
    /// - Returns: `outputLength` bytes.
    /// - Precondition: `outputLength` is in 1...64 and `key.count` is at most 64.
    public static func hash(_ input: [UInt8], outputLength: Int = 64, key: [UInt8] = []) -> [UInt8] {
        precondition((1...64).contains(outputLength), "BLAKE2b output length must be 1...64 bytes")
        precondition(key.count <= 64, "BLAKE2b key must be at most 64 bytes")
        var hasher = Blake2bHasher(outputLength: outputLength, key: key)
        hasher.update(input)
        return hasher.finalize()
    }
}

/// Incremental BLAKE2b state (RFC 7693 §3.3), fed with `update` and closed with `finalize`.
struct Blake2bHasher {
    private var h0, h1, h2, h3, h4, h5, h6, h7: UInt64
    /// Bytes compressed so far (the 128-bit counter t; the high word never moves in practice, but is kept).
    private var countLow: UInt64 = 0
    private var countHigh: UInt64 = 0
    /// Pending input, at most one block; the last block must be held back for finalization.
    private var buffer: [UInt8]
    private let outputLength: Int

    /// A hasher for a digest of `outputLength` (1...64) bytes, keyed when `key` (0...64 bytes) is not empty.
    init(outputLength: Int, key: [UInt8] = []) {
        precondition((1...64).contains(outputLength) && key.count <= 64)
        self.outputLength = outputLength
        h0 = blake2bIV0 ^ (0x0101_0000 | UInt64(key.count) << 8 | UInt64(outputLength))
        h1 = blake2bIV1
        h2 = blake2bIV2
        h3 = blake2bIV3
        h4 = blake2bIV4
        h5 = blake2bIV5
        h6 = blake2bIV6
        h7 = blake2bIV7
        buffer = []
        buffer.reserveCapacity(128)
        if !key.isEmpty {
            buffer.append(contentsOf: key)
            buffer.append(contentsOf: repeatElement(0, count: 128 - key.count))
        }
    }

    /// Appends a 32-bit little-endian integer (Argon2's LE32).
    mutating func update(le32 value: UInt32) {
        update([UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8),
                UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 24)])
    }

    /// Appends `bytes` to the message.
    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Appends `bytes` to the message.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        let total = bytes.count
        guard total > 0 else { return }
        // Top up a partial buffer first; a full buffer is only compressed once more input follows.
        if !buffer.isEmpty {
            if buffer.count == 128 {
                compressBuffer()
            }
            let take = min(128 - buffer.count, total)
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<take]))
            offset = take
            if offset == total { return }
            compressBuffer()
        }
        // Whole blocks straight from the input, keeping the last (possibly full) block back.
        while total - offset > 128 {
            increment(by: 128)
            compress(bytes.baseAddress! + offset, last: false)
            offset += 128
        }
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset..<total]))
    }

    /// Finishes the message and returns the digest.
    mutating func finalize() -> [UInt8] {
        let pending = buffer.count
        increment(by: UInt64(pending))
        buffer.append(contentsOf: repeatElement(0, count: 128 - pending))
        buffer.withUnsafeBytes { compress($0.baseAddress!, last: true) }
        buffer.removeAll(keepingCapacity: true)
        let words = [h0, h1, h2, h3, h4, h5, h6, h7]
        var out = [UInt8](repeating: 0, count: outputLength)
        for i in 0..<outputLength {
            out[i] = UInt8(truncatingIfNeeded: words[i >> 3] >> (UInt64(i & 7) << 3))
        }
        return out
    }

    private mutating func compressBuffer() {
        increment(by: 128)
        buffer.withUnsafeBytes { compress($0.baseAddress!, last: false) }
        buffer.removeAll(keepingCapacity: true)
    }

    @inline(__always)
    private mutating func increment(by n: UInt64) {
        let (sum, overflow) = countLow.addingReportingOverflow(n)
        countLow = sum
        if overflow { countHigh &+= 1 }
    }

    /// The compression function F (RFC 7693 §3.2) on the 128-byte block at `block`.
    private mutating func compress(_ block: UnsafeRawPointer, last: Bool) {
        @inline(__always) func word(_ i: Int) -> UInt64 {
            UInt64(littleEndian: block.loadUnaligned(fromByteOffset: i << 3, as: UInt64.self))
        }
        let m: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7),
             word(8), word(9), word(10), word(11), word(12), word(13), word(14), word(15))
        var v0 = h0, v1 = h1, v2 = h2, v3 = h3, v4 = h4, v5 = h5, v6 = h6, v7 = h7
        var v8 = blake2bIV0, v9 = blake2bIV1, v10 = blake2bIV2, v11 = blake2bIV3
        var v12 = blake2bIV4 ^ countLow, v13 = blake2bIV5 ^ countHigh
        var v14 = last ? ~blake2bIV6 : blake2bIV6, v15 = blake2bIV7

        withUnsafeBytes(of: m) { raw in
            let msg = raw.assumingMemoryBound(to: UInt64.self)
            blake2bSigma.withUnsafeBufferPointer { sigma in
                for round in 0..<12 {
                    let s = (round % 10) << 4
                    @inline(__always) func x(_ i: Int) -> UInt64 { msg[Int(sigma[s + i])] }
                    blake2bG(&v0, &v4, &v8, &v12, x(0), x(1))
                    blake2bG(&v1, &v5, &v9, &v13, x(2), x(3))
                    blake2bG(&v2, &v6, &v10, &v14, x(4), x(5))
                    blake2bG(&v3, &v7, &v11, &v15, x(6), x(7))
                    blake2bG(&v0, &v5, &v10, &v15, x(8), x(9))
                    blake2bG(&v1, &v6, &v11, &v12, x(10), x(11))
                    blake2bG(&v2, &v7, &v8, &v13, x(12), x(13))
                    blake2bG(&v3, &v4, &v9, &v14, x(14), x(15))
                }
            }
        }
        h0 ^= v0 ^ v8; h1 ^= v1 ^ v9; h2 ^= v2 ^ v10; h3 ^= v3 ^ v11
        h4 ^= v4 ^ v12; h5 ^= v5 ^ v13; h6 ^= v6 ^ v14; h7 ^= v7 ^ v15
    }
}

/// The mixing function G of RFC 7693 §3.1.
@inline(__always)
private func blake2bG(_ a: inout UInt64, _ b: inout UInt64, _ c: inout UInt64, _ d: inout UInt64,
                      _ x: UInt64, _ y: UInt64) {
    a = a &+ b &+ x
    d = rotateRight(d ^ a, 32)
    c = c &+ d
    b = rotateRight(b ^ c, 24)
    a = a &+ b &+ y
    d = rotateRight(d ^ a, 16)
    c = c &+ d
    b = rotateRight(b ^ c, 63)
}

/// `x` rotated right by `n` bits (0 < n < 64); compiles to a single rotate instruction.
@inline(__always)
func rotateRight(_ x: UInt64, _ n: UInt64) -> UInt64 {
    (x &>> n) | (x &<< (64 &- n))
}

// RFC 7693 §2.6: the SHA-512 initial hash values.
private let blake2bIV0: UInt64 = 0x6A09_E667_F3BC_C908
private let blake2bIV1: UInt64 = 0xBB67_AE85_84CA_A73B
private let blake2bIV2: UInt64 = 0x3C6E_F372_FE94_F82B
private let blake2bIV3: UInt64 = 0xA54F_F53A_5F1D_36F1
private let blake2bIV4: UInt64 = 0x510E_527F_ADE6_82D1
private let blake2bIV5: UInt64 = 0x9B05_688C_2B3E_6C1F
private let blake2bIV6: UInt64 = 0x1F83_D9AB_FB41_BD6B
private let blake2bIV7: UInt64 = 0x5BE0_CD19_137E_2179

/// RFC 7693 §2.7: message word schedule SIGMA, ten rows of sixteen, flattened.
private let blake2bSigma: [UInt8] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3,
    11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4,
    7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8,
    9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13,
    2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9,
    12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11,
    13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10,
    6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5,
    10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0,
]
