import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import HTTPTypes
import GatehouseWire
import Testing

/// Tokens verified once are not verified again while their key is trusted (``VerifiedTokens``); nothing else about
/// them is taken on trust.
@Suite struct VerifiedTokensTests {
    static func claims(_ subject: String) -> TokenClaims {
        TokenClaims(sub: subject, typ: .refresh, sid: "s-\(subject)", aud: "app", iss: "http://127.0.0.1", iat: 0, exp: 4_000_000_000, baasDeviceId: "d")
    }

    static func key(_ day: Double) -> SigningKeys.Key {
        SigningKeys.Key(kid: "kid-\(Int(day))", privateKey: P256.Signing.PrivateKey(), createdAt: Date(timeIntervalSince1970: day * 86_400))
    }

    @Test func aTokenVerifiedOnceIsRememberedAndAnAlteredOneNever() throws {
        let key = Self.key(1)
        let keys = SigningKeys(keys: [key])
        let token = try JWT.sign(Self.claims("ana"), key: key)
        #expect(try keys.verify(token) == Self.claims("ana"))
        #expect(keys.verified.count == 1)
        #expect(try keys.verify(token) == Self.claims("ana"))
        #expect(keys.verified.count == 1)

        // The same claims with another signature, and a signature from a key the server never had: refused each
        // time, never remembered.
        let signature = token.split(separator: ".")[2]
        let altered = token.dropLast(signature.count) + String(signature.reversed())
        let stranger = try JWT.sign(Self.claims("ana"), key: SigningKeys.Key(kid: key.kid, privateKey: P256.Signing.PrivateKey(), createdAt: Date()))
        for forged in [String(altered), stranger] {
            for _ in 0..<2 { #expect(throws: TokenError.self) { try keys.verify(forged) } }
        }
        #expect(keys.verified.count == 1)
    }

    /// The cache compares bytes, not `String`'s canonical equivalence: the remembered token with one "K" spelled as
    /// the Kelvin sign (U+212A, canonically "K") is an equal `String` but another token, verified (and refused) in full.
    @Test func anEquivalentSpellingOfARememberedTokenIsAnotherToken() throws {
        let key = Self.key(1)
        let keys = SigningKeys(keys: [key])
        // A refresh token's MAC is the same for the same claims: another `iat` until one has a "K".
        var claims = Self.claims("di")
        var token = try JWT.sign(claims, key: key)
        while !token.contains("K") {
            claims.iat += 1
            token = try JWT.sign(claims, key: key)
        }
        #expect(try keys.verify(token).sub == "di")
        let kelvin = token.replacingOccurrences(of: "K", with: "\u{212A}")
        #expect(kelvin == token)
        #expect(Array(kelvin.utf8) != Array(token.utf8))
        #expect(throws: TokenError.self) { try keys.verify(kelvin) }
        #expect(keys.verified.count == 1)
        #expect(try keys.verify(token).sub == "di")
    }

    /// A token longer than ``VerifiedTokens/maxTokenBytes`` (an access token with large custom data) is verified at
    /// every use and never held.
    @Test func aLongTokenIsVerifiedButNotRemembered() throws {
        let key = Self.key(1)
        let keys = SigningKeys(keys: [key])
        var claims = Self.claims("cy")
        claims.userData = ["notes": .string(String(repeating: "x", count: VerifiedTokens.maxTokenBytes))]
        let token = try JWT.sign(claims, key: key)
        #expect(token.utf8.count > VerifiedTokens.maxTokenBytes)
        #expect(try keys.verify(token) == claims)
        #expect(keys.verified.count == 0)
    }

    /// A retired key's tokens are refused at once, remembered or not.
    @Test func aRememberedTokenOfARetiredKeyIsRefused() throws {
        let (old, new) = (Self.key(1), Self.key(2))
        let keys = SigningKeys(keys: [old, new])
        let token = try JWT.sign(Self.claims("bo"), key: old)
        #expect(try keys.verify(token).sub == "bo")
        keys.replace(with: SigningKeys(keys: [new]))
        #expect(throws: TokenError.unknownKey) { try keys.verify(token) }
    }

    /// `server.verifiedTokenCache: 0`: every token is verified at every use, and an altered one is refused as ever.
    @Test func withoutTheCacheEveryUseIsVerified() throws {
        let key = Self.key(1)
        let keys = SigningKeys(keys: [key], verifiedCapacity: 0)
        let token = try JWT.sign(Self.claims("ed"), key: key)
        for _ in 0..<3 { #expect(try keys.verify(token) == Self.claims("ed")) }
        #expect(keys.verified.count == 0)
        #expect(!keys.verified.remembers)
        var altered = Array(token)
        let inSignature = altered.count - 20
        altered[inSignature] = altered[inSignature] == "A" ? "B" : "A"
        for _ in 0..<2 { #expect(throws: TokenError.badSignature) { try keys.verify(String(altered)) } }
        #expect(keys.verified.count == 0)
        keys.replace(with: SigningKeys(keys: [Self.key(2)]))
        #expect(throws: TokenError.unknownKey) { try keys.verify(token) }
    }

    /// `server.verifiedTokenCache` reaches the running server: with 0 its reads verify the token at every use, with
    /// a size they remember it.
    @Test(arguments: [0, 16])
    func theServerUsesTheConfiguredCache(size: Int) async throws {
        var configuration = testConfiguration()
        configuration.server.verifiedTokenCache = size
        try await withGatehouse(configuration) { gatehouse, client in
            let session = try await client.signUp("cache-\(size)@example.com")
            for _ in 0..<2 { #expect(try await client.call(Path.profile, .get, bearer: session.accessToken).status == .ok) }
            #expect(gatehouse.env.keys.verified.remembers == (size > 0))
            #expect(gatehouse.env.keys.verified.count == (size > 0 ? 1 : 0))
        }
    }

    /// At most `capacity` entries; the ones in use stay.
    @Test func theCacheIsBoundedAndKeepsWhatIsInUse() throws {
        let cache = VerifiedTokens(capacity: 4)
        let tokens = (0..<10).map { SecretText("token \($0)") }
        cache.remember(tokens[0], kid: "k", claims: Self.claims("0"))
        for (index, token) in tokens.enumerated().dropFirst() {
            cache.remember(token, kid: "k", claims: Self.claims("\(index)"))
            #expect(cache.lookUp(tokens[0])?.claims.sub == "0", "the token in use stays (after \(index) others)")
            #expect(cache.count <= 4)
        }
        #expect(cache.lookUp(tokens[1]) == nil)
        #expect(cache.lookUp(tokens[9])?.claims.sub == "9")
    }
}
