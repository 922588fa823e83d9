// Argon2 (RFC 9106) in pure Swift: Argon2id version 0x13 for new hashes; Argon2d, Argon2i, Argon2id and
// versions 0x10 and 0x13 for verifying hashes imported from other systems.

/// An Argon2 variant (RFC 9106 §3.4): how a block's reference block is chosen.
///
/// New Gatehouse hashes are always ``id``; ``d`` and ``i`` exist to verify hashes imported from other systems.
public enum Argon2Variant: Sendable, Hashable, CaseIterable {
    /// Argon2d (type 0): data-dependent addressing throughout.
    case d
    /// Argon2i (type 1): data-independent addressing throughout.
    case i
    /// Argon2id (type 2): data-independent addressing in the first half of the first pass, data-dependent after.
    case id

    /// The type identifier y hashed into H0: 0, 1 or 2.
    public var typeID: UInt32 {
        switch self {
        case .d: 0
        case .i: 1
        case .id: 2
        }
    }

    /// The identifier in PHC strings: `argon2d`, `argon2i` or `argon2id`.
    public var phcIdentifier: String {
        switch self {
        case .d: "argon2d"
        case .i: "argon2i"
        case .id: "argon2id"
        }
    }
}

/// An Argon2 version: 1.0 (0x10) or 1.3 (0x13, the one RFC 9106 specifies).
///
/// They differ in one point: from the second pass on, version 1.3 XORs each new block into the block it
/// overwrites, version 1.0 replaces it. New Gatehouse hashes are always ``v13``.
public enum Argon2Version: UInt32, Sendable, Hashable, CaseIterable {
    /// Version 1.0 (0x10): written `v=16` in PHC strings, or with no `v=` field at all.
    case v10 = 0x10
    /// Version 1.3 (0x13): written `v=19` in PHC strings.
    case v13 = 0x13
}

/// Cost parameters of an Argon2 hash (new hashes are Argon2id, see ``Argon2Variant``).
///
/// The combination recommended by OWASP for password storage is
/// `Argon2Parameters(memoryKiB: 19456, iterations: 2, parallelism: 1)`.
/// Parameters are checked when hashing (see ``validate()``), not at construction.
public struct Argon2Parameters: Sendable, Hashable {
    /// Memory size m in KiB (one Argon2 block is 1 KiB); at least `8 * parallelism`.
    /// The block count actually used is rounded down to a multiple of `4 * parallelism`, as in RFC 9106.
    public var memoryKiB: UInt32
    /// Number of passes t over memory; at least 1.
    public var iterations: UInt32
    /// Degree of parallelism p (number of lanes); 1...16,777,215.
    /// Lanes are computed one after another on the calling thread; p still changes the result.
    public var parallelism: UInt32
    /// Tag length T in bytes; at least 4 (default 32).
    public var hashLength: Int

    /// Parameters for a hash; see the properties for the allowed ranges.
    public init(memoryKiB: UInt32, iterations: UInt32, parallelism: UInt32, hashLength: Int = 32) {
        self.memoryKiB = memoryKiB
        self.iterations = iterations
        self.parallelism = parallelism
        self.hashLength = hashLength
    }

    /// Whether these parameters are acceptable to Argon2 (see ``validate()``).
    public var isValid: Bool {
        parallelism >= 1 && parallelism <= 0xFF_FFFF
            && UInt64(memoryKiB) >= 8 * UInt64(parallelism)
            && iterations >= 1
            && hashLength >= 4 && UInt64(hashLength) <= UInt64(UInt32.max)
    }

    /// The work of a hash with these parameters, in blocks computed: memory (KiB, one block each) × passes. Lanes
    /// do not change it (they run one after another), so it is what one hash or verification costs in CPU.
    public var work: UInt64 { UInt64(memoryKiB) * UInt64(iterations) }

    /// Throws ``Argon2Error/invalidParameters`` unless parallelism is in 1...2^24-1,
    /// memoryKiB ≥ 8 × parallelism, iterations ≥ 1 and hashLength is in 4...2^32-1.
    public func validate() throws {
        guard isValid else { throw Argon2Error.invalidParameters }
    }
}

/// An error from ``Argon2``: invalid parameters or inputs, a PHC string that cannot be parsed, or one whose
/// cost is above the limits of ``Argon2/verifyAnyPHC(password:phc:maxMemoryKiB:maxWork:isCancelled:)``.
public struct Argon2Error: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case invalidParameters
        case malformedHash(String)
        case costLimitExceeded(String)
    }

    private let kind: Kind

    private init(_ kind: Kind) {
        self.kind = kind
    }

    /// The parameters or inputs are outside what Argon2 accepts: parallelism 1...2^24-1,
    /// memoryKiB ≥ 8 × parallelism, iterations ≥ 1, hashLength 4...2^32-1, a salt of at least
    /// 8 bytes, and password, salt, secret and associated data each shorter than 2^32 bytes.
    public static let invalidParameters = Argon2Error(.invalidParameters)

    /// A PHC string could not be parsed, or names a variant, version or parameters this
    /// implementation does not handle; `reason` says what is wrong (it never contains the hash).
    public static func malformedHash(_ reason: String) -> Argon2Error {
        Argon2Error(.malformedHash(reason))
    }

    /// A well-formed PHC string asks for more memory or passes than the verifier allows; `reason` says which
    /// (it never contains the hash). Thrown before any memory is allocated.
    public static func costLimitExceeded(_ reason: String) -> Argon2Error {
        Argon2Error(.costLimitExceeded(reason))
    }

    /// Whether this is a ``costLimitExceeded(_:)`` error, whatever its reason.
    public var isCostLimitExceeded: Bool {
        if case .costLimitExceeded = kind { return true }
        return false
    }

    /// Whether this is a ``malformedHash(_:)`` error, whatever its reason.
    public var isMalformedHash: Bool {
        if case .malformedHash = kind { return true }
        return false
    }

    /// A human-readable description of the error.
    public var description: String {
        switch kind {
        case .invalidParameters:
            return "invalid Argon2 parameters: need parallelism 1...16777215, memoryKiB ≥ 8 × parallelism, "
                + "iterations ≥ 1, hashLength 4...4294967295, salt ≥ 8 bytes, inputs < 4 GiB"
        case .malformedHash(let reason):
            return "malformed Argon2 PHC string: \(reason)"
        case .costLimitExceeded(let reason):
            return "Argon2 hash too costly to verify: \(reason)"
        }
    }
}

/// Argon2id password hashing (RFC 9106, version 0x13 = 19), in pure Swift.
///
/// ``hash(password:salt:parameters:secret:associatedData:)`` computes a raw tag;
/// ``hashPHC(password:parameters:)`` and ``verifyPHC(password:phc:)`` store and check passwords
/// in the PHC string format used by the reference implementation and most libraries,
/// e.g. `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<tag>`.
///
/// For hashes imported from other systems, ``verifyAnyPHC(password:phc:maxMemoryKiB:maxWork:isCancelled:)`` and
/// ``parseAnyPHC(_:)`` also take Argon2d and Argon2i and version 1.0 (0x10), and
/// ``hash(password:salt:parameters:variant:version:secret:associatedData:)`` computes their raw tags.
/// New hashes are always Argon2id version 0x13.
///
/// Hashing is CPU- and memory-bound and runs on the calling thread (call it off any event loop).
/// Each call needs `memoryKiB` KiB; the last matrix used is kept, wiped, for the next call of the
/// same size, so that size stays allocated between hashes. The tag is bit-for-bit that of the
/// reference implementation (RFC 9106 test vectors and differential tests against argon2-cffi).
public enum Argon2 {
    /// Gives back the block matrix kept between hashes (m KiB, see ``Argon2Parameters/memoryKiB``) when no hash
    /// has started or finished since the previous call, or at once with `force`. A server calls it now and then,
    /// so that memory kept for a busy period returns to the system once hashing pauses. True when memory was freed.
    @discardableResult
    public static func releaseIdleMemory(force: Bool = false) -> Bool {
        MatrixMemory.trim(force: force)
    }

    /// The Argon2 version of new hashes (0x13, written `v=19` in PHC strings); see ``Argon2Version``.
    public static let version: UInt32 = 0x13

    /// The raw Argon2id tag of `password`.
    ///
    /// - Parameters:
    ///   - password: The password P (any bytes, possibly empty).
    ///   - salt: The salt S, at least 8 bytes (16 random bytes recommended).
    ///   - parameters: Memory, passes, lanes and tag length.
    ///   - secret: Optional secret K ("pepper"), empty by default.
    ///   - associatedData: Optional associated data X, empty by default.
    /// - Returns: `parameters.hashLength` bytes.
    /// - Throws: ``Argon2Error/invalidParameters`` when the parameters or input lengths are out of range.
    public static func hash(
        password: [UInt8],
        salt: [UInt8],
        parameters: Argon2Parameters,
        secret: [UInt8] = [],
        associatedData: [UInt8] = []
    ) throws -> [UInt8] {
        try hash(
            password: password, salt: salt, parameters: parameters, variant: .id, version: .v13,
            secret: secret, associatedData: associatedData
        )
    }

    /// The raw tag of `password` with any Argon2 variant and version, to verify a hash imported from another
    /// system that stores the tag and its parameters apart (new hashes should use Argon2id version 0x13).
    ///
    /// The memory and passes come from the caller: check them against a limit first when they come from
    /// imported data (``verifyAnyPHC(password:phc:maxMemoryKiB:maxWork:isCancelled:)`` does that for PHC strings).
    ///
    /// - Parameters:
    ///   - password: The password P (any bytes, possibly empty).
    ///   - salt: The salt S, at least 8 bytes.
    ///   - parameters: Memory, passes, lanes and tag length.
    ///   - variant: Argon2d, Argon2i or Argon2id.
    ///   - version: Version 1.0 (0x10) or 1.3 (0x13).
    ///   - secret: Optional secret K ("pepper"), empty by default.
    ///   - associatedData: Optional associated data X, empty by default.
    ///   - isCancelled: Asked before every segment (four times a pass per lane): once it answers true the hash stops
    ///     and throws `CancellationError`, so that a long hash ends soon after its caller gives up.
    /// - Returns: `parameters.hashLength` bytes.
    /// - Throws: ``Argon2Error/invalidParameters`` when the parameters or input lengths are out of range;
    ///   `CancellationError` when `isCancelled` answered true.
    public static func hash(
        password: [UInt8],
        salt: [UInt8],
        parameters: Argon2Parameters,
        variant: Argon2Variant,
        version: Argon2Version,
        secret: [UInt8] = [],
        associatedData: [UInt8] = [],
        isCancelled: () -> Bool = { false }
    ) throws -> [UInt8] {
        try parameters.validate()
        let limit = Int(UInt32.max)
        guard salt.count >= 8, salt.count <= limit, password.count <= limit,
              secret.count <= limit, associatedData.count <= limit
        else { throw Argon2Error.invalidParameters }
        return try Argon2Engine.compute(
            password: password, salt: salt, secret: secret, associatedData: associatedData,
            parameters: parameters, variant: variant, version: version, isCancelled: isCancelled
        )
    }
}

// MARK: - The algorithm

/// RFC 9106 §3: the Argon2 computation proper. Inputs are assumed validated.
enum Argon2Engine {
    /// Words (UInt64) per 1 KiB block.
    static let blockWords = 128
    /// Slices per pass (sync points).
    static let syncPoints = 4

    static func compute(
        password: [UInt8], salt: [UInt8], secret: [UInt8], associatedData: [UInt8],
        parameters: Argon2Parameters, variant: Argon2Variant, version: Argon2Version, isCancelled: () -> Bool = { false }
    ) throws -> [UInt8] {
        let lanes = Int(parameters.parallelism)
        let tagLength = parameters.hashLength

        // H0 (RFC 9106 §3.2 step 1).
        var h = Blake2bHasher(outputLength: 64)
        h.update(le32: parameters.parallelism)
        h.update(le32: UInt32(tagLength))
        h.update(le32: parameters.memoryKiB)
        h.update(le32: parameters.iterations)
        h.update(le32: version.rawValue)
        h.update(le32: variant.typeID)
        for field in [password, salt, secret, associatedData] {
            h.update(le32: UInt32(field.count))
            h.update(field)
        }
        var h0 = h.finalize()
        defer { wipe(&h0) }

        // m' = 4p * floor(m / 4p) blocks in p lanes of q = m'/p columns, four segments per lane.
        let segmentLength = Int(parameters.memoryKiB) / (syncPoints * lanes)
        let laneLength = segmentLength * syncPoints
        let blockCount = laneLength * lanes
        let passes = Int(parameters.iterations)

        let memoryBytes = MatrixMemory.allocate(byteCount: blockCount * blockWords * 8)
        let memory = memoryBytes.bindMemory(to: UInt64.self, capacity: blockCount * blockWords)
        defer { MatrixMemory.release(memoryBytes, byteCount: blockCount * blockWords * 8) }

        // B[i][0] = H'^1024(H0 || LE32(0) || LE32(i)), B[i][1] = H'^1024(H0 || LE32(1) || LE32(i)).
        for lane in 0..<lanes {
            for column in 0..<2 {
                var seed = h0
                appendLE32(UInt32(column), to: &seed)
                appendLE32(UInt32(lane), to: &seed)
                var bytes = blake2bLong(seed, outputLength: 1024)
                let block = memory + (lane * laneLength + column) * blockWords
                bytes.withUnsafeBytes { raw in
                    for i in 0..<blockWords {
                        block[i] = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i << 3, as: UInt64.self))
                    }
                }
                wipe(&seed)
                wipe(&bytes)
            }
        }

        // Scratch: the permutation buffer R, a zero block, the address-generator input and its output.
        let scratchWords = 4 * blockWords
        let scratchBytes = UnsafeMutableRawPointer.allocate(byteCount: scratchWords * 8, alignment: 64)
        let scratch = scratchBytes.initializeMemory(as: UInt64.self, repeating: 0, count: scratchWords)
        defer { scratchBytes.deallocate() }

        let filler = SegmentFiller(
            memory: memory, lanes: lanes, laneLength: laneLength, segmentLength: segmentLength,
            passes: passes, blockCount: blockCount,
            variant: variant, xorLaterPasses: version == .v13,
            r: scratch, zero: scratch + blockWords, input: scratch + 2 * blockWords,
            address: scratch + 3 * blockWords
        )
        // Slice by slice, every lane's segment: within a slice, a lane only references its own
        // segment and other lanes' finished slices, so computing lanes in turn equals running them in parallel.
        for pass in 0..<passes {
            for slice in 0..<syncPoints {
                for lane in 0..<lanes {
                    // The matrix is wiped and kept by the deferred release above, as at the end of a hash.
                    if isCancelled() { throw CancellationError() }
                    filler.fillSegment(pass: pass, lane: lane, slice: slice)
                }
            }
        }

        // C = XOR of the last block of every lane; tag = H'^T(C).
        let finalBlock = scratch  // reuse R
        let lastColumn = laneLength - 1
        finalBlock.update(from: memory + lastColumn * blockWords, count: blockWords)
        for lane in 1..<max(lanes, 1) {
            let block = memory + (lane * laneLength + lastColumn) * blockWords
            for i in 0..<blockWords { finalBlock[i] ^= block[i] }
        }
        var finalBytes = [UInt8](repeating: 0, count: 1024)
        for i in 0..<1024 {
            finalBytes[i] = UInt8(truncatingIfNeeded: finalBlock[i >> 3] >> (UInt64(i & 7) << 3))
        }
        scratch.update(repeating: 0, count: scratchWords)
        defer { wipe(&finalBytes) }
        return blake2bLong(finalBytes, outputLength: tagLength)
    }

    /// Zeroes password-derived bytes before the array is freed (best effort: Swift may have
    /// copied them, but this is the storage Argon2 itself used).
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { MatrixMemory.wipe(base, byteCount: raw.count) }
        }
    }

    /// The variable-length hash H'^T(A) of RFC 9106 §3.3.
    static func blake2bLong(_ input: [UInt8], outputLength: Int) -> [UInt8] {
        var hasher = Blake2bHasher(outputLength: min(outputLength, 64))
        hasher.update(le32: UInt32(truncatingIfNeeded: outputLength))
        hasher.update(input)
        var v = hasher.finalize()
        if outputLength <= 64 { return v }
        var out = [UInt8]()
        out.reserveCapacity(outputLength)
        out.append(contentsOf: v[0..<32])
        var remaining = outputLength - 32
        while remaining > 64 {
            v = Blake2b.hash(v)
            out.append(contentsOf: v[0..<32])
            remaining -= 32
        }
        out.append(contentsOf: Blake2b.hash(v, outputLength: remaining))
        return out
    }

    private static func appendLE32(_ value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
        }
    }
}

/// Fills segments of Argon2 memory (RFC 9106 §3.2 steps 5-6, §3.4 indexing).
///
/// The variant and version only decide, once per segment, how addresses are made and whether new blocks are
/// XORed into the old ones; the loop over the segment's blocks branches on those per-segment constants only.
struct SegmentFiller {
    let memory: UnsafeMutablePointer<UInt64>
    let lanes: Int
    let laneLength: Int
    let segmentLength: Int
    let passes: Int
    let blockCount: Int
    /// Argon2d, Argon2i or Argon2id: the addressing mode of each segment, and the type in the address input.
    let variant: Argon2Variant
    /// Version 0x13 XORs new blocks into the old ones in passes after the first; version 0x10 overwrites them.
    let xorLaterPasses: Bool
    /// 128-word scratch for the compression function.
    let r: UnsafeMutablePointer<UInt64>
    /// An all-zero block.
    let zero: UnsafeMutablePointer<UInt64>
    /// The address generator's input block Z.
    let input: UnsafeMutablePointer<UInt64>
    /// The current block of 128 pseudo-random (J1, J2) pairs for data-independent addressing.
    let address: UnsafeMutablePointer<UInt64>

    /// Computes the segment `slice` of `lane` in pass `pass`.
    func fillSegment(pass: Int, lane: Int, slice: Int) {
        let blockWords = Argon2Engine.blockWords
        // Argon2i: data-independent addressing throughout; Argon2d: data-dependent throughout;
        // Argon2id: data-independent in the first half of the first pass.
        let dataIndependent: Bool
        switch variant {
        case .i: dataIndependent = true
        case .d: dataIndependent = false
        case .id: dataIndependent = pass == 0 && slice < Argon2Engine.syncPoints / 2
        }
        // Version 0x13 XORs into the old block from the second pass on; the first pass (and version 0x10) writes.
        let xorInto = pass != 0 && xorLaterPasses
        if dataIndependent {
            input.update(repeating: 0, count: blockWords)
            input[0] = UInt64(pass)
            input[1] = UInt64(lane)
            input[2] = UInt64(slice)
            input[3] = UInt64(blockCount)
            input[4] = UInt64(passes)
            input[5] = UInt64(variant.typeID)
        }
        var start = 0
        if pass == 0 && slice == 0 {
            start = 2  // B[i][0] and B[i][1] come from H0
            if dataIndependent { nextAddresses() }
        }
        let laneStart = lane * laneLength
        let startPosition = pass == 0 || slice == Argon2Engine.syncPoints - 1 ? 0 : (slice + 1) * segmentLength
        // Blocks this segment may reference in other lanes (all finished segments but this slice's).
        let otherLaneBase = pass == 0 ? slice * segmentLength : laneLength - segmentLength
        let firstSlice = pass == 0 && slice == 0

        /// RFC 9106 §3.4: the block (index into memory) that block `index` of this segment references.
        @inline(__always) func referenceBlock(_ index: Int, _ pseudoRandom: UInt64) -> Int {
            // J2 picks the lane (the own lane throughout the very first slice), J1 the block.
            let referenceLane = firstSlice ? lane : Int((pseudoRandom >> 32) % UInt64(lanes))
            let areaSize: Int
            if referenceLane == lane {
                areaSize = otherLaneBase + index - 1  // own lane: everything so far but the previous block
            } else {
                areaSize = otherLaneBase - (index == 0 ? 1 : 0)
            }
            let j1 = pseudoRandom & 0xFFFF_FFFF
            let x = (j1 &* j1) >> 32
            let y = (UInt64(truncatingIfNeeded: areaSize) &* x) >> 32
            let relative = areaSize &- 1 &- Int(truncatingIfNeeded: y)
            return referenceLane &* laneLength &+ (startPosition &+ relative) % laneLength
        }

        var current = laneStart + slice * segmentLength + start
        var index = start
        while index < segmentLength {
            let previous = (slice == 0 && index == 0) ? laneStart + laneLength - 1 : current - 1
            let pseudoRandom: UInt64
            if dataIndependent {
                if index & 127 == 0 { nextAddresses() }
                pseudoRandom = address[index & 127]
            } else {
                pseudoRandom = memory[previous &* blockWords]
            }
            let reference = memory + referenceBlock(index, pseudoRandom) &* blockWords
            let next = memory + current &* blockWords
            if xorInto {
                compress(previous: memory + previous &* blockWords, reference: reference, next: next, r: r, xorInto: true)
            } else {
                compress(previous: memory + previous &* blockWords, reference: reference, next: next, r: r, xorInto: false)
            }
            current += 1
            index += 1
        }
    }

    /// Next block of addresses: G(0, G(0, Z)) with Z's counter incremented.
    private func nextAddresses() {
        input[6] &+= 1
        compress(previous: zero, reference: input, next: address, r: r, xorInto: false)
        compress(previous: zero, reference: address, next: address, r: r, xorInto: false)
    }
}

// MARK: - Compression function G (RFC 9106 §3.5-3.6)

/// Two 64-bit words: one 16-byte register of RFC 9106's 8x8 register matrix.
typealias Pair = SIMD2<UInt64>
/// Four 64-bit words: a quarter of the 16 words the permutation P mixes (two registers). On plain
/// SSE2, LLVM splits each operation in two, so one GB call computes four GB functions with pmuludq,
/// shifts and a few shuffles, much as the reference's optimised implementation does.
typealias Quad = SIMD4<UInt64>

/// next = G(previous, reference), or next ^= G(previous, reference) when `xorInto`
/// (RFC 9106 §3.5), with `r` as 128-word scratch. `reference` and `next` may be the same block.
@inline(__always)
func compress(
    previous: UnsafePointer<UInt64>, reference: UnsafePointer<UInt64>,
    next: UnsafeMutablePointer<UInt64>, r: UnsafeMutablePointer<UInt64>, xorInto: Bool
) {
    let x = UnsafeRawPointer(previous)
    let y = UnsafeRawPointer(reference)
    let n = UnsafeMutableRawPointer(next)
    let q = UnsafeMutableRawPointer(r)
    // R = X ^ Y into the scratch; next starts as R (or next ^ R) and gets P(R) XORed in at the end.
    for offset in stride(from: 0, to: 1024, by: 16) {
        let value = x.load(fromByteOffset: offset, as: Pair.self) ^ y.load(fromByteOffset: offset, as: Pair.self)
        q.storeBytes(of: value, toByteOffset: offset, as: Pair.self)
        if xorInto {
            n.storeBytes(of: n.load(fromByteOffset: offset, as: Pair.self) ^ value, toByteOffset: offset, as: Pair.self)
        } else {
            n.storeBytes(of: value, toByteOffset: offset, as: Pair.self)
        }
    }
    // P on each row: registers 8i...8i+7, i.e. the 16 words at bytes 128i...128i+127.
    for row in 0..<8 {
        let p = q + row &* 128
        @inline(__always) func load(_ offset: Int) -> Quad {
            Quad(lowHalf: p.load(fromByteOffset: offset, as: Pair.self),
                 highHalf: p.load(fromByteOffset: offset + 16, as: Pair.self))
        }
        @inline(__always) func store(_ value: Quad, _ offset: Int) {
            p.storeBytes(of: value.lowHalf, toByteOffset: offset, as: Pair.self)
            p.storeBytes(of: value.highHalf, toByteOffset: offset + 16, as: Pair.self)
        }
        var a = load(0), b = load(32), c = load(64), d = load(96)
        blamkaRound(&a, &b, &c, &d)
        store(a, 0); store(b, 32); store(c, 64); store(d, 96)
    }
    // P on each column: registers i, i+8, ..., i+56, i.e. 16 bytes every 128 from 16i;
    // the result is XORed straight into next.
    for column in 0..<8 {
        let p = q + column &* 16
        @inline(__always) func load(_ offset: Int) -> Quad {
            Quad(lowHalf: p.load(fromByteOffset: offset, as: Pair.self),
                 highHalf: p.load(fromByteOffset: offset + 128, as: Pair.self))
        }
        var a = load(0), b = load(256), c = load(512), d = load(768)
        blamkaRound(&a, &b, &c, &d)
        let o = n + column &* 16
        @inline(__always) func xorStore(_ value: Quad, _ offset: Int) {
            o.storeBytes(of: o.load(fromByteOffset: offset, as: Pair.self) ^ value.lowHalf,
                         toByteOffset: offset, as: Pair.self)
            o.storeBytes(of: o.load(fromByteOffset: offset + 128, as: Pair.self) ^ value.highHalf,
                         toByteOffset: offset + 128, as: Pair.self)
        }
        xorStore(a, 0); xorStore(b, 256); xorStore(c, 512); xorStore(d, 768)
    }
}

/// The permutation P (RFC 9106 §3.6) on 16 words v0...v15 held as a = (v0...v3), b = (v4...v7),
/// c = (v8...v11), d = (v12...v15): BLAKE2b's round without message, with fBlaMka for addition.
/// GB on the columns (v0, v4, v8, v12)...(v3, v7, v11, v15) is GB on (a, b, c, d); GB on the diagonals
/// (v0, v5, v10, v15), (v1, v6, v11, v12), (v2, v7, v8, v13), (v3, v4, v9, v14) is GB after rotating
/// the lanes of b, c and d by one, two and three.
@inline(__always)
private func blamkaRound(_ a: inout Quad, _ b: inout Quad, _ c: inout Quad, _ d: inout Quad) {
    blamkaG(&a, &b, &c, &d)
    b = Quad(b[1], b[2], b[3], b[0])
    c = Quad(c[2], c[3], c[0], c[1])
    d = Quad(d[3], d[0], d[1], d[2])
    blamkaG(&a, &b, &c, &d)
    b = Quad(b[3], b[0], b[1], b[2])
    c = Quad(c[2], c[3], c[0], c[1])
    d = Quad(d[1], d[2], d[3], d[0])
}

/// GB of RFC 9106 §3.6 on four independent lanes at once.
@inline(__always)
private func blamkaG(_ a: inout Quad, _ b: inout Quad, _ c: inout Quad, _ d: inout Quad) {
    a = fBlaMka(a, b)
    d = rotateRight32(d ^ a)
    c = fBlaMka(c, d)
    b = rotateRight24(b ^ c)
    a = fBlaMka(a, b)
    d = rotateRight16(d ^ a)
    c = fBlaMka(c, d)
    b = rotateRight63(b ^ c)
}

/// x + y + 2 * trunc32(x) * trunc32(y), modulo 2^64, per lane (pmuludq, paddq).
@inline(__always)
private func fBlaMka(_ x: Quad, _ y: Quad) -> Quad {
    let low = Quad(repeating: 0xFFFF_FFFF)
    let product = (x & low) &* (y & low)
    return x &+ y &+ product &+ product
}

// Rotations, spelled so that LLVM keeps them as SSE2 vector operations. Written plainly as
// `(x >> n) | (x << (64 - n))`, the SLP vectoriser sees scalar rotates and leaves them scalar,
// shuttling every lane through a general-purpose register. With the left shift written as a
// multiplication by 2^(64-n) (vector multiplication is built in, and LLVM turns it back into psllq),
// they stay vector shifts. (Byte or word shuffles would be shorter for 16 and 24, but LLVM then
// fuses them with the diagonal shuffles into longer mask-and-blend sequences.)

/// Each lane rotated right by 32 bits: swap its 32-bit halves (pshufd).
@inline(__always)
private func rotateRight32(_ x: Quad) -> Quad {
    #if _endian(big)
    return (x &>> 32) | (x &* Quad(repeating: 1 << 32))
    #else
    let w = unsafeBitCast(x, to: SIMD8<UInt32>.self)
    return unsafeBitCast(SIMD8<UInt32>(w[1], w[0], w[3], w[2], w[5], w[4], w[7], w[6]), to: Quad.self)
    #endif
}

/// Each lane rotated right by 24 bits (psrlq, psllq, por).
@inline(__always)
private func rotateRight24(_ x: Quad) -> Quad {
    (x &>> 24) | (x &* Quad(repeating: 1 << 40))
}

/// Each lane rotated right by 16 bits (psrlq, psllq, por).
@inline(__always)
private func rotateRight16(_ x: Quad) -> Quad {
    (x &>> 16) | (x &* Quad(repeating: 1 << 48))
}

/// Each lane rotated right by 63 bits, i.e. left by 1 (psrlq, paddq, por).
@inline(__always)
private func rotateRight63(_ x: Quad) -> Quad {
    (x &>> 63) | (x &+ x)
}
