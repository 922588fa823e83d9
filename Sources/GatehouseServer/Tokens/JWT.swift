import Crypto
import Foundation
import GatehouseWire

/// Claims of the tokens Gatehouse issues. Realm clients parse both tokens and assert that `exp` and `iat` are
/// integers, so they are `Int64` here, never dates or doubles.
struct TokenClaims: Codable, Sendable, Hashable {
    enum Kind: String, Codable, Sendable {
        case access
        case refresh
    }

    /// The user id.
    var sub: String
    /// Tells access from refresh tokens; using one as the other is refused.
    var typ: Kind
    /// The session (refresh token) this token belongs to.
    var sid: String
    /// The app id.
    var aud: String
    /// The server's public URL.
    var iss: String
    var iat: Int64
    var exp: Int64
    /// Device id of the session, under the name realm-web reads.
    var baasDeviceId: String
    /// Custom user data (access tokens): `{}` until it exists.
    var userData: [String: JSONValue]?
    /// The session's secret (refresh tokens only); the server stores its SHA-256.
    var jti: String?

    enum CodingKeys: String, CodingKey {
        case sub, typ, sid, aud, iss, iat, exp, jti
        case baasDeviceId = "baas_device_id"
        case userData = "user_data"
    }
}

/// Why a token was refused. Never includes the token itself.
struct TokenError: Error, Hashable, Sendable, CustomStringConvertible {
    var description: String
    static let malformed = TokenError(description: "invalid session: malformed token")
    static let badSignature = TokenError(description: "invalid session: signature is invalid")
    static let unknownKey = TokenError(description: "invalid session: signing key is unknown")
    static func wrongKind(expected: TokenClaims.Kind) -> TokenError {
        TokenError(description: "invalid session: expected a\(expected == .access ? "n access" : " refresh") token")
    }
}

/// Compact JWS (ES256) encoding and decoding.
enum JWT {
    private struct Header: Codable {
        var alg: String
        var typ: String?
        var kid: String?
    }

    static func sign(_ claims: some Encodable, key: P256.Signing.PrivateKey, kid: String) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = Base64URL.encode(try encoder.encode(Header(alg: "ES256", typ: "JWT", kid: kid)))
        let payload = Base64URL.encode(try encoder.encode(claims))
        let signingInput = header + "." + payload
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// The `kid` of a token's header, unverified (to pick the key); nil when there is none or the token is malformed.
    static func kid(_ token: String) -> String? {
        guard let end = token.firstIndex(of: "."), token.distance(from: token.startIndex, to: end) < 1024,
            let data = Base64URL.decode(token[..<end]), let header = try? JSONDecoder().decode(Header.self, from: data)
        else { return nil }
        return header.kid
    }

    /// Checks the structure, algorithm and signature, and returns the claims. Expiry and kind are the caller's.
    static func verify(_ token: String, keys: (String) -> P256.Signing.PublicKey?) throws(TokenError) -> TokenClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, token.utf8.count < 16_384,
            let headerData = Base64URL.decode(parts[0]),
            let payloadData = Base64URL.decode(parts[1]),
            let signatureData = Base64URL.decode(parts[2]),
            let header = try? JSONDecoder().decode(Header.self, from: headerData)
        else { throw .malformed }
        guard header.alg == "ES256", let kid = header.kid else { throw .badSignature }
        guard let key = keys(kid) else { throw .unknownKey }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { throw .badSignature }
        guard let claims = try? JSONDecoder().decode(TokenClaims.self, from: payloadData) else { throw .malformed }
        return claims
    }
}

/// base64url without padding (RFC 7515 §2).
enum Base64URL {
    static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: some StringProtocol) -> Data? {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !s.contains("=") else { return nil }
        while s.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s)
    }
}
