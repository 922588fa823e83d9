import Foundation
import GatehouseWire
import Testing

/// ``JSONText`` writes the answers of the hottest routes by hand; they must be the very bytes `JSONEncoder` writes
/// (sorted keys, slashes unescaped), whatever values an app's users store in their data.
@Suite struct JSONTextTests {
    static func encoder() -> JSONEncoder { TokenClaimsJSONTests.encoder() }

    static let strings = [
        "", "a", "B", "Z", "_", "a10", "a2", "email", "Email", "name", "naïve", "日本", "🙂", "quote \"", "back\\slash",
        "line\nbreak", "\u{0}", "\u{1f}", "a/b", "é", "e\u{301}", "ﬁ", "10", "9",
    ]

    static func value(depth: Int, _ generator: inout some RandomNumberGenerator) -> JSONValue {
        switch Int.random(in: 0..<(depth > 2 ? 6 : 8), using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .int(Int64.random(in: .min ... .max, using: &generator))
        case 3: return .double([0.1, 1.0, -2.5, 1e21, 1e-7, 123456.789, 0, -0.0, Double.random(in: -1e6...1e6, using: &generator)].randomElement(using: &generator)!)
        case 4, 5: return .string(strings.randomElement(using: &generator)!)
        case 6: return .array((0..<Int.random(in: 0...3, using: &generator)).map { _ in value(depth: depth + 1, &generator) })
        default: return .object(object(depth: depth + 1, &generator))
        }
    }

    static func object(depth: Int, _ generator: inout some RandomNumberGenerator) -> [String: JSONValue] {
        var object: [String: JSONValue] = [:]
        for _ in 0..<Int.random(in: 0...6, using: &generator) {
            object[strings.randomElement(using: &generator)!] = value(depth: depth, &generator)
        }
        return object
    }

    @Test func valuesAreTheBytesJSONEncoderWrites() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let object = Self.object(depth: 0, &generator)
            var written: [UInt8] = []
            JSONText.appendObject(object, to: &written)
            let expected = try Self.encoder().encode(object)
            #expect(written == Array(expected), "\(String(decoding: expected, as: UTF8.self))")
        }
    }

    @Test func theLoginAnswerIsTheBytesJSONEncoderWrites() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            func pick() -> String { Self.strings.randomElement(using: &generator)! }
            let login = LoginResponse(accessToken: pick(), refreshToken: pick(), userId: pick(), deviceId: pick())
            #expect(login.json() == Array(try Self.encoder().encode(login)))
        }
    }

    @Test func theProfileAnswerIsTheBytesJSONEncoderWrites() throws {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<200 {
            func pick() -> String { Self.strings.randomElement(using: &generator)! }
            let identities = (0..<(round % 4)).map { _ in ProfileIdentity(id: pick(), providerType: pick(), providerId: pick()) }
            let profile = ProfileResponse(
                userId: pick(), domainId: pick(), identities: identities, data: Self.object(depth: 0, &generator), type: pick()
            )
            #expect(profile.json() == Array(try Self.encoder().encode(profile)))
        }
    }
}

/// ``JSONText/readObject(_:)`` reads the JSON columns of every session and user read in place of `JSONDecoder`: where it
/// answers, it must answer what `JSONDecoder` answers, and it must never accept what `JSONDecoder` refuses.
@Suite struct JSONTextReaderTests {
    static func decoded(_ text: String) -> [String: JSONValue]? {
        try? JSONDecoder().decode([String: JSONValue].self, from: Data(text.utf8))
    }

    /// Whether `value` holds a number anywhere (numbers are left to `JSONDecoder`).
    static func hasNumber(_ value: JSONValue) -> Bool {
        switch value {
        case .int, .double: return true
        case .array(let a): return a.contains(where: hasNumber)
        case .object(let o): return o.values.contains(where: hasNumber)
        default: return false
        }
    }

    /// Random objects, written by `JSONText` (slashes as they are), by `JSONEncoder` (slashes escaped, keys in its
    /// order) and pretty-printed: read as `JSONDecoder` reads them, and every object without numbers read at all.
    @Test func objectsReadAsJSONDecoderReadsThem() throws {
        var generator = SystemRandomNumberGenerator()
        let plain = JSONEncoder()
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.prettyPrinted]
        var readWithoutDecoder = 0
        for _ in 0..<600 {
            let object = JSONTextTests.object(depth: 0, &generator)
            var written: [UInt8] = []
            JSONText.appendObject(object, to: &written)
            let texts = [String(decoding: written, as: UTF8.self), String(decoding: try plain.encode(object), as: UTF8.self),
                         String(decoding: try pretty.encode(object), as: UTF8.self)]
            for text in texts {
                let read = JSONText.readObject(text)
                if let read {
                    #expect(read == Self.decoded(text), "\(text)")
                    readWithoutDecoder += 1
                } else {
                    #expect(Self.hasNumber(.object(object)), "an object without numbers must be read: \(text)")
                }
            }
        }
        #expect(readWithoutDecoder > 200)
    }

    @Test func escapesAndUnicodeReadAsJSONDecoderReadsThem() {
        let texts = [
            #"{"a":"\"\\\/\b\f\n\r\t"}"#, #"{"a":"\u00e9\u0000\u001F\uD83D\uDE42"}"#, #"{"\u00e9":"é", "k":[true,false,null,"x",{}]}"#,
            " {\n\t\"a\" : [ ] , \"b\" : { \"c\" : null } } \r\n", #"{"a":"日本🙂"}"#, #"{"a":"\u0041\u00C5\u212B"}"#,
        ]
        for text in texts {
            let read = JSONText.readObject(text)
            #expect(read != nil, "\(text)")
            #expect(read == Self.decoded(text), "\(text)")
        }
    }

    /// What it leaves to `JSONDecoder`: numbers, keys that are one `String` (duplicates, canonically equivalent
    /// spellings), lone surrogates, too deep a nesting, and malformed text.
    @Test func whatItDoesNotReadIsLeftToJSONDecoder() {
        let deep = String(repeating: #"{"a":"#, count: JSONText.maximumDepth + 1) + "{}" + String(repeating: "}", count: JSONText.maximumDepth + 1)
        let texts = [
            #"{"a":1}"#, #"{"a":1.0}"#, #"{"a":-0}"#, #"{"a":"x","a":"y"}"#, "{\"é\":1,\"e\u{301}\":2}", "{\"é\":\"1\",\"e\u{301}\":\"2\"}",
            #"{"a":"\uD83D"}"#, #"{"a":"\uDE42"}"#, deep, "", "{", "}", "[]", #"{"a"}"#, #"{"a":}"#, #"{"a":"b",}"#, #"{"a":"b"} x"#,
            #"{'a':'b'}"#, #"{"a":tru}"#, #"{"a":"\x"}"#, #"{"a":"\u12"}"#, "{\"a\":\"\u{1}\"}", #"{a:"b"}"#, #"{"a":"b"}}"#,
        ]
        for text in texts {
            #expect(JSONText.readObject(text) == nil, "\(text)")
        }
    }

    /// With `integers` (a token's claims), plain integers read as `JSONDecoder` reads them into a ``JSONValue``, at the
    /// edges of `Int64` too; every other number, and every malformed one, is still left to it.
    @Test func plainIntegersReadAsJSONDecoderReadsThem() {
        let read = ["0", "-0", "7", "-7", "1700000000", "\(Int64.max)", "\(Int64.min)", "[1,-2,[3]]", "{\"b\":42}"]
        for number in read {
            let text = #"{"a":"# + number + "}"
            let object = JSONText.readObject(utf8: Array(text.utf8), integers: true)
            #expect(object != nil, "\(text)")
            #expect(object == Self.decoded(text), "\(text)")
            #expect(JSONText.readObject(utf8: Array(text.utf8), integers: false) == nil, "\(text)")
        }
        let left = ["9223372036854775808", "-9223372036854775809", "1.0", "1e3", "1E3", "-1.5", "01", "-01", "-", "--1", "+1", "1-", "0x1"]
        for number in left {
            let text = #"{"a":"# + number + "}"
            #expect(JSONText.readObject(utf8: Array(text.utf8), integers: true) == nil, "\(text)")
        }
        // Bytes that are not UTF-8 are JSONDecoder's to refuse (a cut sequence, a surrogate's encoding); U+FFFD itself
        // is text like any other.
        #expect(JSONText.readObject(utf8: [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC3, 0x22, 0x7D], integers: true) == nil)
        #expect(JSONText.readObject(utf8: [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x7D], integers: true) == nil)
        #expect(JSONText.readObject(utf8: Array("{\"a\":\"\u{FFFD}\"}".utf8), integers: true) == ["a": .string("\u{FFFD}")])
    }

    /// Random corruptions of valid objects (a byte replaced, removed or doubled): whenever it reads one, `JSONDecoder`
    /// reads the same; it never accepts what `JSONDecoder` refuses.
    @Test func corruptedTextIsNeverReadOtherwiseThanJSONDecoderReadsIt() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]":,\/ tfnrue0u"#.utf8) + [0x01, 0x0A, 0xC3, 0xA9]
        var read = 0
        for _ in 0..<3000 {
            var written: [UInt8] = []
            JSONText.appendObject(JSONTextTests.object(depth: 0, &generator), to: &written)
            guard !written.isEmpty else { continue }
            let at = Int.random(in: 0..<written.count, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: written[at] = alphabet.randomElement(using: &generator)!
            case 1: written.remove(at: at)
            default: written.insert(written[at], at: at)
            }
            guard let text = String(validating: written, as: UTF8.self) else { continue }
            if let object = JSONText.readObject(text) {
                #expect(object == Self.decoded(text), "\(text)")
                read += 1
            }
        }
        #expect(read > 0)
    }
}
