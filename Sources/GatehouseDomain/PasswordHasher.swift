import Foundation
import GatehouseArgon2

/// Hashes and verifies passwords. Hashing is slow on purpose, so implementations run it off the event loops
/// and callers never hold a database transaction while it runs.
package protocol PasswordHasher: Sendable {
    func hash(_ password: String, parameters: Argon2Parameters) async throws -> String
    /// Whether `password` makes `hash`. `parameters` are the app's own: a hash of Gatehouse's form that costs no more
    /// than a hash of them is an ordinary login's; any other (an imported hash, or Gatehouse's form with costlier
    /// parameters, from an export file) is verified only within the server's cost budget for imported hashes, apart
    /// from ordinary logins, and a hash over that budget is a wrong password, never run. Throws
    /// ``StoreError/unavailable(_:)`` when the server is too busy with imported hashes to take this one now.
    func verify(_ password: String, against hash: String, parameters: Argon2Parameters) async throws -> Bool
    /// True when `hash` was made with other parameters than `parameters` (so it is upgraded at the next login).
    func needsRehash(_ hash: String, parameters: Argon2Parameters) -> Bool
    /// Verifies `password` against a fixed hash with `parameters`: the work done for an unknown account, so that
    /// its answer takes as long as a known one's.
    func burnVerify(_ password: String, parameters: Argon2Parameters) async throws
}

