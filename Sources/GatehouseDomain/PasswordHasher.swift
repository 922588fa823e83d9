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
    /// ``StoreError/unavailable(_:)`` when the server drops an imported hash's verification before it runs (a newer
    /// one from the same client took its turn).
    func verify(_ password: String, against hash: String, parameters: Argon2Parameters) async throws -> Bool
    /// ``verify(_:against:parameters:)`` for a login: `check` says whose hash it is and which client asks, so that an
    /// implementation that shares scarce work out (imported hashes, on a lane of their own) can be fair between
    /// accounts and between clients. The default ignores it.
    func verify(_ password: String, against hash: String, parameters: Argon2Parameters, for check: PasswordCheck) async throws -> Bool
    /// True when `hash` was made with other parameters than `parameters` (so it is upgraded at the next login).
    func needsRehash(_ hash: String, parameters: Argon2Parameters) -> Bool
    /// Verifies `password` against a fixed hash with `parameters`: the work done for an unknown account, so that
    /// its answer takes as long as a known one's.
    func burnVerify(_ password: String, parameters: Argon2Parameters) async throws
}

/// Whose password a verification checks and who asks for it: plain values the domain names, for a hasher that must be
/// fair between accounts and clients (``PasswordHasher/verify(_:against:parameters:for:)``).
package struct PasswordCheck: Sendable, Hashable {
    /// The account whose hash is checked: its app and user, as one opaque key.
    package var account: String
    /// The asking client as limits count it (``RequestOrigin/network``: an IPv4 address, an IPv6 /64); nil outside a
    /// request.
    package var network: String?

    package init(account: String, network: String?) {
        self.account = account
        self.network = network
    }
}

extension PasswordHasher {
    package func verify(_ password: String, against hash: String, parameters: Argon2Parameters, for check: PasswordCheck) async throws -> Bool {
        try await verify(password, against: hash, parameters: parameters)
    }
}
