import Crypto
import CryptoExtras
import Foundation

/// A password hash made by another system, kept as it came so that an imported user signs in with the password they
/// had; their first successful login replaces it with the app's Argon2id (``Argon2PasswordHasher/needsRehash(_:parameters:)``).
///
/// Read today: PBKDF2-HMAC with SHA-1, SHA-256 or SHA-512, in Django's form (`pbkdf2_sha256$ROUNDS$SALT$BASE64`, the
/// salt as text) and in passlib's (`$pbkdf2-sha256$ROUNDS$SALT$CHECKSUM`, both in passlib's base64 with `.` for `+`
/// and no padding; `$pbkdf2$` is SHA-1).
struct ForeignPasswordHash: Sendable, Hashable {
    enum Digest: Sendable, Hashable {
        case sha1, sha256, sha512

        var byteCount: Int {
            switch self {
            case .sha1: 20
            case .sha256: 32
            case .sha512: 64
            }
        }

        var pbkdf2: KDF.Insecure.PBKDF2.HashFunction {
            switch self {
            case .sha1: .insecureSHA1
            case .sha256: .sha256
            case .sha512: .sha512
            }
        }
    }

    var digest: Digest
    var rounds: Int
    var salt: [UInt8]
    var checksum: [UInt8]

    /// The most rounds a stored hash may ask for: a tampered row must not make a login run for minutes.
    static let maxRounds = 10_000_000

    /// Parses a hash in one of the forms above; nil for anything else, and for round counts or lengths no real system
    /// writes.
    init?(_ text: String) {
        if text.hasPrefix("pbkdf2_") {
            // Django: pbkdf2_sha256$600000$salt$base64
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 4, let digest = Self.digest(djangoName: parts[0]), let rounds = Int(parts[1]),
                let checksum = Data(base64Encoded: String(parts[3]))
            else { return nil }
            self.init(digest: digest, rounds: rounds, salt: Array(parts[2].utf8), checksum: Array(checksum))
        } else if text.hasPrefix("$pbkdf2") {
            // passlib: $pbkdf2-sha256$29000$salt$checksum
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 5, parts[0].isEmpty, let digest = Self.digest(passlibName: parts[1]), let rounds = Int(parts[2]),
                let salt = Self.adaptedBase64(parts[3]), let checksum = Self.adaptedBase64(parts[4])
            else { return nil }
            self.init(digest: digest, rounds: rounds, salt: salt, checksum: checksum)
        } else {
            return nil
        }
    }

    private init?(digest: Digest, rounds: Int, salt: [UInt8], checksum: [UInt8]) {
        guard (1...Self.maxRounds).contains(rounds), checksum.count == digest.byteCount, !salt.isEmpty, salt.count <= 1024 else {
            return nil
        }
        self.digest = digest
        self.rounds = rounds
        self.salt = salt
        self.checksum = checksum
    }

    /// Whether `password` (its UTF-8 bytes, as Django and passlib hash them) makes this hash. Constant time in the
    /// comparison.
    func verify(_ password: String) throws -> Bool {
        let derived = try KDF.Insecure.PBKDF2.deriveKey(
            from: Array(password.utf8), salt: salt, using: digest.pbkdf2, outputByteCount: digest.byteCount,
            unsafeUncheckedRounds: rounds
        )
        let bytes = derived.withUnsafeBytes { Array($0) }
        guard bytes.count == checksum.count else { return false }
        return zip(bytes, checksum).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private static func digest(djangoName name: Substring) -> Digest? {
        switch name {
        case "pbkdf2_sha1": .sha1
        case "pbkdf2_sha256": .sha256
        default: nil
        }
    }

    private static func digest(passlibName name: Substring) -> Digest? {
        switch name {
        case "pbkdf2": .sha1
        case "pbkdf2-sha256": .sha256
        case "pbkdf2-sha512": .sha512
        default: nil
        }
    }

    /// passlib's base64: `.` for `+`, no padding.
    private static func adaptedBase64(_ text: Substring) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: ".", with: "+")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }
}
