import Crypto
import CryptoExtras
import Foundation
import GatehouseDomain

/// A password hash made by another system, kept as it came so that an imported user signs in with the password they
/// had; their first successful login replaces it with the app's Argon2id (``Argon2PasswordHasher/needsRehash(_:parameters:)``).
///
/// Read today: PBKDF2-HMAC with SHA-1, SHA-256 or SHA-512, in Django's form (`pbkdf2_sha256$ROUNDS$SALT$BASE64`, the
/// salt as text) and in passlib's (`$pbkdf2-sha256$ROUNDS$SALT$CHECKSUM`, both in passlib's base64 with `.` for `+`
/// and no padding; `$pbkdf2$` is SHA-1); scrypt in passlib's form (`$scrypt$ln=LOG2N,r=R,p=P$SALT$CHECKSUM`).
struct ForeignPasswordHash: Sendable, Hashable {
    /// How the checksum was derived.
    enum Scheme: Sendable, Hashable {
        case pbkdf2(Digest, rounds: Int)
        /// `cost` is scrypt's N.
        case scrypt(cost: Int, blockSize: Int, parallelism: Int)
    }

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

    var scheme: Scheme
    var salt: [UInt8]
    var checksum: [UInt8]

    /// The most PBKDF2 rounds a stored hash may ask for: a tampered row must not make a login run for minutes.
    static let maxRounds = 10_000_000
    /// The most memory an scrypt hash may ask for (128 · r · N · p bytes): 1 GiB, as for Argon2id.
    static let maxScryptMemory = 1 << 30

    /// Parses a hash in one of the forms above; nil for anything else, and for round counts or lengths no real system
    /// writes.
    init?(_ text: String) {
        if text.hasPrefix("pbkdf2_") {
            // Django: pbkdf2_sha256$600000$salt$base64
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 4, let digest = Self.digest(djangoName: parts[0]), let rounds = Int(parts[1]),
                let checksum = Data(base64Encoded: String(parts[3]))
            else { return nil }
            self.init(.pbkdf2(digest, rounds: rounds), salt: Array(parts[2].utf8), checksum: Array(checksum))
        } else if text.hasPrefix("$pbkdf2") {
            // passlib: $pbkdf2-sha256$29000$salt$checksum
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 5, parts[0].isEmpty, let digest = Self.digest(passlibName: parts[1]), let rounds = Int(parts[2]),
                let salt = Self.adaptedBase64(parts[3]), let checksum = Self.adaptedBase64(parts[4])
            else { return nil }
            self.init(.pbkdf2(digest, rounds: rounds), salt: salt, checksum: checksum)
        } else if text.hasPrefix("$scrypt$") {
            // passlib: $scrypt$ln=16,r=8,p=1$salt$checksum
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 5, let parameters = Self.scryptParameters(parts[2]), let salt = Self.adaptedBase64(parts[3]),
                let checksum = Self.adaptedBase64(parts[4])
            else { return nil }
            self.init(.scrypt(cost: parameters.cost, blockSize: parameters.blockSize, parallelism: parameters.parallelism), salt: salt, checksum: checksum)
        } else {
            return nil
        }
    }

    private init?(_ scheme: Scheme, salt: [UInt8], checksum: [UInt8]) {
        guard !salt.isEmpty, salt.count <= 1024 else { return nil }
        switch scheme {
        case .pbkdf2(let digest, let rounds):
            guard (1...Self.maxRounds).contains(rounds), checksum.count == digest.byteCount else { return nil }
        case .scrypt(let cost, let blockSize, let parallelism):
            guard cost >= 2, cost & (cost - 1) == 0, (1...64).contains(blockSize), (1...64).contains(parallelism),
                128 * blockSize * cost * parallelism <= Self.maxScryptMemory, (16...64).contains(checksum.count)
            else { return nil }
        }
        self.scheme = scheme
        self.salt = salt
        self.checksum = checksum
    }

    /// `ln=16,r=8,p=1` → (N, r, p).
    private static func scryptParameters(_ text: Substring) -> (cost: Int, blockSize: Int, parallelism: Int)? {
        var values: [Substring: Int] = [:]
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let value = Int(parts[1]) else { return nil }
            values[parts[0]] = value
        }
        guard values.count == 3, let ln = values["ln"], (1...30).contains(ln), let r = values["r"], let p = values["p"] else { return nil }
        return (1 << ln, r, p)
    }

    /// Whether `password` (its UTF-8 bytes, as Django and passlib hash them) makes this hash. Constant time in the
    /// comparison.
    func verify(_ password: String) throws -> Bool {
        let derived: SymmetricKey
        switch scheme {
        case .pbkdf2(let digest, let rounds):
            derived = try KDF.Insecure.PBKDF2.deriveKey(
                from: Array(password.utf8), salt: salt, using: digest.pbkdf2, outputByteCount: digest.byteCount,
                unsafeUncheckedRounds: rounds
            )
        case .scrypt(let cost, let blockSize, let parallelism):
            derived = try KDF.Scrypt.deriveKey(
                from: Array(password.utf8), salt: salt, outputByteCount: checksum.count, rounds: cost, blockSize: blockSize,
                parallelism: parallelism, maxMemory: Self.maxScryptMemory + 65536
            )
        }
        return Secrets.constantTimeEquals(derived.withUnsafeBytes { Array($0) }, checksum)
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
