import Crypto
import Foundation
import NIOConcurrencyHelpers

/// The ES256 keys tokens are signed and verified with. Keys live in the database, so tokens survive restarts
/// (and, later, verify on every instance); the first start creates one.
final class SigningKeys: Sendable {
    struct Key: Sendable {
        var kid: String
        var privateKey: P256.Signing.PrivateKey
        var createdAt: Date
    }

    private let keys: NIOLockedValueBox<[Key]>

    init(keys: [Key]) {
        self.keys = NIOLockedValueBox(keys)
    }

    /// Loads the keys from the store, creating the first one if there is none.
    static func load(from store: any GatehouseStore, clock: GatehouseClock) async throws -> SigningKeys {
        var records = try await store.signingKeys()
        if records.isEmpty {
            let key = P256.Signing.PrivateKey()
            let record = SigningKeyRecord(kid: thumbprint(key.publicKey), privateKey: Array(key.rawRepresentation), createdAt: clock.now)
            // Another instance starting at the same moment may win: then its key is the one everyone uses.
            records = try await store.signingKeys(insertingIfNone: record)
        }
        let keys = try records.map {
            Key(kid: $0.kid, privateKey: try P256.Signing.PrivateKey(rawRepresentation: $0.privateKey), createdAt: $0.createdAt)
        }
        return SigningKeys(keys: keys)
    }

    /// Takes the keys of `other` (loaded once the database was reached).
    func replace(with other: SigningKeys) {
        let loaded = other.keys.withLockedValue { $0 }
        keys.withLockedValue { $0 = loaded }
    }

    /// The key new tokens are signed with: the newest.
    var current: Key {
        keys.withLockedValue { $0.max { $0.createdAt < $1.createdAt }! }
    }

    func publicKey(kid: String) -> P256.Signing.PublicKey? {
        keys.withLockedValue { keys in keys.first { $0.kid == kid }?.privateKey.publicKey }
    }

    /// The JSON Web Key Set served at `/.well-known/jwks.json`.
    var jwks: JWKS {
        JWKS(keys: keys.withLockedValue { $0 }.map { key in
            let point = key.privateKey.publicKey.x963Representation  // 0x04 || X || Y
            return JWKS.Key(
                kty: "EC", crv: "P-256", alg: "ES256", use: "sig", kid: key.kid,
                x: Base64URL.encode(point.dropFirst().prefix(32)),
                y: Base64URL.encode(point.suffix(32))
            )
        })
    }

    /// Whether `bytes` are a raw P-256 private key (a scalar in range).
    static func isValidP256PrivateKey(_ bytes: [UInt8]) -> Bool {
        (try? P256.Signing.PrivateKey(rawRepresentation: bytes)) != nil
    }

    /// RFC 7638 thumbprint of a P-256 public key: a stable `kid`.
    static func thumbprint(_ key: P256.Signing.PublicKey) -> String {
        let point = key.x963Representation
        let x = Base64URL.encode(point.dropFirst().prefix(32))
        let y = Base64URL.encode(point.suffix(32))
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        return Base64URL.encode(Array(SHA256.hash(data: Data(canonical.utf8))))
    }
}

/// RFC 7517 key set.
struct JWKS: Codable, Sendable {
    struct Key: Codable, Sendable, Hashable {
        var kty: String
        var crv: String
        var alg: String
        var use: String
        var kid: String
        var x: String
        var y: String
    }
    var keys: [Key]
}
