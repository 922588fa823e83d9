import Foundation
import GatehouseArgon2

/// Hashes and verifies passwords. Hashing is slow on purpose, so implementations run it off the event loops
/// and callers never hold a database transaction while it runs.
package protocol PasswordHasher: Sendable {
    func hash(_ password: String, parameters: Argon2Parameters) async throws -> String
    func verify(_ password: String, against hash: String) async throws -> Bool
    /// True when `hash` was made with other parameters than `parameters` (so it is upgraded at the next login).
    func needsRehash(_ hash: String, parameters: Argon2Parameters) -> Bool
    /// Verifies `password` against a fixed hash with `parameters`: the work done for an unknown account, so that
    /// its answer takes as long as a known one's.
    func burnVerify(_ password: String, parameters: Argon2Parameters) async throws
}

