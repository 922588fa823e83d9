import Crypto
import Foundation
import GatehouseDomain
import GatehouseWire
import Testing

/// Token claims are written by hand on the refresh path (``TokenClaims/json()``); they must be the very bytes
/// Foundation's `JSONEncoder` writes, so that nothing a client or a verifier reads changes with it.
@Suite struct TokenClaimsJSONTests {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// Strings that need every kind of escape JSON has, and some that need none.
    static let awkward = [
        "", "plain", "quote \" and backslash \\", "slash / stays", "tab\tnew line\ncarriage\rreturn", "\u{8}\u{c}",
        "\u{0}\u{1}\u{1f} controls", "ümlaut, 日本語, emoji 🙂", "\u{7f} delete", "https://auth.example.com/base",
    ]

    @Test func handWrittenClaimsAreTheBytesJSONEncoderWrites() throws {
        var generator = SystemRandomNumberGenerator()
        var compared = 0
        for round in 0..<400 {
            func pick() -> String { Self.awkward.randomElement(using: &generator)! }
            var claims = TokenClaims(
                sub: pick(), typ: round % 2 == 0 ? .access : .refresh, sid: pick(), aud: pick(), iss: pick(),
                iat: Int64.random(in: -10...4_000_000_000, using: &generator), exp: Int64.random(in: Int64.min...Int64.max, using: &generator),
                baasDeviceId: pick()
            )
            if Bool.random(using: &generator) { claims.jti = pick() }
            if Bool.random(using: &generator) { claims.amr = (0..<Int.random(in: 0...3, using: &generator)).map { _ in pick() } }
            if Bool.random(using: &generator) { claims.authTime = Int64.random(in: 0...4_000_000_000, using: &generator) }
            switch round % 3 {
            case 0: claims.userData = nil
            case 1: claims.userData = [:]
            default:
                claims.userData = [
                    pick(): .string(pick()), "n": .int(Int64(round)), "f": .double(Double(round) / 8), "b": .bool(true),
                    "o": .object(["z": .null, "a": .array([.int(1), .string(pick())])]),
                ]
            }
            let expected = try Self.encoder().encode(claims)
            #expect(Array(expected) == (try claims.json()), "claims \(claims)")
            compared += 1
        }
        #expect(compared == 400)
    }

    @Test func aTokenSignedFromHandWrittenClaimsVerifiesToTheSameClaims() throws {
        let key = SigningKeys.Key(kid: "kid-1", privateKey: P256.Signing.PrivateKey(), createdAt: Date(timeIntervalSince1970: 0))
        var claims = TokenClaims(
            sub: "user \"1\"", typ: .access, sid: "s\n1", aud: "app/1", iss: "http://127.0.0.1:8080", iat: 1, exp: 4_000_000_000,
            baasDeviceId: "device", userData: ["name": .string("Ana")]
        )
        claims.amr = ["pwd", "otp"]
        claims.authTime = 1
        let keys = SigningKeys(keys: [key])
        #expect(try keys.verify(try JWT.sign(claims, key: key)) == claims)
    }

    /// Random claims with ``TokenClaims/json()``'s bytes, `JSONEncoder`'s (slashes escaped) and pretty-printed:
    /// ``TokenClaims/read(_:)`` answers what `JSONDecoder` answers, and the claims Gatehouse writes without a
    /// fractional number in their user data are read without it (``JSONText/readObject(utf8:integers:)`` takes them).
    @Test func claimsReadAsJSONDecoderReadsThem() throws {
        var generator = SystemRandomNumberGenerator()
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.prettyPrinted]
        var readByHand = 0
        for round in 0..<400 {
            func pick() -> String { Self.awkward.randomElement(using: &generator)! }
            var claims = TokenClaims(
                sub: pick(), typ: round % 2 == 0 ? .access : .refresh, sid: pick(), aud: pick(), iss: pick(),
                iat: Int64.random(in: Int64.min...Int64.max, using: &generator), exp: [Int64.min, Int64.max, 0, 4_000_000_000][round % 4],
                baasDeviceId: pick()
            )
            if Bool.random(using: &generator) { claims.jti = pick() }
            if Bool.random(using: &generator) { claims.amr = (0..<Int.random(in: 0...3, using: &generator)).map { _ in pick() } }
            if Bool.random(using: &generator) { claims.authTime = Int64.random(in: 0...4_000_000_000, using: &generator) }
            let fractional = round % 4 == 3
            switch round % 4 {
            case 0: claims.userData = nil
            case 1: claims.userData = [:]
            case 2: claims.userData = [pick(): .string(pick()), "n": .int(-Int64(round)), "o": .object(["z": .null, "a": .array([.int(1), .bool(false)])])]
            default: claims.userData = ["f": .double(Double(round) / 8 + 0.5)]
            }
            for data in [Data(try claims.json()), try JSONEncoder().encode(claims), try pretty.encode(claims)] {
                let decoded = try JSONDecoder().decode(TokenClaims.self, from: data)
                #expect(TokenClaims.read(data) == decoded)
                #expect(decoded == claims)
                if !fractional {
                    // The hand reading itself, not JSONDecoder behind it.
                    let object = JSONText.readObject(utf8: data, integers: true)
                    #expect(object != nil, "\(String(decoding: data, as: UTF8.self))")
                    if let object, TokenClaims(reading: object) == claims { readByHand += 1 }
                }
            }
        }
        #expect(readByHand >= 900)
    }

    /// Claims of the wrong types or missing, and random corruptions of valid ones: ``TokenClaims/read(_:)`` answers
    /// exactly what `JSONDecoder` answers (nil where it throws).
    @Test func claimsOfOtherShapesReadAsJSONDecoderReadsThem() throws {
        let base = #""aud":"a","baas_device_id":"d","exp":2,"iat":1,"iss":"i","sid":"s","sub":"u""#
        let texts = [
            "{" + base + #","typ":"access"}"#, "{" + base + #","typ":"other"}"#, "{" + base + "}", "{" + base + #","typ":"access","jti":null,"amr":null,"auth_time":null,"user_data":null}"#,
            "{" + base + #","typ":"access","jti":1}"#, "{" + base + #","typ":"access","amr":["pwd",1]}"#, "{" + base + #","typ":"access","amr":"pwd"}"#,
            "{" + base + #","typ":"access","auth_time":"1"}"#, "{" + base + #","typ":"access","auth_time":1.5}"#, "{" + base + #","typ":"access","user_data":[]}"#,
            "{" + base + #","typ":"access","unknown":{"x":[1,2.5]}}"#, "{" + base + #","typ":"access","exp":3}"#, "{" + base.replacingOccurrences(of: #""exp":2"#, with: #""exp":2.0"#) + #","typ":"access"}"#,
            "{" + base.replacingOccurrences(of: #""sub":"u""#, with: #""sub":null"#) + #","typ":"refresh"}"#,
        ]
        for text in texts {
            let data = Data(text.utf8)
            #expect(TokenClaims.read(data) == (try? JSONDecoder().decode(TokenClaims.self, from: data)), "\(text)")
        }
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]":,\/ tfnrue0129.-"#.utf8) + [0x01, 0xC3, 0xA9]
        var read = 0
        for round in 0..<2000 {
            var claims = TokenClaims(
                sub: "user", typ: .access, sid: "session", aud: "app", iss: "http://h", iat: Int64(round), exp: 4_000_000_000, baasDeviceId: "d",
                userData: ["name": .string("Ana"), "n": .int(Int64(round))]
            )
            claims.amr = ["pwd"]
            var written = try claims.json()
            let at = Int.random(in: 0..<written.count, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: written[at] = alphabet.randomElement(using: &generator)!
            case 1: written.remove(at: at)
            default: written.insert(written[at], at: at)
            }
            let data = Data(written)
            let decoded = try? JSONDecoder().decode(TokenClaims.self, from: data)
            #expect(TokenClaims.read(data) == decoded, "\(String(decoding: data, as: UTF8.self))")
            if decoded != nil { read += 1 }
        }
        #expect(read > 0)
    }

    /// A token is three base64url segments: two, four, empty ones, characters outside the alphabet and an altered
    /// header are refused, whatever its bytes.
    @Test func tokensOfOtherShapesAreRefused() throws {
        let key = SigningKeys.Key(kid: "kid-1", privateKey: P256.Signing.PrivateKey(), createdAt: Date(timeIntervalSince1970: 0))
        let claims = TokenClaims(sub: "u", typ: .refresh, sid: "s", aud: "a", iss: "i", iat: 1, exp: 4_000_000_000, baasDeviceId: "d", jti: "j")
        let token = try JWT.sign(claims, key: key)
        #expect(try JWT.verify(token) { $0 == "kid-1" ? key : nil } == claims)
        let parts = token.split(separator: ".").map(String.init)
        var altered = Array(parts[2])
        altered[10] = altered[10] == "A" ? "B" : "A"
        let none = Base64URL.encode(Data(#"{"alg":"none","kid":"kid-1","typ":"JWT"}"#.utf8))
        let shapes: [(String, TokenError)] = [
            (parts[0] + "." + parts[1], .malformed), (token + ".", .malformed), (token + "." + parts[2], .malformed),
            (parts[0] + ".." + parts[2], .badSignature), ("." + parts[1] + "." + parts[2], .malformed), (parts[0] + "." + parts[1] + ".", .badSignature),
            (token + "é", .malformed), ("é" + token, .malformed), (token.replacingOccurrences(of: ".", with: "。"), .malformed),
            (none + "." + parts[1] + "." + parts[2], .badSignature), (parts[0] + "." + parts[1] + "." + String(altered), .badSignature),
            ("", .malformed), ("..", .malformed),
            // A dot with a combining mark is one Character but still a "." byte: refused either way.
            (parts[0] + ".\u{301}" + parts[1] + "." + parts[2], .malformed), (parts[0] + "." + parts[1] + ".\u{301}" + parts[2], .malformed),
        ]
        for (shape, expected) in shapes {
            #expect(throws: expected, "\(shape)") { try JWT.verify(shape) { $0 == "kid-1" ? key : nil } }
        }
    }
}
