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
    @Test func bothTokensAreES256JWTsWithIntegerTimes() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let login = try await client.signUp("vera@example.com")
            for (token, kind) in [(login.accessToken, "access"), (login.refreshToken, "refresh")] {
                let parts = token.split(separator: ".", omittingEmptySubsequences: false)
                #expect(parts.count == 3)
                #expect(parts.allSatisfy { !$0.isEmpty })
                let header = try jsonSegment(parts[0])
                #expect(header["alg"] as? String == "ES256")
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
}
