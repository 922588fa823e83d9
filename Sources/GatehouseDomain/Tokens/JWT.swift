import Crypto
import Foundation
import GatehouseWire

/// Claims of the tokens Gatehouse issues. Realm clients parse both tokens and assert that `exp` and `iat` are
/// integers, so they are `Int64` here, never dates or doubles.
package struct TokenClaims: Codable, Sendable, Hashable {
    package enum Kind: String, Codable, Sendable {
        case access
        case refresh
    }

    /// The user id.
    package var sub: String
    /// Tells access from refresh tokens; using one as the other is refused.
    package var typ: Kind
    /// The session (refresh token) this token belongs to.
    package var sid: String
    /// The app id.
    package var aud: String
    /// The server's public URL.
    package var iss: String
    package var iat: Int64
    package var exp: Int64
    /// Device id of the session, under the name realm-web reads.
    package var baasDeviceId: String
    /// Custom user data (access tokens): `{}` until it exists.
    package var userData: [String: JSONValue]?
    /// The session's secret (refresh tokens only); the server stores its SHA-256.
    package var jti: String?
    /// Access tokens: how the session was proven (RFC 8176 values, ``AuthenticationMethod``).
    package var amr: [String]?
    /// Access tokens: when the session's user last proved a first-party credential (seconds since 1970).
    package var authTime: Int64?

    package enum CodingKeys: String, CodingKey {
        case sub, typ, sid, aud, iss, iat, exp, jti, amr
        case baasDeviceId = "baas_device_id"
        case userData = "user_data"
        case authTime = "auth_time"
    }

    package init(
        sub: String, typ: Kind, sid: String, aud: String, iss: String, iat: Int64, exp: Int64, baasDeviceId: String,
        userData: [String: JSONValue]? = nil, jti: String? = nil
    ) {
        self.sub = sub
        self.typ = typ
        self.sid = sid
        self.aud = aud
        self.iss = iss
        self.iat = iat
        self.exp = exp
        self.baasDeviceId = baasDeviceId
        self.userData = userData
        self.jti = jti
    }
}

extension TokenClaims {
    /// The claims as JSON, keys sorted, slashes unescaped: byte for byte what `JSONEncoder` with `.sortedKeys` and
    /// `.withoutEscapingSlashes` writes (`TokenClaimsJSONTests` compares the two), written by hand because every refresh signs
    /// one and Foundation's encoder was a tenth of a refresh's instructions (`Benchmarks/PROFILING.md`).
    package func json() throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(320)
        var first = true
        func key(_ name: StaticString) {
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            first = false
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(contentsOf: "\":".utf8)
        }
        // In the order of their JSON names.
        if let amr {
            key("amr")
            out.append(UInt8(ascii: "["))
            for (index, method) in amr.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendString(method, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        key("aud")
        JSONText.appendString(aud, to: &out)
        if let authTime {
            key("auth_time")
            out.append(contentsOf: String(authTime).utf8)
        }
        key("baas_device_id")
        JSONText.appendString(baasDeviceId, to: &out)
        key("exp")
        out.append(contentsOf: String(exp).utf8)
        key("iat")
        out.append(contentsOf: String(iat).utf8)
        key("iss")
        JSONText.appendString(iss, to: &out)
        if let jti {
            key("jti")
            JSONText.appendString(jti, to: &out)
        }
        key("sid")
        JSONText.appendString(sid, to: &out)
        key("sub")
        JSONText.appendString(sub, to: &out)
        key("typ")
        JSONText.appendString(typ.rawValue, to: &out)
        if let userData {
            key("user_data")
            JSONText.appendObject(userData, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}

extension TokenClaims {
    /// Claims as `JSONDecoder` reads them, from a verified token's payload: by ``JSONText/readObject(utf8:integers:)``
    /// (plain integers read as integers) where that reading is certainly Foundation's, which it is for every payload
    /// ``json()`` writes; anything else — a number with a fraction or an exponent, a value of an unexpected type, a
    /// duplicate key, text that is not UTF-8 — goes to `JSONDecoder`. `TokenClaimsJSONTests` compares the two.
    /// `JSONDecoder` cost about 100,000 instructions per token, a tenth of a verification beside the ECDSA.
    package static func read(_ payload: Data) -> TokenClaims? {
        if let object = JSONText.readObject(utf8: payload, integers: true), let claims = TokenClaims(reading: object) { return claims }
        return try? JSONDecoder().decode(TokenClaims.self, from: payload)
    }

    /// The claims of an object read by ``JSONText``, or nil for a missing claim or a value of another type than
    /// `Codable` would take (an optional claim may be absent or `null`; unknown keys are ignored, as `JSONDecoder` does).
    package init?(reading object: [String: JSONValue]) {
        guard case .string(let sub)? = object[CodingKeys.sub.rawValue],
            case .string(let typName)? = object[CodingKeys.typ.rawValue], let typ = Kind(rawValue: typName),
            case .string(let sid)? = object[CodingKeys.sid.rawValue],
            case .string(let aud)? = object[CodingKeys.aud.rawValue],
            case .string(let iss)? = object[CodingKeys.iss.rawValue],
            case .int(let iat)? = object[CodingKeys.iat.rawValue],
            case .int(let exp)? = object[CodingKeys.exp.rawValue],
            case .string(let baasDeviceId)? = object[CodingKeys.baasDeviceId.rawValue],
            let jti = JSONValue.optionalString(object[CodingKeys.jti.rawValue])
        else { return nil }
        self.init(sub: sub, typ: typ, sid: sid, aud: aud, iss: iss, iat: iat, exp: exp, baasDeviceId: baasDeviceId, jti: jti)
        switch object[CodingKeys.userData.rawValue] {
        case nil, .null?: userData = nil
        case .object(let data)?: userData = data
        default: return nil
        }
        switch object[CodingKeys.amr.rawValue] {
        case nil, .null?: amr = nil
        case .array(let values)?:
            var methods: [String] = []
            for value in values {
                guard case .string(let method) = value else { return nil }
                methods.append(method)
            }
            amr = methods
        default: return nil
        }
        switch object[CodingKeys.authTime.rawValue] {
        case nil, .null?: authTime = nil
        case .int(let time)?: authTime = time
        default: return nil
        }
    }
}

extension JSONValue {
    /// An optional string member as `Codable` reads it: `.some(nil)` when absent or `null`, `.some(text)` for a
    /// string, nil for any other value (which `JSONDecoder` would refuse).
    static func optionalString(_ value: JSONValue?) -> String?? {
        switch value {
        case nil, .null?: return .some(nil)
        case .string(let text)?: return .some(text)
        default: return nil
        }
    }
}

/// Why a token was refused. Never includes the token itself.
package struct TokenError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    package static let malformed = TokenError(description: "invalid session: malformed token")
    package static let badSignature = TokenError(description: "invalid session: signature is invalid")
    package static let unknownKey = TokenError(description: "invalid session: signing key is unknown")
    package static func wrongKind(expected: TokenClaims.Kind) -> TokenError {
        TokenError(description: "invalid session: expected a\(expected == .access ? "n access" : " refresh") token")
    }

    package init(description: String) {
        self.description = description
    }
}

/// Compact JWS encoding and decoding: ES256 for access tokens, HS256 under a server secret for Client API refresh tokens.
package enum JWT {
    private struct Header: Codable {
        package var alg: String
        package var typ: String?
        package var kid: String?

        /// The header as `JSONDecoder` reads it: by ``JSONText/readObject(utf8:integers:)`` where that reading is
        /// certainly Foundation's (a header of strings, as Gatehouse writes them), else by `JSONDecoder`.
        static func read(_ data: Data) -> Header? {
            if let object = JSONText.readObject(utf8: data, integers: false), case .string(let alg)? = object["alg"],
                let typ = JSONValue.optionalString(object["typ"]), let kid = JSONValue.optionalString(object["kid"])
            {
                return Header(alg: alg, typ: typ, kid: kid)
            }
            return try? JSONDecoder().decode(Header.self, from: data)
        }
    }

    /// The purpose (``SigningKeys/derive(from:purpose:)``) of the key that MACs Client API refresh tokens.
    package static let refreshMACPurpose = "client api refresh token"

    /// The base64url header of tokens signed with `kid` by `algorithm` (`ES256`, or `HS256` for refresh tokens).
    package static func header(kid: String, algorithm: String = "ES256") -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Base64URL.encode(try encoder.encode(Header(alg: algorithm, typ: "JWT", kid: kid)))
        } catch {
            preconditionFailure("encoding a JWS header of three strings cannot fail: \(error)")
        }
    }

    package static func sign(_ claims: some Encodable, key: SigningKeys.Key) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try sign(payload: try encoder.encode(claims), key: key)
    }

    /// The tokens of every session and refresh: their claims are written by ``TokenClaims/json()``, the same bytes
    /// `JSONEncoder` writes at a tenth of the cost.
    ///
    /// An access token is signed (ES256), for anyone holding the JWKS to verify. A refresh token is only ever read by
    /// Gatehouse (Realm clients parse its claims but check no signature), so it carries an HMAC-SHA256 (`HS256`) under
    /// ``SigningKeys/Key/refreshMAC``, a server secret derived from the signing key: a resource server that verifies
    /// tokens with the JWKS and checks `aud`, as `docs/operations.md` shows, refuses it, where an ES256 refresh token
    /// (same key, same `aud`, 60 days' life) would pass for an access token there. The session's secret in `jti` is
    /// what makes it a refresh token; the MAC only turns away forged ones before the database is asked, at a
    /// twentieth of a signature's cost.
    package static func sign(_ claims: TokenClaims, key: SigningKeys.Key) throws -> String {
        switch claims.typ {
        case .access: try sign(payload: try claims.json(), key: key)
        case .refresh: authenticate(payload: try claims.json(), key: key)
        }
    }

    /// A compact JWS `HS256` under ``SigningKeys/Key/refreshMAC``, with the key's `kid`: a refresh token.
    private static func authenticate(payload: some DataProtocol, key: SigningKeys.Key) -> String {
        compact(header: key.refreshHeader, payload: payload, signatureBytes: 32) { input in
            input.withUnsafeBytes { Array(HMAC<SHA256>.authenticationCode(for: $0, using: key.refreshMAC)) }
        }
    }

    /// A compact JWS `ES256` by the key: an access or ID token.
    private static func sign(payload: some DataProtocol, key: SigningKeys.Key) throws -> String {
        try compact(header: key.header, payload: payload, signatureBytes: 64) { input in
            // Hashed here from the buffer: swift-crypto's `signature(for:)` over a collection hashes it through the
            // generic `DataProtocol` path, which cost more than the SHA-256 itself.
            var hasher = SHA256()
            input.withUnsafeBytes { hasher.update(bufferPointer: $0) }
            return ECDSALowS.normalized(Array(try key.privateKey.signature(for: hasher.finalize()).rawRepresentation))
        }
    }

    /// The token is built in one byte buffer: the header, the payload's base64url, the signature `sign` makes over those
    /// bytes and its base64url (every login and refresh makes one; each `String` joined and copied cost its own
    /// allocations).
    private static func compact(
        header: String, payload: some DataProtocol, signatureBytes: Int, sign: ([UInt8]) throws -> [UInt8]
    ) rethrows -> String {
        var token: [UInt8] = []
        token.reserveCapacity(header.utf8.count + 2 + (payload.count * 4 + 2) / 3 + (signatureBytes * 4 + 2) / 3)
        token.append(contentsOf: header.utf8)
        token.append(UInt8(ascii: "."))
        Base64URL.append(payload, to: &token)
        let signature = try sign(token)
        token.append(UInt8(ascii: "."))
        Base64URL.append(signature, to: &token)
        return String(decoding: token, as: UTF8.self)
    }

    /// The `kid` of a token's header, unverified (to pick the key); nil when there is none or the token is malformed.
    package static func kid(_ token: String) -> String? {
        guard let end = token.firstIndex(of: "."), token.distance(from: token.startIndex, to: end) < 1024,
            let data = Base64URL.decode(token[..<end]), let header = Header.read(data)
        else { return nil }
        return header.kid
    }

    /// Checks the structure, algorithm and signature, and returns the claims. Expiry and kind are the caller's.
    ///
    /// The token is read on its UTF-8 bytes: its segments found by their dots, the signing input taken as it is.
    /// Splitting the `String` by characters cost more than the rest of a verification but the ECDSA itself, and every
    /// token a process has not verified before pays it (a refresh token is presented once per access token's life).
    ///
    /// `ES256` tokens are verified with the key's public key; `HS256` ones with its ``SigningKeys/Key/refreshMAC`` and
    /// must be refresh tokens (a MAC never makes an access token). Refresh tokens made before they carried a MAC are
    /// ES256 and still verify until they expire.
    package static func verify(_ token: String, keys: (String) -> SigningKeys.Key?) throws(TokenError) -> TokenClaims {
        guard token.utf8.count < 16_384 else { throw .malformed }
        var token = token
        let segments = token.withUTF8 { bytes -> (header: Data, payload: Data, signature: Data, signingInput: Data)? in
            let dot = UInt8(ascii: ".")
            // Exactly three segments: two dots.
            guard let first = bytes.firstIndex(of: dot),
                let second = bytes[(first + 1)...].firstIndex(of: dot),
                !bytes[(second + 1)...].contains(dot),
                let header = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: bytes[..<first])),
                let payload = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: bytes[(first + 1)..<second])),
                let signature = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: bytes[(second + 1)...]))
            else { return nil }
            return (header, payload, signature, Data(UnsafeBufferPointer(rebasing: bytes[..<second])))
        }
        guard let segments, let header = Header.read(segments.header) else { throw .malformed }
        let mac: Bool
        switch header.alg {
        case "ES256": mac = false
        case "HS256": mac = true
        default: throw .badSignature
        }
        guard let kid = header.kid else { throw .badSignature }
        guard let key = keys(kid) else { throw .unknownKey }
        if mac {
            // `isValidAuthenticationCode` compares in constant time.
            guard HMAC<SHA256>.isValidAuthenticationCode(segments.signature, authenticating: segments.signingInput, using: key.refreshMAC)
            else { throw .badSignature }
        } else {
            guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: segments.signature),
                key.publicKey.isValidSignature(signature, for: segments.signingInput)
            else { throw .badSignature }
        }
        guard let claims = TokenClaims.read(segments.payload) else { throw .malformed }
        if mac, claims.typ != .refresh { throw .badSignature }
        // An access token has one spelling: the signature Gatehouse wrote, with the low S (``ECDSALowS``). Refresh
        // tokens signed before signatures were written so (good for 60 days) keep their high S; a refused access token
        // only sends a client to refresh.
        if claims.typ == .access, !ECDSALowS.isLow(segments.signature) { throw .badSignature }
        return claims
    }
}

/// ECDSA P-256 signatures in their canonical, low-S form. For a valid signature (r, s), (r, n − s) is valid too, so
/// one token has two spellings that verify; a service that caches or deny-lists tokens by their text would take them
/// for two. Gatehouse writes every signature with s ≤ n/2 (as Bitcoin's BIP 62 and libsecp256k1 do) and refuses an
/// access token with a high s. Written here because swift-crypto (BoringSSL) signs with either s and exposes no
/// normalization; the arithmetic is one comparison and one subtraction on 32 big-endian bytes.
package enum ECDSALowS {
    /// n, the order of P-256's base point (SEC 2, FIPS 186-4 D.1.2.3), big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    /// ⌊n / 2⌋, big-endian.
    static let halfOrder: [UInt8] = [
        0x7F, 0xFF, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xDE, 0x73, 0x7D, 0x56, 0xD3, 0x8B, 0xCF, 0x42, 0x79, 0xDC, 0xE5, 0x61, 0x7E, 0x31, 0x92, 0xA8,
    ]

    /// Whether the raw signature `r ‖ s` (64 bytes) has s ≤ n/2. False for anything that is not 64 bytes.
    package static func isLow(_ raw: some Collection<UInt8>) -> Bool {
        raw.count == 64 && !halfOrder.lexicographicallyPrecedes(raw.dropFirst(32))
    }

    /// The raw signature `r ‖ s` in its canonical form: s replaced by n − s when it is high.
    package static func normalized(_ raw: [UInt8]) -> [UInt8] {
        raw.count != 64 || isLow(raw) ? raw : negated(raw)
    }

    /// `r ‖ (n − s)`: the same signature's other spelling (s in 1…n−1, as every valid signature's is).
    package static func negated(_ raw: [UInt8]) -> [UInt8] {
        precondition(raw.count == 64)
        var result = Array(raw[0..<32]) + [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in stride(from: 31, through: 0, by: -1) {
            let difference = Int(order[index]) - Int(raw[32 + index]) - borrow
            result[32 + index] = UInt8((difference + 256) & 0xFF)
            borrow = difference < 0 ? 1 : 0
        }
        return result
    }
}

/// base64url without padding (RFC 7515 §2), over bytes: every token verified and signed goes through it, so it
/// does not take Foundation's string replacements (which were an eighth of a refresh's CPU time).
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    /// Each byte's 6-bit value, or 0xFF for a byte outside the alphabet (which includes "=", "+" and "/").
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        return table
    }()

    package static func encode(_ data: some DataProtocol) -> String {
        var out: [UInt8] = []
        append(data, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the unpadded base64url of `data` to `out`.
    package static func append(_ data: some DataProtocol, to out: inout [UInt8]) {
        let alphabet = alphabet
        // 4 characters per 3 bytes; a last group of 1 or 2 bytes gives 2 or 3 characters (no padding).
        let length = (data.count * 4 + 2) / 3
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: length))
        func write(_ bytes: UnsafeRawBufferPointer) {
            out.withUnsafeMutableBufferPointer { buffer in
                var o = start
                for i in stride(from: 0, to: bytes.count, by: 3) {
                    // A short last group reads as zero bytes; only the characters it needs are kept.
                    let n = UInt32(bytes[i]) << 16
                        | UInt32(i + 1 < bytes.count ? bytes[i + 1] : 0) << 8
                        | UInt32(i + 2 < bytes.count ? bytes[i + 2] : 0)
                    for k in 0..<4 where o < start + length {
                        buffer[o] = alphabet[Int(n >> UInt32(18 - 6 * k) & 63)]
                        o += 1
                    }
                }
            }
        }
        // Contiguous bytes (an Array, a Data) are read in place; others are copied once.
        if data.regions.count == 1, let region = data.regions.first {
            region.withUnsafeBytes(write)
        } else {
            Array(data).withUnsafeBytes(write)
        }
    }

    /// The bytes of unpadded base64url text; nil for any character outside the alphabet (padding included), a
    /// length no encoding has, or a last character whose unused low bits are not zero — so that every byte string
    /// has exactly one text form (RFC 4648 §3.5), and a token altered in those bits is refused rather than read as
    /// the same token.
    package static func decode(_ text: some StringProtocol) -> Data? {
        var text = String(text)
        return text.withUTF8 { decode(bytes: $0) }
    }

    /// ``decode(_:)`` of text given as its UTF-8 bytes (a segment of a token, without copying it out).
    package static func decode(bytes utf8: UnsafeBufferPointer<UInt8>) -> Data? {
        guard utf8.count % 4 != 1 else { return nil }
        let values = values
        var out = [UInt8]()
        out.reserveCapacity(utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in utf8 {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // 2 or 4 bits are left over after a short last group; an encoder writes them as zeros.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return Data(out)
    }
}
