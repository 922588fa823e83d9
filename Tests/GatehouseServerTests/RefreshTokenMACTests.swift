import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Testing

/// Client API refresh tokens carry an HMAC-SHA256 under a server secret derived from the signing key, not an ES256
/// signature: no one holding the JWKS can verify one, so no resource server takes one for an access token. (That a
/// standard library refuses them, from the issuer alone, is ``DiscoveryTests``'s.)
@Suite struct RefreshTokenMACTests {
    static let key = SigningKeys.Key(kid: "kid-1", privateKey: P256.Signing.PrivateKey(), createdAt: Date(timeIntervalSince1970: 0))

    static func claims(_ typ: TokenClaims.Kind) -> TokenClaims {
        TokenClaims(
            sub: "u", typ: typ, sid: "s", aud: "app", iss: "http://127.0.0.1", iat: 1, exp: 4_000_000_000, baasDeviceId: "d",
            jti: typ == .refresh ? "secret" : nil
        )
    }

    static func header(_ token: String) throws -> [String: Any] {
        try jsonSegment(try #require(token.split(separator: ".").first))
    }

    /// `header.payload` MACed by `key` under HS256, as a token Gatehouse did not write.
    static func macToken(_ claims: TokenClaims, key: SymmetricKey, kid: String = "kid-1") throws -> String {
        let input = JWT.header(kid: kid, algorithm: "HS256") + "." + Base64URL.encode(try claims.json())
        return input + "." + Base64URL.encode(Array(HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: key)))
    }

    /// `claims` signed ES256 whatever their kind, as refresh tokens were before they carried a MAC: through the generic
    /// `JWT.sign`, which a call with `TokenClaims` itself would not reach.
    static func signedES256<Claims: Encodable>(_ claims: Claims, key: SigningKeys.Key) throws -> String {
        try JWT.sign(claims, key: key)
    }

    @Test func aRefreshTokenIsMACedAndAnAccessTokenSigned() throws {
        let refresh = try JWT.sign(Self.claims(.refresh), key: Self.key)
        let access = try JWT.sign(Self.claims(.access), key: Self.key)
        #expect(try Self.header(refresh)["alg"] as? String == "HS256" && Self.header(refresh)["kid"] as? String == "kid-1")
        #expect(try Self.header(access)["alg"] as? String == "ES256")
        #expect(try JWT.verify(refresh) { $0 == "kid-1" ? Self.key : nil } == Self.claims(.refresh))
        #expect(try JWT.verify(access) { $0 == "kid-1" ? Self.key : nil } == Self.claims(.access))

        // The MAC is no ECDSA signature: the public key the JWKS publishes verifies nothing of it.
        let parts = refresh.split(separator: ".").map(String.init)
        let mac = try #require(Base64URL.decode(parts[2]))
        #expect(mac.count == 32)
        let signature = try? P256.Signing.ECDSASignature(rawRepresentation: mac + mac)
        #expect(signature.map { Self.key.publicKey.isValidSignature($0, for: Data((parts[0] + "." + parts[1]).utf8)) } != true)
    }

    /// Only refresh tokens are MACed: a MAC under the very key Gatehouse uses never makes an access token, and a MAC
    /// under another key, another purpose's key from the same signing key, or a retired key's is refused.
    @Test func aMACMakesNoAccessTokenAndOnlyTheRefreshKeysMACVerifies() throws {
        let keys = SigningKeys(keys: [Self.key])
        let accessByMAC = try Self.macToken(Self.claims(.access), key: Self.key.refreshMAC)
        #expect(throws: TokenError.badSignature) { try keys.verify(accessByMAC) }

        let otherPurpose = try #require(keys.macKey(kid: "kid-1", purpose: "page csrf"))
        let otherKey = SigningKeys.derive(from: P256.Signing.PrivateKey(), purpose: JWT.refreshMACPurpose)
        for forged in [try Self.macToken(Self.claims(.refresh), key: otherPurpose), try Self.macToken(Self.claims(.refresh), key: otherKey)] {
            #expect(throws: TokenError.badSignature) { try keys.verify(forged) }
        }
        #expect(keys.verified.count == 0)
        let good = try Self.macToken(Self.claims(.refresh), key: Self.key.refreshMAC)
        #expect(try keys.verify(good) == Self.claims(.refresh))
        // Signed under a key the server does not hold (retired): unknown, as for a signature.
        let retired = SigningKeys(keys: [SigningKeys.Key(kid: "kid-2", privateKey: P256.Signing.PrivateKey(), createdAt: Date())])
        #expect(throws: TokenError.unknownKey) { try retired.verify(good) }
    }

    /// Refresh tokens made before they were MACed are ES256 and live out their lifetime: they still verify, and with
    /// another signature or key they are refused as before.
    @Test func aRefreshTokenSignedBeforeStillVerifies() throws {
        let keys = SigningKeys(keys: [Self.key])
        let claims = Self.claims(.refresh)
        let legacy = try Self.signedES256(claims, key: Self.key)
        #expect(try Self.header(legacy)["alg"] as? String == "ES256")
        #expect(try keys.verify(legacy) == claims)
        let stranger = try Self.signedES256(claims, key: SigningKeys.Key(kid: "kid-1", privateKey: P256.Signing.PrivateKey(), createdAt: Date()))
        #expect(throws: TokenError.badSignature) { try keys.verify(stranger) }
    }
}
