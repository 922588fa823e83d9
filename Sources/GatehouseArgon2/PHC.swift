// The PHC string format for Argon2, as written by the reference implementation (and so argon2-cffi):
//   $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt, base64 without padding>$<tag, base64 without padding>
// with argon2d, argon2i or argon2id, and v=19 or v=16. Version 1.0 (0x10) may also be written without the
// v= field (`$argon2i$m=..,t=..,p=..$salt$tag`), as the reference did before version 1.3 and passlib still does.

/// What an Argon2 PHC string says about its hash (see ``Argon2/parseAnyPHC(_:)``).
public struct Argon2HashInfo: Sendable, Hashable {
    /// Argon2d, Argon2i or Argon2id.
    public var variant: Argon2Variant
    /// Version 1.0 (`v=16` or no `v=`) or 1.3 (`v=19`).
    public var version: Argon2Version
    /// Memory, passes and lanes, with `hashLength` the length of the string's tag.
    public var parameters: Argon2Parameters

    /// The description of a hash with these properties.
    public init(variant: Argon2Variant, version: Argon2Version, parameters: Argon2Parameters) {
        self.variant = variant
        self.version = version
        self.parameters = parameters
    }
}

extension Argon2 {
    /// Hashes `password` (its UTF-8 bytes, not normalised) with a fresh 16-byte random salt and
    /// returns a PHC string, e.g. `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<tag>`, where salt and tag
    /// are standard base64 without padding.
    ///
    /// - Parameter isCancelled: Asked before every segment; once it answers true the hash throws `CancellationError`.
    /// - Throws: ``Argon2Error/invalidParameters`` when `parameters` are out of range.
    public static func hashPHC(password: String, parameters: Argon2Parameters, isCancelled: () -> Bool = { false }) throws -> String {
        try parameters.validate()
        var generator = SystemRandomNumberGenerator()
        var salt = [UInt8](repeating: 0, count: 16)
        for i in 0..<2 {
            let word = generator.next() as UInt64
            for j in 0..<8 {
                salt[i * 8 + j] = UInt8(truncatingIfNeeded: word >> UInt64(j * 8))
            }
        }
        let tag = try hash(
            password: Array(password.utf8), salt: salt, parameters: parameters, variant: .id, version: .v13, isCancelled: isCancelled
        )
        return "$argon2id$v=19$m=\(parameters.memoryKiB),t=\(parameters.iterations),p=\(parameters.parallelism)$"
            + PHCBase64.encode(salt) + "$" + PHCBase64.encode(tag)
    }

    /// Whether `password` matches the Argon2id PHC string `phc` (as made by ``hashPHC(password:parameters:)``
    /// or any library writing the same format). The tags are compared in constant time.
    ///
    /// - Throws: ``Argon2Error/malformedHash(_:)`` when `phc` cannot be parsed or is not Argon2id version 19.
    /// - Note: The memory cost comes from `phc`: only verify strings this server wrote, or check their
    ///   ``parseParameters(phc:)`` against a limit first.
    /// - Parameter isCancelled: Asked before every segment; once it answers true the verification throws
    ///   `CancellationError`.
    public static func verifyPHC(password: String, phc: String, isCancelled: () -> Bool = { false }) throws -> Bool {
        let parsed = try PHCString(parsingArgon2idV19: phc)
        let tag = try hash(
            password: Array(password.utf8), salt: parsed.salt, parameters: parsed.parameters, variant: .id, version: .v13,
            isCancelled: isCancelled
        )
        return constantTimeEqual(tag, parsed.tag)
    }

    /// The parameters of the Argon2id PHC string `phc`, with `hashLength` the length of its tag;
    /// compare them with the current configuration to decide whether a password needs rehashing.
    ///
    /// - Throws: ``Argon2Error/malformedHash(_:)`` when `phc` cannot be parsed or is not Argon2id version 19
    ///   (so that a hash of another variant or version reads as one to rehash).
    public static func parseParameters(phc: String) throws -> Argon2Parameters {
        try PHCString(parsingArgon2idV19: phc).parameters
    }

    /// The most passes ``verifyAnyPHC(password:phc:maxMemoryKiB:maxWork:isCancelled:)`` accepts: 1,000.
    ///
    /// Hashes in use have a few passes (RFC 9106 and OWASP recommend 1 to 5, libsodium's strongest Argon2i
    /// preset has 8); this cap only stops strings whose small memory hides an absurd amount of work. The work
    /// of a hash is memory × passes (``Argon2Parameters/work``): `maxWork` bounds it.
    public static let maxVerifyIterations: UInt32 = 1_000

    /// Parses an Argon2 PHC string of any variant and version without hashing: whether it is one, and
    /// what it needs. No cost limits are applied.
    ///
    /// Accepts `$argon2d$`, `$argon2i$` and `$argon2id$`, with `v=19`, `v=16` or no version field (version 1.0),
    /// then exactly `m=..,t=..,p=..` (no `keyid=` or `data=`), salt and tag, in the strict form
    /// ``verifyPHC(password:phc:)`` reads: decimal numbers without sign or leading zeros, canonical unpadded
    /// standard base64, salt ≥ 8 bytes, tag ≥ 4 bytes, and parameters that pass ``Argon2Parameters/validate()``.
    /// This is exactly what the reference implementation (argon2-cffi, libargon2) and passlib write.
    ///
    /// - Returns: The variant, the version and the parameters, with `hashLength` the length of the tag.
    /// - Throws: ``Argon2Error/malformedHash(_:)`` when `phc` is not such a string.
    public static func parseAnyPHC(_ phc: String) throws -> Argon2HashInfo {
        let parsed = try PHCString(parsing: phc)
        return Argon2HashInfo(variant: parsed.variant, version: parsed.version, parameters: parsed.parameters)
    }

    /// Whether `password` (its UTF-8 bytes) matches the Argon2 PHC string `phc` of any variant and version,
    /// as imported from another system (see ``parseAnyPHC(_:)`` for the strings accepted). The tags are
    /// compared in constant time.
    ///
    /// Refuses, before allocating anything for the hash, strings that need more than `maxMemoryKiB` KiB,
    /// more than ``maxVerifyIterations`` passes, or more than `maxWork` blocks of work (memory × passes,
    /// ``Argon2Parameters/work``; no limit when nil). Lanes are limited only by ``Argon2Parameters/validate()``
    /// (and memory, which is at least 8 KiB per lane).
    ///
    /// - Parameter isCancelled: Asked before every segment; once it answers true the verification throws
    ///   `CancellationError`.
    /// - Throws: ``Argon2Error/malformedHash(_:)`` when `phc` cannot be parsed;
    ///   ``Argon2Error/costLimitExceeded(_:)`` when its memory, passes or work are above the limits.
    public static func verifyAnyPHC(
        password: String, phc: String, maxMemoryKiB: UInt32, maxWork: UInt64? = nil, isCancelled: () -> Bool = { false }
    ) throws -> Bool {
        let parsed = try PHCString(parsing: phc)
        guard parsed.parameters.memoryKiB <= maxMemoryKiB else {
            throw Argon2Error.costLimitExceeded(
                "m=\(parsed.parameters.memoryKiB) KiB is above the limit of \(maxMemoryKiB) KiB"
            )
        }
        guard parsed.parameters.iterations <= maxVerifyIterations else {
            throw Argon2Error.costLimitExceeded(
                "t=\(parsed.parameters.iterations) is above the limit of \(maxVerifyIterations) passes"
            )
        }
        if let maxWork, parsed.parameters.work > maxWork {
            throw Argon2Error.costLimitExceeded(
                "m × t = \(parsed.parameters.work) blocks is above the limit of \(maxWork)"
            )
        }
        let tag = try hash(
            password: Array(password.utf8), salt: parsed.salt, parameters: parsed.parameters,
            variant: parsed.variant, version: parsed.version, isCancelled: isCancelled
        )
        return constantTimeEqual(tag, parsed.tag)
    }

    /// Compares two byte strings in time that depends on their lengths only.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count {
            difference |= a[i] ^ b[i]
        }
        return difference == 0
    }
}

/// A parsed Argon2 PHC string.
struct PHCString {
    var variant: Argon2Variant
    var version: Argon2Version
    var parameters: Argon2Parameters
    var salt: [UInt8]
    var tag: [UInt8]

    /// Parses an Argon2id version 19 string only, as ``Argon2/verifyPHC(password:phc:)`` and
    /// ``Argon2/parseParameters(phc:)`` do: any other variant or version is a malformed hash to them.
    init(parsingArgon2idV19 string: String) throws {
        try self.init(parsing: string)
        guard variant == .id else {
            throw Argon2Error.malformedHash("unsupported variant (only argon2id is supported)")
        }
        guard version == .v13 else {
            throw Argon2Error.malformedHash("unsupported version (only v=19 is supported)")
        }
    }

    /// Parses `$argon2X$v=V$m=M,t=T,p=P$SALT$TAG` strictly: X one of d, i, id; V 16 or 19, or the whole
    /// `v=V$` field absent for version 16; fields in this order, decimal numbers without sign or leading zeros,
    /// canonical unpadded standard base64, salt ≥ 8 bytes, tag ≥ 4 bytes, valid parameters.
    init(parsing string: String) throws {
        let bytes = Array(string.utf8)
        let fields = bytes.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count >= 2, fields[0].isEmpty else {
            throw Argon2Error.malformedHash("does not start with $argon2")
        }
        if fields[1].elementsEqual("argon2id".utf8) {
            variant = .id
        } else if fields[1].elementsEqual("argon2i".utf8) {
            variant = .i
        } else if fields[1].elementsEqual("argon2d".utf8) {
            variant = .d
        } else {
            throw Argon2Error.malformedHash("unsupported variant (expected argon2d, argon2i or argon2id)")
        }
        let settingsField: ArraySlice<UInt8>
        if fields.count == 6 {
            if fields[2].elementsEqual("v=19".utf8) {
                version = .v13
            } else if fields[2].elementsEqual("v=16".utf8) {
                version = .v10
            } else {
                throw Argon2Error.malformedHash("unsupported version (expected v=16 or v=19)")
            }
            settingsField = fields[3]
        } else if fields.count == 5, !fields[2].starts(with: "v=".utf8) {
            // No v= field: version 1.0 (0x10), as the reference implementation reads it.
            version = .v10
            settingsField = fields[2]
        } else {
            throw Argon2Error.malformedHash("expected $argon2..$v=..$m=..,t=..,p=..$salt$hash")
        }
        let saltField = fields[fields.count - 2]
        let tagField = fields[fields.count - 1]

        let settings = settingsField.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard settings.count == 3 else {
            throw Argon2Error.malformedHash("expected parameters m=..,t=..,p=..")
        }
        let memory = try Self.decimal(settings[0], key: "m")
        let iterations = try Self.decimal(settings[1], key: "t")
        let parallelism = try Self.decimal(settings[2], key: "p")

        guard let salt = PHCBase64.decode(saltField) else {
            throw Argon2Error.malformedHash("salt is not valid unpadded base64")
        }
        guard let tag = PHCBase64.decode(tagField) else {
            throw Argon2Error.malformedHash("hash is not valid unpadded base64")
        }
        guard salt.count >= 8 else {
            throw Argon2Error.malformedHash("salt is shorter than 8 bytes")
        }
        let parameters = Argon2Parameters(
            memoryKiB: memory, iterations: iterations, parallelism: parallelism, hashLength: tag.count
        )
        guard parameters.isValid else {
            throw Argon2Error.malformedHash(
                "parameters out of range (need p ≥ 1, m ≥ 8p, t ≥ 1, hash ≥ 4 bytes)"
            )
        }
        self.parameters = parameters
        self.salt = salt
        self.tag = tag
    }

    /// Parses `key=digits` into a UInt32.
    private static func decimal(_ field: ArraySlice<UInt8>, key: Character) throws -> UInt32 {
        let prefix = Array("\(key)=".utf8)
        guard field.starts(with: prefix) else {
            throw Argon2Error.malformedHash("expected \(key)= in the parameters m=..,t=..,p=..")
        }
        let digits = field.dropFirst(prefix.count)
        guard !digits.isEmpty, digits.count <= 10,
              digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              digits.count == 1 || digits.first != UInt8(ascii: "0")
        else {
            throw Argon2Error.malformedHash("\(key) is not a decimal number without leading zeros")
        }
        var value: UInt64 = 0
        for digit in digits {
            value = value * 10 + UInt64(digit - UInt8(ascii: "0"))
        }
        guard let result = UInt32(exactly: value) else {
            throw Argon2Error.malformedHash("\(key) is larger than 4294967295")
        }
        return result
    }
}

/// Standard base64 (RFC 4648 §4) without padding, as in PHC strings.
enum PHCBase64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18)])
            out.append(alphabet[Int(n >> 12 & 63)])
        case 2:
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes canonical unpadded base64: nil on any other character, on padding, on a length
    /// of 1 mod 4, or when the unused low bits of the last character are not zero.
    static func decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in text {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }  // non-canonical trailing bits
        return out
    }

    private static func sextet(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return UInt32(c - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return UInt32(c - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
