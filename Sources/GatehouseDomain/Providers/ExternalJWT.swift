import Crypto
import Foundation
import GatehouseWire
import CryptoExtras

/// A key that verifies JWTs issued by someone else: an app's backend (custom JWT), Google, Apple.
package struct JWTVerificationKey: Sendable {
    package enum Material: Sendable {
        case hmac(SymmetricKey)
        case rsa(_RSA.Signing.PublicKey)
        case p256(P256.Signing.PublicKey)
    }

    /// When set, only tokens whose header names this `kid` use the key.
    package var kid: String?
    package var material: Material

    package init(kid: String? = nil, material: Material) {
        self.kid = kid
        self.material = material
    }

    /// The JWS `alg` this key verifies: HS256, RS256 or ES256. No other algorithm is ever accepted.
    package var algorithm: String {
        switch material {
        case .hmac: "HS256"
        case .rsa: "RS256"
        case .p256: "ES256"
        }
    }

    /// A key from a JWK (RFC 7517): `kty` RSA (`n`, `e`), EC on P-256 (`x`, `y`) or oct (`k`). Nil for anything
    /// else (other curves, encryption keys), which a JWKS may well contain and which are skipped.
    package init?(jwk: [String: JSONValue]) {
        guard case .string(let kty)? = jwk["kty"] else { return nil }
        if case .string(let use)? = jwk["use"], use != "sig" { return nil }
        func bytes(_ name: String) -> Data? {
            guard case .string(let text)? = jwk[name] else { return nil }
            return Base64URL.decode(text)
        }
        if case .string(let kid)? = jwk["kid"] { self.kid = kid }
        switch kty {
        case "RSA":
            guard let n = bytes("n"), let e = bytes("e"), let key = try? _RSA.Signing.PublicKey(n: n, e: e) else { return nil }
            material = .rsa(key)
        case "EC":
            guard case .string("P-256")? = jwk["crv"], let x = bytes("x"), let y = bytes("y"), x.count == 32, y.count == 32,
                let key = try? P256.Signing.PublicKey(x963Representation: [0x04] + x + y)
            else { return nil }
            material = .p256(key)
        case "oct":
            guard let k = bytes("k"), k.count >= 32 else { return nil }
            material = .hmac(SymmetricKey(data: k))
        default:
            return nil
        }
        if case .string(let alg)? = jwk["alg"], alg != algorithm { return nil }
    }

    package func isValidSignature(_ signature: Data, for input: Data) -> Bool {
        switch material {
        case .hmac(let key):
            return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: input, using: key)
        case .rsa(let key):
            return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: input, padding: .insecurePKCS1v1_5)
        case .p256(let key):
            guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { return false }
            return key.isValidSignature(signature, for: input)
        }
    }
}

/// Why an external token was refused. The message never contains the token.
package struct ExternalTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }

    /// What Realm users know from App Services for a token that is not three dot-separated parts.
    package static let segments = ExternalTokenError("invalid number of segments")
    package static let malformed = ExternalTokenError("token is malformed")
    package static let unsupportedAlgorithm = ExternalTokenError("signing method is not allowed (only HS256, RS256 and ES256 are)")
    package static let unknownKey = ExternalTokenError("token is signed with an unknown key")
    package static let badSignature = ExternalTokenError("signature is invalid")
    package static let expired = ExternalTokenError("token is expired")
    package static let notYetValid = ExternalTokenError("token is not valid yet")
    package static let missingExpiry = ExternalTokenError("token has no exp claim")
    package static let missingSubject = ExternalTokenError("token has no sub claim")
    package static let wrongAudience = ExternalTokenError("token is not for this app (aud)")
    package static let wrongIssuer = ExternalTokenError("token is from another issuer (iss)")
    package static let duplicateKey = ExternalTokenError("token names a header parameter or claim twice")
    package static let criticalExtension = ExternalTokenError("token lists critical extensions (crit), which are not understood")
    package static let badClaimType = ExternalTokenError("a registered claim has the wrong type")
    package static let tooLong = ExternalTokenError("token lives longer than this provider allows")
    package static let tooLarge = ExternalTokenError("token is larger than \(ExternalJWT.maxLength) bytes")
    package static let wrongAuthorizedParty = ExternalTokenError("token for several audiences was not issued to this app (azp)")
}

/// A verified external JWT: its claims.
package struct VerifiedJWT: Sendable {
    package var claims: [String: JSONValue]

    package var subject: String? { if case .string(let s)? = claims["sub"] { s } else { nil } }

    /// A string claim, or nil when absent or not a string.
    package func string(_ name: String) -> String? { if case .string(let s)? = claims[name] { s } else { nil } }

    package init(claims: [String: JSONValue]) {
        self.claims = claims
    }
}

/// What a verified token must also satisfy.
package struct JWTExpectations: Sendable {
    /// `iss` must be one of these; any issuer when empty.
    package var issuers: [String] = []
    /// `aud` (a string or an array) must contain one of these; any audience when empty.
    package var audiences: [String] = []
    /// Clock skew tolerated on `exp`, `nbf` and `iat`, in seconds.
    package var leeway: TimeInterval = 60
    /// The longest a token may still live (`exp` − now) and may have been issued for (`exp` − `iat`), in seconds.
    package var maxLifetime: TimeInterval = 86_400
    /// OpenID Connect's rule for an ID token (Core §3.1.3.7): one with several audiences must name the party it was
    /// issued to (`azp`), and that must be one of ``audiences``. A token for one audience may name another `azp`
    /// (Google's ID token an Android client asks for on behalf of its server).
    package var authorizedParty = false

    package init(
        issuers: [String] = [], audiences: [String] = [], leeway: TimeInterval = 60, maxLifetime: TimeInterval = 86_400, authorizedParty: Bool = false
    ) {
        self.issuers = issuers
        self.audiences = audiences
        self.leeway = leeway
        self.maxLifetime = maxLifetime
        self.authorizedParty = authorizedParty
    }
}

/// Verifies compact JWS tokens from other issuers: structure, algorithm (HS256, RS256, ES256 only: never `none`,
/// never an algorithm the key was not made for), signature, `exp` (required), `nbf`, `iat`, `iss`, `aud`.
///
/// Parsed strictly, so that the issuer and Gatehouse cannot read one token two ways: a header or payload naming a
/// key twice is refused, a `crit` header is refused (RFC 7515 §4.1.11: Gatehouse understands no extension, `b64`
/// included), registered claims must have their types (`exp`, `nbf`, `iat` numbers; `iss`, `sub` strings; `aud` a
/// string or strings), and a token may live at most ``JWTExpectations/maxLifetime``.
///
/// ECDSA signatures with a high `s` are accepted, as by the issuers' own libraries: a second valid signature of the
/// same token (malleability) matters only to a system that uses a token's bytes as its identity (a replay cache keyed
/// on the signature). Gatehouse keys logins on the verified claims, never on the token's bytes.
package enum ExternalJWT {
    /// The longest token read, in bytes: claims are profile data, not documents.
    package static let maxLength = 16_384

    /// The `kid` and `alg` of a token's header, without verifying anything (to pick keys). Refuses a header with a
    /// duplicate parameter or a `crit` list.
    package static func header(_ token: String) throws(ExternalTokenError) -> (alg: String, kid: String?) {
        let parts = try split(token)
        guard let data = Base64URL.decode(parts[0]), case .object(let header)? = try? JSONDecoder().decode(JSONValue.self, from: data),
            case .string(let alg)? = header["alg"]
        else { throw .malformed }
        try strict(data)
        guard header["crit"] == nil else { throw .criticalExtension }
        switch header["kid"] {
        case nil: return (alg, nil)
        case .string(let kid)?: return (alg, kid)
        default: throw .malformed
        }
    }

    package static func verify(_ token: String, keys: [JWTVerificationKey], expect: JWTExpectations, now: Date) throws(ExternalTokenError) -> VerifiedJWT {
        let parts = try split(token)
        let (alg, kid) = try header(token)
        guard ["HS256", "RS256", "ES256"].contains(alg) else { throw .unsupportedAlgorithm }
        // Only keys made for the token's algorithm: an RSA public key is never used as an HMAC secret.
        let candidates = keys.filter { $0.algorithm == alg && (kid == nil || $0.kid == nil || $0.kid == kid) }
        guard !candidates.isEmpty else { throw .unknownKey }
        guard let signature = Base64URL.decode(parts[2]) else { throw .malformed }
        let input = Data((parts[0] + "." + parts[1]).utf8)
        guard candidates.contains(where: { $0.isValidSignature(signature, for: input) }) else { throw .badSignature }
        guard let payload = Base64URL.decode(parts[1]), case .object(let claims)? = try? JSONDecoder().decode(JSONValue.self, from: payload)
        else { throw .malformed }
        try strict(payload)
        try checkTypes(claims)

        let time = now.timeIntervalSince1970
        guard let exp = number(claims["exp"]) else { throw .missingExpiry }
        guard exp + expect.leeway > time else { throw .expired }
        guard exp - time <= expect.maxLifetime + expect.leeway else { throw .tooLong }
        if let nbf = number(claims["nbf"]), nbf - expect.leeway > time { throw .notYetValid }
        if let iat = number(claims["iat"]) {
            if iat - expect.leeway > time { throw .notYetValid }
            guard exp - iat <= expect.maxLifetime + expect.leeway else { throw .tooLong }
        }
        if !expect.issuers.isEmpty {
            guard case .string(let iss)? = claims["iss"], expect.issuers.contains(iss) else { throw .wrongIssuer }
        }
        if !expect.audiences.isEmpty {
            let audiences: [String] = switch claims["aud"] {
            case .string(let aud)?: [aud]
            case .array(let values)?: values.compactMap { if case .string(let s) = $0 { s } else { nil } }
            default: []
            }
            guard audiences.contains(where: expect.audiences.contains) else { throw .wrongAudience }
            if expect.authorizedParty, audiences.count > 1 {
                guard case .string(let azp)? = claims["azp"], expect.audiences.contains(azp) else { throw .wrongAuthorizedParty }
            }
        }
        return VerifiedJWT(claims: claims)
    }

    /// Refuses a header or payload that parsers may read differently (``StrictJSON``).
    private static func strict(_ json: Data) throws(ExternalTokenError) {
        switch StrictJSON.first(in: json) {
        case .duplicate?: throw .duplicateKey
        case .notJSON(let what)?: throw ExternalTokenError("token is malformed: \(what) is not JSON")
        case .unterminated?: throw .malformed
        case nil: break
        }
    }

    /// Registered claims, when present, must have their types: a `nbf` the issuer wrote as a string must not be
    /// read as absent.
    private static func checkTypes(_ claims: [String: JSONValue]) throws(ExternalTokenError) {
        for name in ["exp", "nbf", "iat"] where claims[name] != nil {
            guard number(claims[name]) != nil else { throw .badClaimType }
        }
        for name in ["iss", "sub", "jti"] {
            switch claims[name] {
            case nil, .string?: break
            default: throw .badClaimType
            }
        }
        switch claims["aud"] {
        case nil, .string?: break
        case .array(let values)?:
            guard values.allSatisfy({ if case .string = $0 { true } else { false } }) else { throw .badClaimType }
        default: throw .badClaimType
        }
    }

    private static func split(_ token: String) throws(ExternalTokenError) -> [Substring] {
        guard token.utf8.count <= maxLength else { throw .tooLarge }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .segments }
        guard !parts[0].isEmpty, !parts[1].isEmpty else { throw .malformed }
        return parts
    }

    private static func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let i)?: Double(i)
        case .double(let d)?: d
        default: nil
        }
    }
}
