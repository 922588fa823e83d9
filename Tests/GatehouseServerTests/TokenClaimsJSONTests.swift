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
}
