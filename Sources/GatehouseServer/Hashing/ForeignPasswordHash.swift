import Crypto
import CryptoExtras
import Foundation
import GatehouseArgon2
import GatehouseDomain

/// A password hash made by another system, kept as it came so that an imported user signs in with the password they
/// had; their first successful login replaces it with the app's Argon2id (``Argon2PasswordHasher/needsRehash(_:parameters:)``).
///
/// Read today:
/// - PBKDF2-HMAC with SHA-1, SHA-256 or SHA-512, in Django's form (`pbkdf2_sha256$ROUNDS$SALT$BASE64`, the salt as
///   text), in passlib's (`$pbkdf2-sha256$ROUNDS$SALT$CHECKSUM`, both in passlib's base64 with `.` for `+` and no
///   padding; `$pbkdf2$` is SHA-1) and in the PHC form Auth0 takes (`$pbkdf2-sha512$i=ROUNDS,l=LENGTH$SALT$HASH`,
///   `-sha1` and `-sha256` too, standard base64 without padding). The derived key is as long as the stored checksum (Keycloak's are 64 bytes
///   whatever the digest).
/// - scrypt in passlib's form (`$scrypt$ln=LOG2N,r=R,p=P$SALT$CHECKSUM`).
/// - Firebase's modified scrypt, in a form of Gatehouse's own that holds the project's parameters beside each hash
///   (Firebase's export keeps them apart): `$firebase-scrypt$m=MEMCOST,r=ROUNDS$SALT$SEPARATOR$SIGNERKEY$HASH`,
///   standard base64 as Firebase writes it.
/// - Argon2 of every variant (argon2id, argon2i, argon2d) and version (0x13, 0x10) in PHC form, also behind Django's
///   `argon2` prefix (`argon2$argon2id$v=19$…`); Argon2id version 0x13 is Gatehouse's own and verified as such.
/// - bcrypt (`$2a$`, `$2b$`, `$2y$`, cost up to 16) and Django's and passlib's bcrypt forms (``BcryptHash``).
/// - Salted digests and HMACs (Auth0's `custom_password_hash` with md5/sha1/sha256/sha512 or hmac, Firebase's
///   HMAC_*), in a form of Gatehouse's own: `$digest$a=sha256,o=sp$KEY$SALT$HASH` (`a=hmac-sha256` for an HMAC whose
///   key is KEY; `o=sp` hashes salt then password, `o=ps` password then salt; KEY and SALT may be empty). These are
///   fast hashes: an imported one is only as strong as it was, until the user's first login replaces it.
struct ForeignPasswordHash: Sendable, Hashable {
    /// How the checksum was derived.
    enum Scheme: Sendable, Hashable {
        case pbkdf2(Digest, rounds: Int)
        /// `cost` is scrypt's N.
        case scrypt(cost: Int, blockSize: Int, parallelism: Int)
        /// scrypt(password, salt + separator, N = 2^memoryCost, r = rounds, p = 1, 32 bytes) is the AES-256-CTR key
        /// (a zero counter block) that encrypts `signerKey`; the result is the hash.
        case firebaseScrypt(memoryCost: Int, rounds: Int, separator: [UInt8], signerKey: [UInt8])
        /// `digest(salt + password)` or `digest(password + salt)`; an HMAC under `hmacKey` when there is one.
        case digest(Digest, hmacKey: [UInt8]?, saltFirst: Bool)
        /// Argon2 of a variant or version Gatehouse does not write (argon2i, argon2d, version 0x10), as a PHC string.
        case argon2(phc: String)
        /// bcrypt in any of the forms ``BcryptHash`` reads.
        case bcrypt(BcryptHash)
    }

    enum Digest: String, Sendable, Hashable {
        case md5, sha1, sha256, sha512

        var byteCount: Int {
            switch self {
            case .md5: 16
            case .sha1: 20
            case .sha256: 32
            case .sha512: 64
            }
        }

        var pbkdf2: KDF.Insecure.PBKDF2.HashFunction? {
            switch self {
            case .md5: nil
            case .sha1: .insecureSHA1
            case .sha256: .sha256
            case .sha512: .sha512
            }
        }

        func hash(_ message: [UInt8], hmacKey: [UInt8]?) -> [UInt8] {
            func run<H: HashFunction>(_: H.Type) -> [UInt8] {
                if let hmacKey { return Array(HMAC<H>.authenticationCode(for: message, using: SymmetricKey(data: hmacKey))) }
                return Array(H.hash(data: message))
            }
            switch self {
            case .md5: return run(Insecure.MD5.self)
            case .sha1: return run(Insecure.SHA1.self)
            case .sha256: return run(SHA256.self)
            case .sha512: return run(SHA512.self)
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
        if let bcrypt = BcryptHash(text) {
            self.init(bcrypt: bcrypt)
        } else if text.hasPrefix("$argon2") || text.hasPrefix("argon2$argon2") {
            let phc = text.hasPrefix("argon2$") ? String(text.dropFirst("argon2".count)) : text
            // Gatehouse's own form is not foreign (unless Django wrapped it), and memory past the cap is not read.
            guard phc != text || (try? Argon2.parseParameters(phc: phc)) == nil, let info = try? Argon2.parseAnyPHC(phc),
                info.parameters.memoryKiB <= Argon2PasswordHasher.maxMemoryKiB, info.parameters.iterations <= Argon2.maxVerifyIterations
            else { return nil }
            self.init(argon2: phc)
        } else if text.hasPrefix("pbkdf2_") {
            // Django: pbkdf2_sha256$600000$salt$base64
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 4, let digest = Self.digest(djangoName: parts[0]), let rounds = Int(parts[1]),
                let checksum = Data(base64Encoded: String(parts[3])), checksum.count == digest.byteCount
            else { return nil }
            self.init(.pbkdf2(digest, rounds: rounds), salt: Array(parts[2].utf8), checksum: Array(checksum))
        } else if text.hasPrefix("$pbkdf2") {
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 5, parts[0].isEmpty else { return nil }
            let phc = parts[2].hasPrefix("i=")
            guard let digest = phc ? Self.digest(phcName: parts[1]) : Self.digest(passlibName: parts[1]) else { return nil }
            if phc {
                // PHC (Auth0): $pbkdf2-sha512$i=100000,l=64$salt$hash
                guard let parameters = Self.parameters(parts[2], names: ["i", "l"]), let rounds = parameters["i"],
                    let salt = Self.base64(parts[3]), let checksum = Self.base64(parts[4]), parameters["l"] == checksum.count
                else { return nil }
                self.init(.pbkdf2(digest, rounds: rounds), salt: salt, checksum: checksum)
            } else {
                // passlib: $pbkdf2-sha256$29000$salt$checksum
                guard let rounds = Int(parts[2]), let salt = Self.adaptedBase64(parts[3]), let checksum = Self.adaptedBase64(parts[4]) else { return nil }
                self.init(.pbkdf2(digest, rounds: rounds), salt: salt, checksum: checksum)
            }
        } else if text.hasPrefix("$scrypt$") {
            // passlib: $scrypt$ln=16,r=8,p=1$salt$checksum
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 5, let parameters = Self.scryptParameters(parts[2]), let salt = Self.adaptedBase64(parts[3]),
                let checksum = Self.adaptedBase64(parts[4])
            else { return nil }
            self.init(.scrypt(cost: parameters.cost, blockSize: parameters.blockSize, parallelism: parameters.parallelism), salt: salt, checksum: checksum)
        } else if text.hasPrefix("$firebase-scrypt$") {
            // $firebase-scrypt$m=14,r=8$salt$separator$signerKey$hash
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 7, let parameters = Self.parameters(parts[2], names: ["m", "r"]), let memoryCost = parameters["m"],
                let rounds = parameters["r"], let salt = Self.base64(parts[3]), let separator = Self.base64(parts[4]),
                let signerKey = Self.base64(parts[5]), let hash = Self.base64(parts[6])
            else { return nil }
            self.init(.firebaseScrypt(memoryCost: memoryCost, rounds: rounds, separator: separator, signerKey: signerKey), salt: salt, checksum: hash)
        } else if text.hasPrefix("$digest$") {
            // $digest$a=hmac-sha256,o=sp$key$salt$hash
            let parts = text.split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 6, let options = Self.options(parts[2]), options.count == 2, let algorithm = options["a"],
                let order = options["o"], order == "sp" || order == "ps", let key = Self.base64(parts[3]), let salt = Self.base64(parts[4]),
                let hash = Self.base64(parts[5])
            else { return nil }
            let hmac = algorithm.hasPrefix("hmac-")
            guard let digest = Digest(rawValue: String(hmac ? algorithm.dropFirst(5) : algorithm)), hmac == !key.isEmpty else { return nil }
            self.init(.digest(digest, hmacKey: hmac ? key : nil, saltFirst: order == "sp"), salt: salt, checksum: hash)
        } else {
            return nil
        }
    }

    private init(bcrypt: BcryptHash) {
        (scheme, salt, checksum) = (.bcrypt(bcrypt), [], [])
    }

    private init(argon2 phc: String) {
        (scheme, salt, checksum) = (.argon2(phc: phc), [], [])
    }

    /// Whether `text` is in a form a login reads: Argon2id as Gatehouse writes it, or a hash of another system this
    /// type reads (at any cost: ``refusal(_:ownParameters:)`` says whether a login may run it).
    static func isReadable(_ text: String) -> Bool {
        (text.hasPrefix("$argon2id$") && (try? Argon2.parseParameters(phc: text)) != nil) || ForeignPasswordHash(text) != nil
    }

    /// Whether a login can verify `text` within ``HashCostBudget``: nil when it can (Argon2id as Gatehouse writes it,
    /// or a hash of another system this type reads), else why not, for an import's report. `ownParameters` are the
    /// importing app's: Gatehouse's own form costing no more than they do passes whatever the budget.
    static func refusal(_ text: String, ownParameters: Argon2Parameters? = nil) -> String? {
        if case .refused(let reason) = HashCostBudget.assess(text, ownParameters: ownParameters) { return reason }
        return nil
    }

    /// What one verification of this hash costs in ``HashCostBudget``'s work units; nil when past counting.
    var work: UInt64? {
        func product(_ factors: [UInt64]) -> UInt64? {
            var total: UInt64 = 1
            for factor in factors {
                let (next, overflow) = total.multipliedReportingOverflow(by: factor)
                if overflow { return nil }
                total = next
            }
            return total
        }
        switch scheme {
        case .pbkdf2(let digest, let rounds):
            // Each block of the derived key is a chain of `rounds` HMACs of its own.
            let blocks = (checksum.count + digest.byteCount - 1) / digest.byteCount
            return product([UInt64(rounds), UInt64(max(blocks, 1)), HashCostBudget.pbkdf2Round(digest)])
        case .scrypt(let cost, let blockSize, let parallelism):
            return product([UInt64(cost), UInt64(blockSize), UInt64(parallelism), HashCostBudget.scryptBlock])
        case .firebaseScrypt(let memoryCost, let rounds, _, _):
            return product([UInt64(1) << UInt64(memoryCost), UInt64(rounds), HashCostBudget.scryptBlock])
        case .digest:
            return 1
        case .argon2(let phc):
            guard let info = try? Argon2.parseAnyPHC(phc) else { return nil }
            return product([info.parameters.work, HashCostBudget.argon2Block])
        case .bcrypt(let bcrypt):
            return product([UInt64(1) << UInt64(bcrypt.cost), HashCostBudget.bcryptRound])
        }
    }

    /// The hash's kind and cost parameters, for a refusal's reason (never the salt or checksum).
    var costDescription: String {
        switch scheme {
        case .pbkdf2(let digest, let rounds): "PBKDF2-\(digest.rawValue.uppercased()), \(rounds) rounds, \(checksum.count)-byte key"
        case .scrypt(let cost, let blockSize, let parallelism): "scrypt N=\(cost), r=\(blockSize), p=\(parallelism)"
        case .firebaseScrypt(let memoryCost, let rounds, _, _): "Firebase scrypt m=\(memoryCost), r=\(rounds)"
        case .digest(let digest, let hmacKey, _): hmacKey == nil ? "salted \(digest.rawValue)" : "HMAC-\(digest.rawValue)"
        case .argon2(let phc):
            if let info = try? Argon2.parseAnyPHC(phc) {
                "Argon2 m=\(info.parameters.memoryKiB) KiB, t=\(info.parameters.iterations)"
            } else {
                "Argon2"
            }
        case .bcrypt(let bcrypt): "bcrypt cost \(bcrypt.cost)"
        }
    }

    /// Makes a hash of parts an export kept apart (Firebase's, Auth0's, Keycloak's); nil when they are not a hash
    /// this type reads (``init(_:)`` reads its ``text`` back). Argon2 arrives as a PHC string: ``init(_:)``.
    init?(_ scheme: Scheme, salt: [UInt8], checksum: [UInt8]) {
        guard salt.count <= 1024 else { return nil }
        switch scheme {
        case .pbkdf2(let digest, let rounds):
            guard !salt.isEmpty, digest.pbkdf2 != nil, (1...Self.maxRounds).contains(rounds), (16...128).contains(checksum.count) else { return nil }
        case .scrypt(let cost, let blockSize, let parallelism):
            guard !salt.isEmpty, cost >= 2, cost & (cost - 1) == 0, (1...64).contains(blockSize), (1...64).contains(parallelism),
                128 * blockSize * cost * parallelism <= Self.maxScryptMemory, (16...64).contains(checksum.count)
            else { return nil }
        case .firebaseScrypt(let memoryCost, let rounds, let separator, let signerKey):
            guard !salt.isEmpty, (1...30).contains(memoryCost), (1...64).contains(rounds), 128 * rounds << memoryCost <= Self.maxScryptMemory,
                separator.count <= 64, (16...1024).contains(signerKey.count), checksum.count == signerKey.count
            else { return nil }
        case .digest(let digest, let hmacKey, _):
            guard checksum.count == digest.byteCount, hmacKey.map({ (1...1024).contains($0.count) }) ?? true else { return nil }
        case .argon2, .bcrypt:
            return nil  // they arrive as text: init(_:)
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

    /// `a=1,b=2` with exactly the keys `names`, each a decimal number.
    private static func parameters(_ text: Substring, names: Set<Substring>) -> [Substring: Int]? {
        guard let options = options(text), Set(options.keys) == names else { return nil }
        var values: [Substring: Int] = [:]
        for (name, value) in options {
            guard let number = Int(value), number >= 0 else { return nil }
            values[name] = number
        }
        return values
    }

    /// `a=x,b=y`, each key once.
    private static func options(_ text: Substring) -> [Substring: Substring]? {
        var values: [Substring: Substring] = [:]
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, values.updateValue(parts[1], forKey: parts[0]) == nil else { return nil }
        }
        return values
    }

    /// This hash in the form ``init(_:)`` reads, for the forms of Gatehouse's own (Firebase's scrypt, digests) and
    /// for PBKDF2 (in passlib's form); nil for scrypt, which arrives as text already.
    var text: String? {
        let b64 = { (bytes: [UInt8]) in Data(bytes).base64EncodedString() }
        switch scheme {
        case .pbkdf2(let digest, let rounds):
            let name = digest == .sha1 ? "pbkdf2" : "pbkdf2-\(digest.rawValue)"
            let adapted = { (bytes: [UInt8]) in b64(bytes).replacingOccurrences(of: "+", with: ".").replacingOccurrences(of: "=", with: "") }
            return "$\(name)$\(rounds)$\(adapted(salt))$\(adapted(checksum))"
        case .scrypt:
            return nil
        case .argon2(let phc):
            return phc
        case .bcrypt:
            return nil
        case .firebaseScrypt(let memoryCost, let rounds, let separator, let signerKey):
            return "$firebase-scrypt$m=\(memoryCost),r=\(rounds)$\(b64(salt))$\(b64(separator))$\(b64(signerKey))$\(b64(checksum))"
        case .digest(let digest, let hmacKey, let saltFirst):
            let algorithm = hmacKey == nil ? digest.rawValue : "hmac-\(digest.rawValue)"
            return "$digest$a=\(algorithm),o=\(saltFirst ? "sp" : "ps")$\(b64(hmacKey ?? []))$\(b64(salt))$\(b64(checksum))"
        }
    }

    /// Whether `password` (its UTF-8 bytes, as Django and passlib hash them) makes this hash. Constant time in the
    /// comparison. Check ``work`` against ``HashCostBudget`` first: this runs whatever the hash costs.
    ///
    /// `isCancelled` is asked before every Argon2 segment and every bcrypt round; once it answers true those stop and
    /// this throws `CancellationError`. PBKDF2 and scrypt run to their end (within the budget, about a second at most).
    func verify(_ password: String, isCancelled: () -> Bool = { false }) throws -> Bool {
        let derived: SymmetricKey
        switch scheme {
        case .pbkdf2(let digest, let rounds):
            guard let function = digest.pbkdf2 else { return false }
            derived = try KDF.Insecure.PBKDF2.deriveKey(
                from: Array(password.utf8), salt: salt, using: function, outputByteCount: checksum.count, unsafeUncheckedRounds: rounds
            )
        case .scrypt(let cost, let blockSize, let parallelism):
            derived = try KDF.Scrypt.deriveKey(
                from: Array(password.utf8), salt: salt, outputByteCount: checksum.count, rounds: cost, blockSize: blockSize,
                parallelism: parallelism, maxMemory: Self.maxScryptMemory + 65536
            )
        case .firebaseScrypt(let memoryCost, let rounds, let separator, let signerKey):
            let key = try KDF.Scrypt.deriveKey(
                from: Array(password.utf8), salt: salt + separator, outputByteCount: 32, rounds: 1 << memoryCost, blockSize: rounds,
                parallelism: 1, maxMemory: Self.maxScryptMemory + 65536
            )
            let encrypted = try AES._CTR.encrypt(signerKey, using: key, nonce: AES._CTR.Nonce(nonceBytes: [UInt8](repeating: 0, count: 16)))
            return Secrets.constantTimeEquals(Array(encrypted), checksum)
        case .bcrypt(let bcrypt):
            guard let matches = bcrypt.verify(password, isCancelled: isCancelled) else { throw CancellationError() }
            return matches
        case .argon2(let phc):
            return try Argon2.verifyAnyPHC(
                password: password, phc: phc, maxMemoryKiB: Argon2PasswordHasher.maxMemoryKiB,
                maxWork: HashCostBudget.maxWork / HashCostBudget.argon2Block, isCancelled: isCancelled
            )
        case .digest(let digest, let hmacKey, let saltFirst):
            let password = Array(password.utf8)
            return Secrets.constantTimeEquals(digest.hash(saltFirst ? salt + password : password + salt, hmacKey: hmacKey), checksum)
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

    /// The PHC form's names (Auth0's `pbkdf2`): the digest is always named, `pbkdf2-sha1` included.
    private static func digest(phcName name: Substring) -> Digest? {
        switch name {
        case "pbkdf2-sha1": .sha1
        case "pbkdf2-sha256": .sha256
        case "pbkdf2-sha512": .sha512
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

    /// Standard base64, padded or not; empty for an empty field.
    private static func base64(_ text: Substring) -> [UInt8]? {
        var padded = String(text)
        while padded.count % 4 != 0 { padded += "=" }
        return Data(base64Encoded: padded).map(Array.init)
    }

    /// passlib's base64: `.` for `+`, no padding.
    private static func adaptedBase64(_ text: Substring) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: ".", with: "+")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map(Array.init)
    }
}
