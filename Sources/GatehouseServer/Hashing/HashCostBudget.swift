import Foundation
import GatehouseArgon2

/// The most CPU one verification of a stored password hash may cost, whatever system made the hash: the one budget
/// an import checks every hash against (a hash over it is reported and not imported) and a login checks again before
/// it runs one (a row over it, tampered with after its import, is a wrong password and is never run).
///
/// Costs are in work units, about a nanosecond of one core of the project's 2-core test machine each, so that the
/// forms compare: each form's own measure of work, times what one of it was measured to cost there (best of three,
/// rounded up):
/// - Argon2 (every variant): memory × passes, the 1 KiB blocks it computes (``Argon2Parameters/work``): 0.39 µs a
///   block at m=19456, 0.50 µs at m=65536 (memory-bound), so 500. Lanes run one after another here, so they do not
///   change it.
/// - PBKDF2: rounds × derived-key blocks, blocks = ceil(derived-key length / digest length): each block of the key is
///   a chain of `rounds` HMACs of its own, so a 128-byte key of SHA-1 is seven chains. 0.36 µs a round of SHA-1,
///   0.40 µs of SHA-256 (400), 0.74 µs of SHA-512 (800).
/// - bcrypt: 2^cost rounds of the key schedule, two Blowfish key expansions each: 51 µs a round (51,000).
/// - scrypt (passlib's and Firebase's): N · r · p, the 128-byte blocks its ROMix writes and reads back: 0.49 µs a
///   block at N=2^17, r=8 with OpenSSL's optimised scrypt (500; swift-crypto's in an unoptimised debug build takes
///   three times as long).
/// - Salted digests and HMACs: a few compressions, 1 unit.
///
/// The budget, ``maxWork``, is 10^9 units: one verification costs at most about one second of one core. It passes
/// bcrypt up to cost 14 (0.84 s; 15 would take 1.7 s); PBKDF2-SHA256 at 600,000 rounds with a 32-byte key (0.24 s,
/// OWASP) or Django's 1,200,000 (0.48 s), PBKDF2-SHA1 at OWASP's 1,300,000 (0.52 s), Keycloak's pbkdf2-sha256 at 27,500
/// rounds with a 64-byte key (22 ms) and pbkdf2-sha512 at 210,000 (0.17 s); Firebase's default scrypt m=14, r=8
/// (65 ms), passlib's ln=16, r=8, p=1 (0.26 s) and OWASP's N·r·p = 2^20 (0.52 s); Argon2id at m=65536, t=3 (0.1 s),
/// OWASP's (15 ms) and up to 2,000,000 blocks (m=1 GiB, t=1). It stops Argon2 at 1 GiB and 1,000 passes (some
/// 9 minutes), PBKDF2-SHA1 with a 128-byte key at 10,000,000 rounds (25 s), and anything longer. An app's own
/// parameters are held to the same budget by the configuration's validation (``Argon2Parameters/maxWork``), so every
/// hash Gatehouse made under any valid configuration passes it: lowering an app's parameters never turns its users'
/// hashes into wrong passwords.
struct HashCostBudget {
    /// The most work units one verification may cost: 10^9, about one second of one core on the project's machine;
    /// Argon2 at ``Argon2Parameters/maxWork`` blocks.
    static let maxWork: UInt64 = Argon2Parameters.maxWork * argon2Block

    /// Units an Argon2 block (1 KiB, one pass) costs.
    static let argon2Block: UInt64 = 500
    /// Units one PBKDF2 round of one derived-key block costs, by digest.
    static func pbkdf2Round(_ digest: ForeignPasswordHash.Digest) -> UInt64 {
        switch digest {
        case .md5, .sha1, .sha256: 400
        case .sha512: 800
        }
    }
    /// Units one round of bcrypt's key schedule costs (2^cost of them).
    static let bcryptRound: UInt64 = 51_000
    /// Units one of scrypt's 128-byte blocks costs (N · r · p of them).
    static let scryptBlock: UInt64 = 500

    /// The work of Argon2 with `parameters`, in units.
    static func work(argon2 parameters: Argon2Parameters) -> UInt64 {
        parameters.work.multipliedReportingOverflow(by: argon2Block).overflow ? .max : parameters.work * argon2Block
    }

    /// What a login does with a stored hash.
    enum Assessment: Sendable, Hashable {
        /// Gatehouse's own Argon2id that costs no more than a hash of the app's own parameters: every ordinary login's
        /// hash, verified on the regular hashing threads.
        case own(Argon2Parameters)
        /// Another hash a login reads, within the budget: Gatehouse's own form with other parameters (an export file's,
        /// or an earlier configuration's) or another system's; verified on the imported-hash lane.
        case imported(ImportedHash, work: UInt64)
        /// Not a hash a login reads, or over the budget: a wrong password, never run. Says why.
        case refused(String)
    }

    /// A hash that ``Assessment/imported(_:work:)`` verifies.
    enum ImportedHash: Sendable, Hashable {
        case argon2id(phc: String)
        case foreign(ForeignPasswordHash)
    }

    /// Whether a login may run `hash`, and where. `ownParameters` are the app's Argon2id parameters: Gatehouse's form
    /// costing no more than they do is ``Assessment/own(_:)`` whatever the budget (nil: none is).
    static func assess(_ hash: String, ownParameters: Argon2Parameters?) -> Assessment {
        if let stored = try? Argon2.parseParameters(phc: hash) {
            guard stored.memoryKiB <= Argon2PasswordHasher.maxMemoryKiB else {
                return .refused("its Argon2id memory, \(stored.memoryKiB) KiB, is above the limit of \(Argon2PasswordHasher.maxMemoryKiB) KiB")
            }
            if let ownParameters, stored.work <= ownParameters.work { return .own(stored) }
            let work = Self.work(argon2: stored)
            guard work <= maxWork else { return .refused(overBudget(work, "Argon2id m=\(stored.memoryKiB) KiB, t=\(stored.iterations)")) }
            return .imported(.argon2id(phc: hash), work: work)
        }
        guard let foreign = ForeignPasswordHash(hash) else { return .refused("it is in no form a login can verify") }
        guard let work = foreign.work, work <= maxWork else {
            return .refused(overBudget(foreign.work ?? .max, foreign.costDescription))
        }
        return .imported(.foreign(foreign), work: work)
    }

    /// Why a hash of `work` units is refused.
    static func overBudget(_ work: UInt64, _ what: String) -> String {
        let seconds = Double(work) / 1e9
        let shown = work == .max ? "more than can be counted" : "\(work) work units (~\(seconds < 100 ? String(format: "%.1f", seconds) : String(Int(seconds))) s)"
        return "its password hash (\(what)) would cost \(shown) at every login, over the cost budget of \(maxWork) (~1 s; see docs/migrating.md)"
    }
}
