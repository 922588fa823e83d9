import Crypto
import Foundation
import GatehouseArgon2
import GatehouseDomain

/// A bcrypt password hash another system wrote, for `gatehouse import`: Gatehouse only verifies bcrypt (the
/// computation is ``Bcrypt`` in GatehouseArgon2, compiled optimised), and an imported user's first successful login
/// replaces it with Argon2id. Nothing here is for hashing new passwords.
///
/// Forms read (`NN` is the cost, two digits; `SALT` 22 and `CHECKSUM` 31 characters of bcrypt's base64,
/// `./A-Za-z0-9`):
/// - `$2b$NN$SALTCHECKSUM` (OpenBSD since 2014, pyca/bcrypt, Auth0's exports), `$2a$` (Go's x/crypto/bcrypt, so
///   Supabase/GoTrue, node.bcrypt.js, Spring, older OpenBSD) and `$2y$` (crypt_blowfish: PHP, libxcrypt). For a
///   password shorter than 255 bytes the three compute the same: the key is the password's UTF-8 bytes and a NUL, cut
///   to 72 bytes. The one edge: OpenBSD's `$2a$` before 2014 counted the key length (with its NUL) in 8 bits, so a
///   password of 255 bytes or more was hashed from ((length + 1) mod 256) bytes; such hashes do not verify here (Go, pyca and
///   crypt_blowfish never had that bug, and nothing in an Auth0 or Supabase export has it).
/// - `$2x$` is refused: it is crypt_blowfish's label for hashes made before 2011 by its sign-extension bug (bytes
///   ≥ 0x80 in the password corrupted the key); verifying them would mean reproducing the bug, and no current system
///   writes them. `$2$` (the 1999 original) and `$2c$`… are not bcrypt variants anyone writes either.
/// - Django's `bcrypt$$2b$NN$…` (the password as is) and `bcrypt_sha256$$2b$NN$…` (the key is the lowercase hex
///   SHA-256 digest of the password's UTF-8 bytes).
/// - passlib's `bcrypt_sha256`: version 2, `$bcrypt-sha256$v=2,t=2b,r=NN$SALT$CHECKSUM` (the key is the standard
///   base64, with padding, of HMAC-SHA256 keyed with the 22 salt characters as written, of the password) and
///   version 1, `$bcrypt-sha256$2a,NN$SALT$CHECKSUM` or `2b,NN` (base64 of SHA-256 of the password). passlib writes
///   the cost there without a leading zero and refuses zero-padded costs; so does this parser.
///
/// The cost must be 4...``maxCost``. The salt's last character carries 4 bits no byte uses: they are ignored (Go and
/// OpenBSD decode so; Go compares only the checksum, so it verifies such a hash, while OpenBSD, pyca and PHP compare
/// the re-encoded hash and would not). Every encoder writes them as zero, so a hash with them set was edited; being
/// liberal there costs nothing, since the checksum still has to match. The checksum's 2 unused bits, which no
/// implementation ignores, must be zero. In passlib's form, where the salt's text keys the HMAC, they must be zero
/// too (passlib refuses such salts).
struct BcryptHash: Sendable, Hashable {
    /// The `$2?$` label: all three compute the same checksum here (see the type's documentation).
    enum Variant: String, Sendable, Hashable, CaseIterable {
        case a = "2a", b = "2b", y = "2y"
    }

    /// What turns the password into bcrypt's key, by the form the hash came in.
    enum Prehash: Sendable, Hashable {
        /// The password's UTF-8 bytes: `$2b$…`, Django's `bcrypt$…`.
        case none
        /// Django's `bcrypt_sha256$…`: the lowercase hex of SHA-256(password), 64 characters.
        case djangoSHA256
        /// passlib's `$bcrypt-sha256$` version 1: standard base64 of SHA-256(password), 44 characters.
        case passlibSHA256
        /// passlib's `$bcrypt-sha256$v=2`: standard base64 of HMAC-SHA256(key: the salt's 22 characters,
        /// message: password), 44 characters.
        case passlibHMACSHA256
    }

    var variant: Variant
    var prehash: Prehash
    /// The base-2 logarithm of the number of key-expansion rounds, 4...``maxCost``.
    var cost: Int
    /// The salt's 22 characters as written (passlib's version 2 keys its HMAC with them).
    var saltText: String
    var salt: [UInt8]
    var checksum: [UInt8]

    /// The highest cost parsed. What a login may spend is ``HashCostBudget``'s (cost 14 passes it, 15 does not); this
    /// outer bound only keeps the parser from reading costs no system writes. Cost 16 takes about 4.5 s here and each
    /// step up doubles it (31 would take some 40 hours). Auth0 and Supabase (Go's bcrypt.DefaultCost) write 10, Django
    /// and passlib default to 12, OWASP asks for at least 10.
    static let maxCost = 16

    /// Parses one of the forms above; nil for anything else, including a cost above ``maxCost``.
    init?(_ text: String) {
        guard text.utf8.count <= 120 else { return nil }
        if text.hasPrefix("bcrypt$") {
            self.init(modularCrypt: text.dropFirst("bcrypt$".count), prehash: .none)
        } else if text.hasPrefix("bcrypt_sha256$") {
            self.init(modularCrypt: text.dropFirst("bcrypt_sha256$".count), prehash: .djangoSHA256)
        } else if text.hasPrefix("$bcrypt-sha256$") {
            self.init(passlib: text.dropFirst("$bcrypt-sha256$".count))
        } else {
            self.init(modularCrypt: Substring(text), prehash: .none)
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    /// `$2b$NN$` + 22 characters of salt + 31 of checksum.
    private init?(modularCrypt text: Substring, prehash: Prehash) {
        let fields = text.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0].isEmpty, let variant = Variant(rawValue: String(fields[1])),
            fields[2].utf8.count == 2, fields[2].utf8.allSatisfy(Self.isDigit), let cost = Int(fields[2]),
            fields[3].utf8.count == 22 + 31
        else { return nil }
        let saltAndChecksum = fields[3]
        let split = saltAndChecksum.index(saltAndChecksum.startIndex, offsetBy: 22)
        self.init(
            variant: variant, prehash: prehash, cost: cost, saltText: saltAndChecksum[..<split],
            checksumText: saltAndChecksum[split...], canonicalSalt: false
        )
    }

    /// passlib's `v=2,t=2b,r=N$SALT$CHECKSUM` or `2b,N$SALT$CHECKSUM` (after `$bcrypt-sha256$`).
    private init?(passlib text: Substring) {
        let fields = text.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 3 else { return nil }
        let settings = fields[0].split(separator: ",", omittingEmptySubsequences: false)
        let variant: Variant
        let rounds: Substring
        let prehash: Prehash
        if settings.count == 3, settings[0] == "v=2", settings[1] == "t=2b", settings[2].hasPrefix("r=") {
            (variant, rounds, prehash) = (.b, settings[2].dropFirst(2), .passlibHMACSHA256)
        } else if settings.count == 2, let label = Variant(rawValue: String(settings[0])), label != .y {
            (variant, rounds, prehash) = (label, settings[1], .passlibSHA256)
        } else {
            return nil
        }
        guard (1...2).contains(rounds.utf8.count), rounds.utf8.first != UInt8(ascii: "0"),
            rounds.utf8.allSatisfy(Self.isDigit), let cost = Int(rounds)
        else { return nil }
        self.init(
            variant: variant, prehash: prehash, cost: cost, saltText: fields[1], checksumText: fields[2],
            canonicalSalt: prehash == .passlibHMACSHA256
        )
    }

    private init?(
        variant: Variant, prehash: Prehash, cost: Int, saltText: Substring, checksumText: Substring, canonicalSalt: Bool
    ) {
        guard Bcrypt.costRange.contains(cost), cost <= Self.maxCost,
            let salt = Bcrypt.decodeBase64(saltText, byteCount: Bcrypt.saltByteCount, canonical: canonicalSalt),
            let checksum = Bcrypt.decodeBase64(checksumText, byteCount: Bcrypt.checksumByteCount, canonical: true)
        else { return nil }
        self.variant = variant
        self.prehash = prehash
        self.cost = cost
        self.saltText = String(saltText)
        self.salt = salt
        self.checksum = checksum
    }

    /// Whether `password` (as typed: its UTF-8 bytes, not normalised, since the other system hashed it so) is the one
    /// this hash was made from. Takes about 2^cost · 70 µs (cost 10: ~70 ms; ~0.3 s at 12): run it off the event loop,
    /// as ``ForeignPasswordHash`` is (NIO's blocking pool).
    func verify(_ password: String) -> Bool {
        Bcrypt.constantTimeEqual(Bcrypt.checksum(password: key(for: password), salt: salt, cost: cost), checksum)
    }

    /// ``verify(_:)`` that asks `isCancelled` before every round of the key schedule; nil once it answered true.
    func verify(_ password: String, isCancelled: () -> Bool) -> Bool? {
        guard let computed = Bcrypt.checksum(password: key(for: password), salt: salt, cost: cost, isCancelled: isCancelled) else { return nil }
        return Bcrypt.constantTimeEqual(computed, checksum)
    }

    /// bcrypt's key material for `password`: the password, or its digest in the form's encoding.
    func key(for password: String) -> [UInt8] {
        let bytes = Array(password.utf8)
        switch prehash {
        case .none:
            return bytes
        case .djangoSHA256:
            return Array(SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined().utf8)
        case .passlibSHA256:
            return Array(Data(SHA256.hash(data: bytes)).base64EncodedString().utf8)
        case .passlibHMACSHA256:
            let mac = HMAC<SHA256>.authenticationCode(for: bytes, using: SymmetricKey(data: Array(saltText.utf8)))
            return Array(Data(mac).base64EncodedString().utf8)
        }
    }

    /// A `$2b$` hash of `password`, for tests only: Gatehouse never writes bcrypt, it stores Argon2id.
    static func hash(_ password: String, cost: Int, salt: [UInt8]? = nil) -> String {
        precondition(Bcrypt.costRange.contains(cost))
        let salt = salt ?? Secrets.randomBytes(Bcrypt.saltByteCount)
        let checksum = Bcrypt.checksum(password: Array(password.utf8), salt: salt, cost: cost)
        let twoDigitCost = cost < 10 ? "0\(cost)" : "\(cost)"
        return "$2b$\(twoDigitCost)$" + Bcrypt.encodeBase64(salt) + Bcrypt.encodeBase64(checksum)
    }
}
