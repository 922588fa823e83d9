import Crypto
import Foundation

/// The ES256 keys tokens are signed and verified with. Keys live in the database, so tokens survive restarts
/// and verify on every instance; the first start creates one, and `gatehouse keys rotate` / `retire` change the
/// set (each instance reloads it at least every ``maxAge`` seconds, and sooner when a token names a key it lacks).
package final class SigningKeys: Sendable {
    package struct Key: Sendable {
        package let kid: String
        package let privateKey: P256.Signing.PrivateKey
        package let createdAt: Date
        /// Derived once: every token verified needs the public key, every token signed the encoded header.
        package let publicKey: P256.Signing.PublicKey
        /// The base64url JWS header of the tokens this key signs.
        package let header: String
        /// The MAC key of the Client API refresh tokens made under this key (``SigningKeys/derive(from:purpose:)``),
        /// and their header (`HS256`, this key's `kid`). The JWKS publishes no part of it, so no resource server
        /// verifying tokens with the key set can take a refresh token for an access token.
        package let refreshMAC: SymmetricKey
        package let refreshHeader: String

        package init(kid: String, privateKey: P256.Signing.PrivateKey, createdAt: Date) {
            self.kid = kid
            self.privateKey = privateKey
            self.createdAt = createdAt
            publicKey = privateKey.publicKey
            header = JWT.header(kid: kid)
            refreshMAC = SigningKeys.derive(from: privateKey, purpose: JWT.refreshMACPurpose)
            refreshHeader = JWT.header(kid: kid, algorithm: "HS256")
        }
    }

    private let keys: LockedValue<[Key]>
    /// Tokens verified against these keys (``verify(_:)``).
    package let verified: VerifiedTokens
    /// When this copy was read from the database.
    private let loadedAt: LockedValue<Date>
    /// Seconds a copy is used before it is read again.
    package static let maxAge: TimeInterval = 60
    /// Seconds between reloads caused by tokens naming unknown keys.
    package static let unknownKidInterval: TimeInterval = 5

    /// `verifiedCapacity`: tokens remembered as verified (`server.verifiedTokenCache`; 0: none).
    package init(keys: [Key], loadedAt: Date = .distantPast, verifiedCapacity: Int = 4096) {
        self.keys = LockedValue(keys)
        self.loadedAt = LockedValue(loadedAt)
        verified = VerifiedTokens(capacity: verifiedCapacity)
    }

    /// Reads the active keys again when this copy is older than ``maxAge``, or when `kid` (of a token being
    /// verified) is not in it and the copy is older than ``unknownKidInterval``. One caller reloads; a failed read
    /// keeps the keys as they were.
    package func refreshIfNeeded(from store: any GatehouseStore, now: Date, kid: String? = nil) async {
        let known = kid.map { kid in keys.withLockedValue { $0.contains { $0.kid == kid } } } ?? true
        let reload = loadedAt.withLockedValue { loadedAt in
            let age = now.timeIntervalSince(loadedAt)
            guard age >= Self.maxAge || (!known && age >= Self.unknownKidInterval) else { return false }
            loadedAt = now
            return true
        }
        guard reload, let records = try? await store.signingKeys(), !records.isEmpty else { return }
        let loaded = records.compactMap { record in
            (try? P256.Signing.PrivateKey(rawRepresentation: record.privateKey)).map { Key(kid: record.kid, privateKey: $0, createdAt: record.createdAt) }
        }
        if !loaded.isEmpty { keys.withLockedValue { $0 = loaded } }
    }

    /// Loads the keys from the store, creating the first one if there is none.
    package static func load(from store: any GatehouseStore, clock: GatehouseClock) async throws -> SigningKeys {
        var records = try await store.signingKeys()
        if records.isEmpty {
            let record = makeRecord(now: clock.now)
            // Another instance starting at the same moment may win: then its key is the one everyone uses.
            records = try await store.signingKeys(insertingIfNone: record)
        }
        let keys = try records.map {
            Key(kid: $0.kid, privateKey: try P256.Signing.PrivateKey(rawRepresentation: $0.privateKey), createdAt: $0.createdAt)
        }
        return SigningKeys(keys: keys, loadedAt: clock.now)
    }

    /// Takes the keys of `other` (loaded once the database was reached).
    package func replace(with other: SigningKeys) {
        let loaded = other.keys.withLockedValue { $0 }
        keys.withLockedValue { $0 = loaded }
        let when = other.loadedAt.withLockedValue { $0 }
        loadedAt.withLockedValue { $0 = when }
    }

    /// A new key, as `gatehouse keys rotate` makes it. Its `kid` is its RFC 7638 thumbprint, and never starts with
    /// `-` (one key in 64 would): the operator passes it to `gatehouse keys retire`, whose command line would take it
    /// for options.
    package static func makeRecord(now: Date) -> SigningKeyRecord {
        while true {
            let key = P256.Signing.PrivateKey()
            let kid = thumbprint(key.publicKey)
            if !kid.hasPrefix("-") { return SigningKeyRecord(kid: kid, privateKey: Array(key.rawRepresentation), createdAt: now) }
        }
    }

    /// The key new tokens are signed with: the newest.
    package var current: Key {
        keys.withLockedValue { $0.max { $0.createdAt < $1.createdAt }! }
    }

    /// A symmetric key for `purpose`, derived (HKDF-SHA256) from the private key `kid`: a server secret that every
    /// instance shares and that rotates with the signing keys. Nil when `kid` is not an active key.
    package func macKey(kid: String, purpose: String) -> SymmetricKey? {
        key(kid: kid).map { Self.derive(from: $0.privateKey, purpose: purpose) }
    }

    /// The symmetric key for `purpose` derived (HKDF-SHA256, info `gatehouse <purpose>`) from `privateKey`; each
    /// purpose has its own, so a value made for one never passes for another.
    package static func derive(from privateKey: P256.Signing.PrivateKey, purpose: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: privateKey.rawRepresentation), info: Data("gatehouse \(purpose)".utf8), outputByteCount: 32
        )
    }

    /// The active key `kid`, or nil.
    package func key(kid: String) -> Key? {
        keys.withLockedValue { keys in keys.first { $0.kid == kid } }
    }

    /// Whether `kid` is an active key.
    package func contains(kid: String) -> Bool {
        keys.withLockedValue { keys in keys.contains { $0.kid == kid } }
    }

    /// The JSON Web Key Set served at `/.well-known/jwks.json`.
    package var jwks: JWKS {
        JWKS(keys: keys.withLockedValue { $0 }.map { key in
            let point = key.publicKey.x963Representation  // 0x04 || X || Y
            return JWKS.Key(
                kty: "EC", crv: "P-256", alg: "ES256", use: "sig", kid: key.kid,
                x: Base64URL.encode(point.dropFirst().prefix(32)),
                y: Base64URL.encode(point.suffix(32))
            )
        })
    }

    /// Whether `bytes` are a raw P-256 private key (a scalar in range).
    package static func isValidP256PrivateKey(_ bytes: [UInt8]) -> Bool {
        (try? P256.Signing.PrivateKey(rawRepresentation: bytes)) != nil
    }

    /// RFC 7638 thumbprint of a P-256 public key: a stable `kid`.
    package static func thumbprint(_ key: P256.Signing.PublicKey) -> String {
        let point = key.x963Representation
        let x = Base64URL.encode(point.dropFirst().prefix(32))
        let y = Base64URL.encode(point.suffix(32))
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        return Base64URL.encode(Array(SHA256.hash(data: Data(canonical.utf8))))
    }
}

/// RFC 7517 key set.
package struct JWKS: Codable, Sendable {
    package struct Key: Codable, Sendable, Hashable {
        package var kty: String
        package var crv: String
        package var alg: String
        package var use: String
        package var kid: String
        package var x: String
        package var y: String

        package init(kty: String, crv: String, alg: String, use: String, kid: String, x: String, y: String) {
            self.kty = kty
            self.crv = crv
            self.alg = alg
            self.use = use
            self.kid = kid
            self.x = x
            self.y = y
        }
    }
    package var keys: [Key]

    package init(keys: [Key]) {
        self.keys = keys
    }
}
