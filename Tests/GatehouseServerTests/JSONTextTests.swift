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
