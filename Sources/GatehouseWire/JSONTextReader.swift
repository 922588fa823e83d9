extension JSONText {
    /// Reads a JSON object as `JSONDecoder` reads `[String: JSONValue]`, for the JSON columns that every session and
    /// user read decodes (a session's device, a user's custom data, an identity's data): `JSONDecoder` cost about
    /// 15,000 instructions for each of them, a twelfth of an authenticated read beyond the HTTP floor
    /// (`Benchmarks/PROFILING.md`).
    ///
    /// It answers only where its reading is certainly Foundation's, and nil for everything else, which the caller
    /// leaves to `JSONDecoder`: numbers (whether `1.0` or `1e3` reads as an integer or a double is Foundation's
    /// decision), two keys that are one `String` (a duplicate, or two canonically equivalent spellings), nesting
    /// deeper than ``maximumDepth``, and anything malformed. `JSONTextTests` compares it with `JSONDecoder` over
    /// random values and random corruptions of them.
    package static func readObject(_ text: String) -> [String: JSONValue]? {
        readObject(text, integers: false)
    }

    /// ``readObject(_:)`` of UTF-8 bytes (a token's payload), nil when they are not valid UTF-8 (which `JSONDecoder`
    /// refuses). With `integers`, a plain integer (`-?(0|[1-9][0-9]*)`, no fraction or exponent) that fits `Int64` reads
    /// as `.int`, as `JSONDecoder` reads it into a ``JSONValue`` (a string and a boolean are tried first, and neither
    /// takes a number); any other number still answers nil.
    package static func readObject(utf8 bytes: some Collection<UInt8>, integers: Bool) -> [String: JSONValue]? {
        // Valid UTF-8 is read back as the same bytes; `String(decoding:)` replaces each invalid sequence with U+FFFD's
        // three bytes, which no invalid sequence is. (`String(validating:)` would need macOS 15 and iOS 18, and this
        // module is the SDK's too.)
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.utf8.elementsEqual(bytes) else { return nil }
        return readObject(text, integers: integers)
    }

    private static func readObject(_ text: String, integers: Bool) -> [String: JSONValue]? {
        var text = text
        return text.withUTF8 { bytes in
            var reader = Reader(bytes: bytes, integers: integers)
            reader.skipSpace()
            guard let object = reader.object(depth: 1) else { return nil }
            reader.skipSpace()
            return reader.position == bytes.count ? object : nil
        }
    }

    /// Deeper values are left to `JSONDecoder`.
    package static let maximumDepth = 32

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        /// Whether plain integers are read (``readObject(utf8:integers:)``).
        let integers: Bool
        var position = 0

        private var next: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skipSpace() {
            while let byte = next, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            guard next == byte else { return false }
            position += 1
            return true
        }

        private mutating func take(literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - position >= count else { return false }
            for offset in 0..<count where bytes[position + offset] != literal.utf8Start[offset] { return false }
            position += count
            return true
        }

        mutating func value(depth: Int) -> JSONValue? {
            guard depth <= JSONText.maximumDepth, let byte = next else { return nil }
            switch byte {
            case UInt8(ascii: "{"): return object(depth: depth).map(JSONValue.object)
            case UInt8(ascii: "["): return array(depth: depth).map(JSONValue.array)
            case UInt8(ascii: "\""): return string().map(JSONValue.string)
            case UInt8(ascii: "t"): return take(literal: "true") ? .bool(true) : nil
            case UInt8(ascii: "f"): return take(literal: "false") ? .bool(false) : nil
            case UInt8(ascii: "n"): return take(literal: "null") ? .null : nil
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return integers ? integer().map(JSONValue.int) : nil
            default: return nil
            }
        }

        /// A plain integer that fits `Int64`; nil for a fraction, an exponent, a leading zero, or a value beyond
        /// `Int64` (which `JSONDecoder` reads as a `Double`).
        private mutating func integer() -> Int64? {
            let negative = take(UInt8(ascii: "-"))
            guard let first = next, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return nil }
            var magnitude: UInt64 = 0
            if first == UInt8(ascii: "0") {
                position += 1
            } else {
                while let byte = next, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                    let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                    guard !o1, !o2 else { return nil }
                    magnitude = sum
                    position += 1
                }
            }
            if let byte = next, byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            {
                return nil
            }
            if negative {
                guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
                return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
            }
            guard magnitude <= UInt64(Int64.max) else { return nil }
            return Int64(magnitude)
        }

        mutating func object(depth: Int) -> [String: JSONValue]? {
            guard depth <= JSONText.maximumDepth, take(UInt8(ascii: "{")) else { return nil }
            skipSpace()
            var object: [String: JSONValue] = [:]
            if take(UInt8(ascii: "}")) { return object }
            while true {
                skipSpace()
                guard next == UInt8(ascii: "\""), let key = string() else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard let value = value(depth: depth + 1), object.updateValue(value, forKey: key) == nil else { return nil }
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                return take(UInt8(ascii: "}")) ? object : nil
            }
        }

        private mutating func array(depth: Int) -> [JSONValue]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            skipSpace()
            var array: [JSONValue] = []
            if take(UInt8(ascii: "]")) { return array }
            while true {
                skipSpace()
                guard let value = value(depth: depth + 1) else { return nil }
                array.append(value)
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                return take(UInt8(ascii: "]")) ? array : nil
            }
        }

        /// A string at `position` (its opening quote). The text it reads is valid UTF-8 (a Swift `String`'s), so its
        /// bytes are copied as they are; escapes are decoded, and a control character unescaped is malformed.
        private mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = position
            // Most strings have no escape: one copy.
            while let byte = next, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
                guard byte >= 0x20 else { return nil }
                position += 1
            }
            guard let end = next else { return nil }
            if end == UInt8(ascii: "\"") {
                position += 1
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<(position - 1)]), as: UTF8.self)
            }
            var out = Array(bytes[start..<position])
            while let byte = next {
                position += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escaped = next else { return nil }
                    position += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let scalar = unicodeEscape() else { return nil }
                        out.append(contentsOf: String(Character(scalar)).utf8)
                    default: return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    out.append(byte)
                }
            }
            return nil
        }

        /// The scalar of a `\u` escape whose `\u` was read: four hex digits, and for a high surrogate the `\u` escape
        /// of its low surrogate. A lone surrogate is left to `JSONDecoder`.
        private mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let first = hex4() else { return nil }
            if (0xDC00...0xDFFF).contains(first) { return nil }
            if (0xD800...0xDBFF).contains(first) {
                guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let second = hex4(), (0xDC00...0xDFFF).contains(second) else {
                    return nil
                }
                return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            }
            return Unicode.Scalar(first)
        }

        private mutating func hex4() -> UInt32? {
            guard bytes.count - position >= 4 else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[position]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                position += 1
            }
            return value
        }
    }
}
