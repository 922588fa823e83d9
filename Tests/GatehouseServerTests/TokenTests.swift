import GatehouseArgon2
import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import GatehouseTestSupport
import Testing

@Suite struct TokenTests {
    /// Both tokens are JWTs whose claims Realm clients read; the access token is signed (ES256) and the refresh token
    /// MACed (HS256, ``RefreshTokenMACTests``), each naming the signing key.
    @Test func bothTokensAreJWTsWithIntegerTimes() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let login = try await client.signUp("vera@example.com")
            for (token, kind, algorithm) in [(login.accessToken, "access", "ES256"), (login.refreshToken, "refresh", "HS256")] {
                let parts = token.split(separator: ".", omittingEmptySubsequences: false)
                #expect(parts.count == 3)
                #expect(parts.allSatisfy { !$0.isEmpty })
                let header = try jsonSegment(parts[0])
                #expect(header["alg"] as? String == algorithm)
                #expect((header["kid"] as? String)?.isEmpty == false)

                let raw = String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self)
                // Integers, not floats: Realm clients assert on the JSON type.
                #expect(raw.firstMatch(of: /"exp":\d+[,}]/) != nil, "\(raw)")
                #expect(raw.firstMatch(of: /"iat":\d+[,}]/) != nil, "\(raw)")
                let claims = try jwtPayload(token)
                #expect(claims["sub"] as? String == login.userId)
                #expect(claims["typ"] as? String == kind)
                #expect(claims["iat"] as? Int == Int(clock.now.timeIntervalSince1970))
            }
            let access = try jwtPayload(login.accessToken)
            #expect(access["exp"] as? Int == Int(clock.now.timeIntervalSince1970) + 1800)
            #expect((access["user_data"] as? [String: Any])?.isEmpty == true)
            let refresh = try jwtPayload(login.refreshToken)
            #expect(refresh["exp"] as? Int == Int(clock.now.timeIntervalSince1970) + 5_184_000)
        }
    }

    @Test func tokensVerifyWithTheJWKS() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("wes@example.com")
            let jwks = try await client.call("/.well-known/jwks.json", .get).decode(JWKS.self)
            let parts = login.accessToken.split(separator: ".")
            let kid = try jsonSegment(parts[0])["kid"] as? String
            let jwk = try #require(jwks.keys.first { $0.kid == kid })
            #expect(jwk.kty == "EC" && jwk.crv == "P-256" && jwk.alg == "ES256")
            let x = try #require(Base64URL.decode(jwk.x))
            let y = try #require(Base64URL.decode(jwk.y))
            let key = try P256.Signing.PublicKey(x963Representation: [0x04] + x + y)
            let signatureBytes = try #require(Base64URL.decode(parts[2]))
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
            #expect(key.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
            #expect(!key.isValidSignature(signature, for: Data("\(parts[0]).e30".utf8)))
        }
    }

    @Test func tamperedAndUnsignedTokensAreRefused() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("xena@example.com")
            let parts = login.refreshToken.split(separator: ".").map(String.init)
            var claims = try jwtPayload(login.refreshToken)
            claims["sub"] = "000000000000000000000000"
            let forgedPayload = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims))
            let noneHeader = Base64URL.encode(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
            for token in [
                "\(parts[0]).\(forgedPayload).\(parts[2])",
                "\(noneHeader).\(parts[1]).",
                "\(noneHeader).\(parts[1]).\(parts[2])",
                "\(parts[0]).\(parts[1])",
            ] {
                let reply = try await client.call(Path.session, bearer: token)
                #expect(reply.status == .unauthorized)
                #expect(reply.error?.errorCode == .invalidSession)
            }
        }
    }

    @Test func aTokenOfTheWrongKindIsRefused() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("yann@example.com")
            let asRefresh = try await client.call(Path.session, bearer: login.accessToken)
            #expect(asRefresh.status == .unauthorized)
            #expect(asRefresh.error?.errorCode == .invalidSession)
            let asAccess = try await client.call(Path.profile, .get, bearer: login.refreshToken)
            #expect(asAccess.status == .unauthorized)
            #expect(asAccess.error?.errorCode == .invalidSession)
        }
    }

    /// n / 2 for P-256, computed here from n's hex (not from the server's constant): the largest low S.
    static let halfOrder: [UInt8] = {
        let hex = Array("FFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551".utf8)
        let n = stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
        var half = [UInt8](repeating: 0, count: 32)
        var carry: UInt8 = 0
        for (index, byte) in n.enumerated() {
            half[index] = (byte >> 1) | carry
            carry = (byte & 1) << 7
        }
        return half
    }()

    static func isLowS(_ signature: [UInt8]) -> Bool {
        let s = Array(signature[32...])
        return s == halfOrder || s.lexicographicallyPrecedes(halfOrder)
    }

    /// Every signature is written in its canonical form, s ≤ n/2: forty access tokens, each of which would have a high
    /// s half of the time otherwise.
    @Test func everyTokenIsSignedWithTheLowS() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("low@example.com")
            var tokens = [login.accessToken]  // the refresh token carries a MAC, no signature (``RefreshTokenMACTests``)
            for _ in 0..<39 { tokens.append(try await client.call(Path.session, bearer: login.refreshToken).decode(SessionResponse.self).accessToken) }
            for token in tokens {
                let signature = try #require(Base64URL.decode(String(token.split(separator: ".")[2])))
                #expect(Self.isLowS(Array(signature)), "\(token)")
            }
        }
    }

    /// An access token has one spelling: its signature's other valid form (r, n − s) is refused, so a service that
    /// deny-lists or caches access tokens by their text cannot be walked around. A refresh token's other form still
    /// works: those signed before signatures were canonical (good for 60 days), and before refresh tokens carried a
    /// MAC instead, must keep their sessions.
    @Test func theOtherSpellingOfAnAccessTokenIsRefused() async throws {
        try await withGatehouse { gatehouse, client in
            let login = try await client.signUp("mall@example.com")
            let key = gatehouse.env.keys.current.publicKey
            func otherSpelling(_ token: String) throws -> String {
                let parts = token.split(separator: ".").map(String.init)
                let signature = Array(try #require(Base64URL.decode(parts[2])))
                let other = ECDSALowS.negated(signature)
                // BoringSSL says both spellings are valid signatures of the same bytes, and the second has the high s.
                let input = Data("\(parts[0]).\(parts[1])".utf8)
                #expect(key.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: other), for: input))
                #expect(!Self.isLowS(other) && other != signature)
                return "\(parts[0]).\(parts[1]).\(Base64URL.encode(other))"
            }
            #expect(try await client.call(Path.profile, .get, bearer: login.accessToken).status == .ok)
            let refused = try await client.call(Path.profile, .get, bearer: try otherSpelling(login.accessToken))
            #expect(refused.status == .unauthorized)
            #expect(refused.error?.errorCode == .invalidSession)
            // The login's refresh token as one made before refresh tokens were MACed: its claims signed ES256.
            let payload = try #require(Base64URL.decode(login.refreshToken.split(separator: ".")[1]))
            let claims = try #require(TokenClaims.read(payload))
            let signed = try RefreshTokenMACTests.signedES256(claims, key: gatehouse.env.keys.current)
            #expect(try await client.call(Path.session, bearer: try otherSpelling(signed)).status == .created)
        }
    }

    @Test func lowSBoundaries() {
        let r = [UInt8](repeating: 7, count: 32)
        let one = r + [UInt8](repeating: 0, count: 31) + [1]
        var aboveHalf = Self.halfOrder
        aboveHalf[31] += 1
        #expect(ECDSALowS.isLow(one))
        #expect(ECDSALowS.isLow(r + Self.halfOrder))
        #expect(!ECDSALowS.isLow(r + aboveHalf))
        // n − (n/2 + 1) = n/2 (n is odd), and n − 1 is the other spelling of 1.
        #expect(ECDSALowS.normalized(r + aboveHalf) == r + Self.halfOrder)
        #expect(ECDSALowS.negated(ECDSALowS.negated(one)) == one)
        #expect(ECDSALowS.normalized(ECDSALowS.negated(one)) == one)
        #expect(ECDSALowS.normalized(one) == one)
        #expect(!ECDSALowS.isLow(one.dropLast()))
    }
}
