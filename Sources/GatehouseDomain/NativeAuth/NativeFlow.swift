import Crypto
import Foundation
import GatehouseWire

/// One native auth flow (a sign-up, a sign-in or a password reset) between its start and its end.
///
/// Exactly one continuation token is valid per flow at a time: every step replaces ``tokenHash`` with the hash of
/// a new token, in one conditional update on the old hash, so a replayed token or the loser of two racing requests
/// finds a hash that no longer matches. A step that fails (a wrong code, a weak password) leaves the token as it
/// was, as MSAL clients expect: they retry with the token they hold.
package struct NativeFlowRecord: Sendable, Hashable {
    package enum Kind: String, Sendable, Hashable {
        case signUp = "signup"
        case signIn = "signin"
        case resetPassword = "reset"
    }

    /// Where the flow stands: which endpoint may take its current token.
    package enum Step: String, Sendable, Hashable {
        /// After `start` / `initiate`: waiting for `challenge`.
        case started
        /// A code was emailed: `continue` (or `/token` with `oob`) checks it; `challenge` sends another.
        case codeSent = "code_sent"
        /// Sign-up: the address is verified, a password is still needed: `challenge` answers `password`.
        case passwordNeeded = "password_needed"
        /// Sign-up after `challenge` answered `password`, sign-in with a password: the password comes next.
        case password
        /// Sign-up: required attributes are missing.
        case attributes
        /// Reset: the code was right; `submit` takes the new password.
        case newPassword = "new_password"
        /// Reset: the password is set; `poll_completion` reports it.
        case submitted
        /// Sign-up or reset finished: `/token` with `grant_type=continuation_token` signs the user in.
        case completed
        /// Tokens were issued, or the flow died (too many wrong codes): no token works any more.
        case finished
    }

    package var id: String
    package var appId: String
    package var clientId: String
    package var kind: Kind
    package var step: Step
    /// Normalized (lowercased) email the flow is for.
    package var username: String
    /// The address as typed, for emails.
    package var email: String
    /// The existing account's user (sign-in, reset), or the new user once sign-up completes. Nil for an unknown
    /// address in a sign-in or reset (the flow then plays along and fails at the code or password).
    package var userId: String?
    /// The ``UserRecord/sessionEpoch`` of ``userId`` the flow holds to. The store pins it when the flow fixes its user
    /// (at its start, or when a sign-up creates the user) and again after the flow's own effects (a reset ends every
    /// session), and refuses every later step (``StoreError/sessionEnded``) once it moved, or once the flow's address
    /// is no longer the user's. So whatever ends the user's sessions — the owner's reset, an email-change undo, log
    /// out everywhere — ends the sign-ins under way too: a code someone else holds no longer signs in.
    ///
    /// A reset holds to its address only. Its code proves the mailbox, which outranks every session: were it held
    /// to the epoch too, anyone with one of the user's sessions, however stale, could keep the owner from ever
    /// resetting natively by ending the other sessions again and again, while the reset is the owner's way to end
    /// theirs. A held reset code is worth nothing the mailbox could not give its holder again, and once the address
    /// moves (an undo gives it back) the flow goes nowhere. Once a reset sets its password, it is held to the epoch
    /// as it left it (its sign-in after the reset ends with the user's next ending of sessions), and every other reset
    /// of the user under way that has not set one is deleted, its reset links superseded: an older reset code cannot
    /// set a password over the owner's newer one.
    /// Nil before the flow has a user. Set by the store only.
    package var userEpoch: Int?
    /// The `challenge_type` list the client started with.
    package var challengeTypes: Set<NativeAuthChallengeType>
    package var tokenHash: [UInt8]
    package var tokenExpiresAt: Date
    /// SHA-256 of the flow id and the current code.
    package var codeHash: [UInt8]?
    package var codeExpiresAt: Date?
    package var codeSentAt: Date?
    /// Wrong codes and passwords so far (all of this flow's codes together).
    package var attempts: Int
    /// The email address was proven with a code.
    package var verified: Bool
    /// Sign-up: the Argon2id hash of the password chosen so far.
    package var passwordHash: String?
    /// Sign-up: the attributes given so far.
    package var attributes: [String: String]
    package var createdAt: Date

    package init(
        id: String, appId: String, clientId: String, kind: Kind, step: Step, username: String, email: String,
        userId: String? = nil, challengeTypes: Set<NativeAuthChallengeType>, tokenHash: [UInt8], tokenExpiresAt: Date,
        codeHash: [UInt8]? = nil, codeExpiresAt: Date? = nil, codeSentAt: Date? = nil, attempts: Int, verified: Bool,
        passwordHash: String? = nil, attributes: [String: String], createdAt: Date, userEpoch: Int? = nil
    ) {
        self.id = id
        self.appId = appId
        self.clientId = clientId
        self.kind = kind
        self.step = step
        self.username = username
        self.email = email
        self.userId = userId
        self.userEpoch = userEpoch
        self.challengeTypes = challengeTypes
        self.tokenHash = tokenHash
        self.tokenExpiresAt = tokenExpiresAt
        self.codeHash = codeHash
        self.codeExpiresAt = codeExpiresAt
        self.codeSentAt = codeSentAt
        self.attempts = attempts
        self.verified = verified
        self.passwordHash = passwordHash
        self.attributes = attributes
        self.createdAt = createdAt
    }
}

/// What counting one attempt against a flow did (``Store/recordFlowAttempt(id:tokenHash:limit:)``), before a step
/// checks the code or password it was sent.
package enum FlowAttemptCount: Sendable, Hashable {
    /// Counted: the step checks its answer. `attempt` is the flow's count with this one (1 for its first), as the
    /// count's own write returned it: racing steps on one flow are told 1, 2, … in the order they were counted.
    case counted(attempt: Int)
    /// The token is no longer the flow's current one (a racing step took it), or the flow is gone.
    case tokenSpent
    /// The flow's basis ended (``NativeFlowRecord/userEpoch``): its user ended every session, or no longer has the
    /// flow's address, since the flow pinned them. No later step can take the flow, whatever it is sent: the client
    /// starts again. Told before any answer is checked, so that a stale flow is no oracle for a password.
    case flowEnded
    /// The flow had used up its attempts: it is dead. (Racing requests on one flow that were refused unchecked give
    /// theirs back after this was read, so a client racing its own flow may be told so while the flow lives on.)
    case exhausted
}

/// A continuation token or a native refresh token: opaque to clients; inside, the id of its row (a flow or a
/// session, 12 bytes) and a 256-bit secret, base64url. Only the SHA-256 of the secret is stored.
package struct OpaqueToken: Sendable, Hashable {
    /// The flow or session id (24 hex digits).
    package var id: String
    package var secret: [UInt8]

    package init(id: String, secret: [UInt8]) {
        self.id = id
        self.secret = secret
    }

    package static func make(id: String) -> OpaqueToken {
        OpaqueToken(id: id, secret: Secrets.randomBytes(32))
    }

    package var hash: [UInt8] { Array(SHA256.hash(data: secret)) }

    package var encoded: String { Base64URL.encode(Self.bytes(hex: id) + secret) }

    /// Parses a token; nil for anything that is not one of ours, including another spelling of one (``Base64URL``
    /// decodes only the canonical form).
    package init?(_ text: String) {
        guard text.utf8.count <= 128, let data = Base64URL.decode(text), data.count == 44 else { return nil }
        let bytes = [UInt8](data)
        id = Secrets.hex(Array(bytes[0..<12]))
        secret = Array(bytes[12...])
    }

    private static func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var iterator = hex.utf8.makeIterator()
        func nibble(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : (c | 0x20) - 87 }
        while let high = iterator.next(), let low = iterator.next() { out.append(nibble(high) << 4 | nibble(low)) }
        return out
    }
}

/// An emailed one-time code: decimal digits from the system CSPRNG, stored as the SHA-256 of flow id and code.
package enum OneTimeCode {
    package static func generate(length: Int) -> String {
        var rng = SystemRandomNumberGenerator()
        return String((0..<length).map { _ in Character(String(UInt8.random(in: 0...9, using: &rng))) })
    }

    package static func hash(_ code: String, flowId: String) -> [UInt8] { Secrets.sha256("\(flowId):\(code)") }

    /// `alice@example.com` → `a***e@e***e.com`: enough for the user to recognise the address, not to learn it.
    package static func maskedAddress(_ email: String) -> String {
        guard let at = email.lastIndex(of: "@") else { return "***" }
        func mask(_ part: Substring) -> String {
            guard let first = part.first, let last = part.last else { return "" }
            return part.count <= 2 ? "\(first)***" : "\(first)***\(last)"
        }
        let local = email[..<at]
        let domain = email[email.index(after: at)...]
        var labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        let tld = labels.count > 1 ? labels.removeLast() : nil
        let maskedDomain = labels.map(mask).joined(separator: ".") + (tld.map { "." + $0 } ?? "")
        return mask(local) + "@" + maskedDomain
    }
}

/// Something that happens in the same transaction as a flow's step, so that the step and its effect both happen or
/// neither does.
package enum NativeFlowEffect: Sendable {
    /// Queue an email. With `dryRun` the row is written and removed again: the work done for an unknown address.
    case mail(OutboxMessage, dryRun: Bool)
    /// Sign-up completes: the user, their `local-userpass` identity and the (confirmed, proven) account. A pending
    /// account of the address (someone's registration that no one confirmed) is deleted first: the sign-up proved
    /// the mailbox and restarts it. Throws ``StoreError/conflict`` when a confirmed account has the address.
    case createAccount(UserRecord, IdentityRecord, EmailAccountRecord)
    /// Reset completes: the proof with the new password, and every session of the user revoked.
    case resetPassword(userId: String, email: String, passwordHash: String)
    /// A code proved the mailbox of the user's account of `email` (normalized) (``MailboxProof``).
    case proveMailbox(userId: String, email: String, MailboxProof)
    /// A session the gate issued for the flow's proof (``SessionGate/nativeSession(_:client:refresh:)``).
    case createSession(IssuedSession)

    /// Whether it changes the flow's user (makes it, or may end its sessions): the flow then pins the user's epoch
    /// again (``NativeFlowRecord/userEpoch``).
    package var changesUser: Bool {
        switch self {
        case .createAccount, .resetPassword, .proveMailbox: true
        case .mail, .createSession: false
        }
    }
}
