import Foundation

/// How a flow proved that the caller reads an account's mailbox, which decides what the proof does to the account
/// (the security model's "proving a mailbox is a reset of trust", `docs/security-model.md`).
///
/// Every proof confirms a pending account and marks the mailbox proven. The first proof of a mailbox that was never
/// proven before (a pending registration, an account an app confirmed automatically) also discards every credential
/// that someone who had not proven the mailbox could have set: the password, unless this is the confirmation of the
/// registration that set it; the user's API keys; every identity but the email one; and every session. So whoever
/// registered someone else's address first, or linked their own login to it, loses it when the owner shows up.
///
/// The store applies a proof in the transaction of the step that made it (``GatehouseStore``), and nowhere else:
/// every flow that proves a mailbox (a confirmation link, an emailed code, a reset by link, code or function, a
/// hosted page) goes through this one rule. A confirmation function's `success` is not one: it confirms the account
/// and leaves the mailbox unproven (`SQLStore.confirmVouched`), as `confirmation: auto` does.
package enum MailboxProof: Sendable, Hashable {
    /// The link (or a token the confirmation function handed on) of the registration that set the account's
    /// password: the password stays
    /// (it is the one the registration chose, and no other registration can have replaced it since, because a new
    /// registration supersedes the older links) — unless more than one registration named the address while it was
    /// pending (`contested`). Then nobody can tell whose password the newest registration set: the one that reads
    /// the mailbox may have registered first and someone else second. The proof then confirms the account and the
    /// mailbox but no password, and discards what any registrant added, as the owner's first proof does; the owner
    /// chooses a password (the hosted page asks at once; otherwise a reset).
    case registrationConfirmed
    /// An emailed code, a reset link or code, a reset function: `newPasswordHash` is the password the proof sets
    /// (a reset), or nil (a code sign-in, which keeps a proven password and discards an unproven one).
    case ownerProven(newPasswordHash: String?)

    /// The password hash to store, given the current one, whether the mailbox had been proven before, and whether
    /// several registrations named the pending address.
    package func passwordHash(current: String, wasProven: Bool, contested: Bool = false) -> String {
        switch self {
        case .registrationConfirmed: contested && !wasProven ? "" : current
        case .ownerProven(let new?): new
        case .ownerProven(nil): wasProven ? current : ""
        }
    }

    /// Whether this proof discards what was set before it: the first proof by the owner of a never-proven mailbox
    /// (a contested registration's confirmation is one).
    package func resetsTrust(wasProven: Bool, contested: Bool = false) -> Bool {
        switch self {
        case .ownerProven: !wasProven
        case .registrationConfirmed: contested && !wasProven
        }
    }

    /// What a confirmation did: confirmed the registration's password, or (contested) none.
    package enum Confirmation: Sendable, Hashable {
        case passwordConfirmed
        case noPassword
    }
}
