// The PHC string format for Argon2id, as written by the reference implementation:
//   $argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt, base64 without padding>$<tag, base64 without padding>

extension Argon2 {
    /// Hashes `password` (its UTF-8 bytes, not normalised) with a fresh 16-byte random salt and
    /// returns a PHC string, e.g. `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<tag>`, where salt and tag
    /// are standard base64 without padding.
    ///
    /// - Throws: ``Argon2Error/invalidParameters`` when `parameters` are out of range.
    public static func hashPHC(password: String, parameters: Argon2Parameters) throws -> String {
        try parameters.validate()
        var generator = SystemRandomNumberGenerator()
        var salt = [UInt8](repeating: 0, count: 16)
        for i in 0..<2 {
            let word = generator.next() as UInt64
            for j in 0..<8 {
                salt[i * 8 + j] = UInt8(truncatingIfNeeded: word >> UInt64(j * 8))
            }
        }
        let tag = try hash(password: Array(password.utf8), salt: salt, parameters: parameters)
        return "$argon2id$v=19$m=\(parameters.memoryKiB),t=\(parameters.iterations),p=\(parameters.parallelism)$"
            + PHCBase64.encode(salt) + "$" + PHCBase64.encode(tag)
    }

    /// Whether `password` matches the Argon2id PHC string `phc` (as made by ``hashPHC(password:parameters:)``
    /// or any library writing the same format). The tags are compared in constant time.
    ///
    /// - Throws: ``Argon2Error/malformedHash(_:)`` when `phc` cannot be parsed or is not Argon2id version 19.
    /// - Note: The memory cost comes from `phc`: only verify strings this server wrote.
    public static func verifyPHC(password: String, phc: String) throws -> Bool {
        let parsed = try PHCString(parsing: phc)
        let tag = try hash(password: Array(password.utf8), salt: parsed.salt, parameters: parsed.parameters)
        return constantTimeEqual(tag, parsed.tag)
    }

    /// The parameters of the Argon2id PHC string `phc`, with `hashLength` the length of its tag;
    /// compare them with the current configuration to decide whether a password needs rehashing.
    ///
    /// - Throws: ``Argon2Error/malformedHash(_:)`` when `phc` cannot be parsed or is not Argon2id version 19.
    public static func parseParameters(phc: String) throws -> Argon2Parameters {
        try PHCString(parsing: phc).parameters
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

/// A parsed Argon2id PHC string.
struct PHCString {
    var parameters: Argon2Parameters
    var salt: [UInt8]
    var tag: [UInt8]

    /// Parses `$argon2id$v=19$m=M,t=T,p=P$SALT$TAG` strictly: fields in this order, decimal numbers
    /// without sign or leading zeros, canonical unpadded standard base64, salt ≥ 8 bytes, tag ≥ 4 bytes.
    init(parsing string: String) throws {
        let bytes = Array(string.utf8)
        let fields = bytes.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        guard fields.count >= 2, fields[0].isEmpty else {
            throw Argon2Error.malformedHash("does not start with $argon2id$")
        }
        guard fields[1].elementsEqual("argon2id".utf8) else {
            throw Argon2Error.malformedHash("unsupported variant (only argon2id is supported)")
        }
        guard fields.count == 6 else {
            // $argon2id$m=...$salt$tag (no v=) denotes version 1.0 (0x10), which is not supported.
            if fields.count == 5, !fields[2].starts(with: "v=".utf8) {
                throw Argon2Error.malformedHash("unsupported version (only v=19 is supported)")
            }
            throw Argon2Error.malformedHash("expected $argon2id$v=19$m=..,t=..,p=..$salt$hash")
        }
        guard fields[2].elementsEqual("v=19".utf8) else {
            throw Argon2Error.malformedHash("unsupported version (only v=19 is supported)")
        }

        let settings = fields[3].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard settings.count == 3 else {
            throw Argon2Error.malformedHash("expected parameters m=..,t=..,p=..")
        }
        let memory = try Self.decimal(settings[0], key: "m")
        let iterations = try Self.decimal(settings[1], key: "t")
        let parallelism = try Self.decimal(settings[2], key: "p")

        guard let salt = PHCBase64.decode(fields[4]) else {
            throw Argon2Error.malformedHash("salt is not valid unpadded base64")
        }
        guard let tag = PHCBase64.decode(fields[5]) else {
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
