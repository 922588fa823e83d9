import Foundation

/// The kinds of credential a user holds: one model for every rule that acts on "all of a user's credentials" — the
/// mailbox owner's trust reset, deleting a user, export and import, the admin view. The store iterates
/// ``allCases`` with an exhaustive `switch` at each of those places, so a new kind (a second factor, a passkey) does
/// not compile until each rule says what happens to it, and `CredentialModelTests` fails until it is covered.
package enum CredentialKind: String, Sendable, Hashable, CaseIterable {
    /// An email address the user holds: its email account (confirmed or pending, its mailbox proven or not) and its
    /// `local-userpass` identity.
    case mailbox
    /// The password of an email account. It lives on the account's row, so it goes wherever its mailbox goes; a
    /// mailbox proof decides what becomes of it (``MailboxProof``).
    case password
    /// An identity an identity provider, a custom JWT or the custom function vouches for, or an anonymous login's.
    case identity
    /// A user API key and its `api-key` identity.
    case apiKey = "api-key"
}

/// Who added a credential: a signed-in session, and what that session had proven when it did (its `amr` then, with
/// the credential's own proof last: a link proves the linked credential). Nil provenance means the credential came
/// with the account — a registration, a sign-up, a first login, an import — or from a proof of the mailbox itself (a
/// reset, an undo).
package struct Provenance: Sendable, Hashable {
    /// The session that added it.
    package var session: String
    package var methods: [AuthenticationMethod]

    package init(session: String, methods: [AuthenticationMethod]) {
        self.session = session
        self.methods = methods
    }

    /// The provenance of a credential the caller's session adds after proving `proof` (nil: nothing more).
    package init(adding proof: AuthenticationMethod?, by caller: SessionService.Caller) {
        session = caller.session.id
        methods = proof.map { SessionGate.adding($0, to: caller.session.methods) } ?? caller.session.methods
    }
}

/// One credential of a user, as the admin view and the tests see it.
package struct Credential: Sendable, Hashable {
    package var kind: CredentialKind
    /// The address (mailbox, password), the identity id, or the API key id.
    package var id: String
    /// The address as registered, the provider type, or the key's name.
    package var label: String
    /// When it was added (a password: when it was last set).
    package var addedAt: Date
    package var addedBy: Provenance?
    /// A mailbox: whether its owner proved it. Nil for other kinds.
    package var proven: Bool?

    package init(kind: CredentialKind, id: String, label: String, addedAt: Date, addedBy: Provenance?, proven: Bool? = nil) {
        self.kind = kind
        self.id = id
        self.label = label
        self.addedAt = addedAt
        self.addedBy = addedBy
        self.proven = proven
    }
}
