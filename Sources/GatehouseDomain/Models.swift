import Foundation
import GatehouseWire

/// A user of one app. Identities (how they sign in) hang off it.
package struct UserRecord: Sendable, Hashable {
    package var id: String
    package var appId: String
    package var createdAt: Date
    package var disabled: Bool
    /// Custom user data: travels in the `user_data` claim of access tokens. `{}` until set.
    package var customData: [String: JSONValue]
    /// How many times every session of the user has been ended, as read with the user. A session proven on this
    /// record is written only while the count is unchanged: a login in flight when the owner resets the password
    /// (or anything else ends every session) gets none.
    package var sessionEpoch: Int

    package init(id: String, appId: String, createdAt: Date, disabled: Bool, customData: [String: JSONValue], sessionEpoch: Int = 0) {
        self.id = id
        self.appId = appId
        self.createdAt = createdAt
        self.disabled = disabled
        self.customData = customData
        self.sessionEpoch = sessionEpoch
    }
}

/// One way a user signs in: `local-userpass` with an email, and later anonymous, API keys, JWT, Google, …
package struct IdentityRecord: Sendable, Hashable {
    package var id: String
    package var userId: String
    package var appId: String
    package var providerType: String
    /// The provider's key for this identity (normalized email for `local-userpass`). Unique per app and provider.
    package var externalId: String
    /// Profile data contributed by this identity (`email`, `name`, …).
    package var data: [String: JSONValue]
    package var createdAt: Date
    /// The signed-in session that added it (a link, an API key), or nil for one that came with the account.
    package var addedBy: Provenance? = nil

    package init(
        id: String, userId: String, appId: String, providerType: String, externalId: String, data: [String: JSONValue],
        createdAt: Date, addedBy: Provenance? = nil
    ) {
        self.addedBy = addedBy
        self.id = id
        self.userId = userId
        self.appId = appId
        self.providerType = providerType
        self.externalId = externalId
        self.data = data
        self.createdAt = createdAt
    }
}

/// The password and confirmation state behind a `local-userpass` identity.
package struct EmailAccountRecord: Sendable, Hashable {
    package var appId: String
    /// Normalized (trimmed, lowercased).
    package var email: String
    package var userId: String
    /// Argon2id PHC string (or an imported format, later); empty for an account without a password (made by native
    /// sign-up with email codes only).
    package var passwordHash: String
    /// When the account was confirmed (left pending); nil while pending.
    package var confirmedAt: Date?
    /// When the owner of the address first proved they read it (``MailboxProof``). Nil for a pending account and
    /// for one an app with `confirmation: auto` confirmed without a proof.
    package var mailboxProvenAt: Date? = nil
    /// The address as the account's first registration spelled it (trimmed, NFC): every email about the account
    /// goes here, never to the spelling of whoever asks (``recipient``). Nil for accounts made before it was kept.
    package var address: String? = nil
    /// When a second registration named this address while it was pending: its confirmation then proves the mailbox
    /// and confirms no password (``MailboxProof``).
    package var contestedAt: Date? = nil
    /// The account came from another system (a lazy migration, an import). It never changes; whether the old system
    /// still has a say is ``oldSystemMayVouch``.
    package var fromOldSystem = false
    /// When the password was last set by a change or a reset, or cleared by an email-change undo or by a first proof
    /// of the mailbox that discards a password no proof stood behind, or left empty by the owner's proof of the
    /// mailbox of an account without one (nil: as registered, imported or migrated).
    package var passwordSetAt: Date? = nil
    /// The signed-in session that set it (a password change); nil for a reset or one that came with the account.
    package var passwordSetBy: Provenance? = nil

    package init(
        appId: String, email: String, userId: String, passwordHash: String, confirmedAt: Date? = nil,
        mailboxProvenAt: Date? = nil, address: String? = nil, contestedAt: Date? = nil, fromOldSystem: Bool = false,
        passwordSetAt: Date? = nil, passwordSetBy: Provenance? = nil
    ) {
        self.passwordSetAt = passwordSetAt
        self.passwordSetBy = passwordSetBy
        self.appId = appId
        self.email = email
        self.userId = userId
        self.passwordHash = passwordHash
        self.confirmedAt = confirmedAt
        self.mailboxProvenAt = mailboxProvenAt
        self.address = address
        self.contestedAt = contestedAt
        self.fromOldSystem = fromOldSystem
    }

    /// Whether the migrate-user function may vouch for this account's missing password: it came from the old system,
    /// and Gatehouse has never set or cleared its password since (a change, a reset, an undo). Once Gatehouse has, the
    /// old system's password never returns: an undo leaves the owner a reset as the only way back. Derived from the
    /// two columns every password write keeps anyway, so that no write has to remember a third.
    package var oldSystemMayVouch: Bool { fromOldSystem && passwordSetAt == nil }

    /// Where email about this account goes: its stored ``address``, else its key.
    package var recipient: String { address ?? email }
}

/// What a one-time token is for.
package enum OneTimeTokenKind: String, Sendable, Hashable {
    case confirmation
    case passwordReset = "password_reset"
    /// A code mailed to the account's address that proves a signed-in session again (``AccountService``). Its
    /// requester is the session that asked: it is good in that session only.
    case reauthenticationCode = "reauthentication_code"
    /// A code mailed to the address a signed-in user wants instead of theirs; the change happens when it comes back
    /// in the session that asked. The token's `email` and `address` are the new address.
    case emailChangeCode = "email_change_code"
    /// The link mailed to the old address after a change: it puts the old address back and ends everything the
    /// change could have let someone else do. Its `email` and `address` are the old address.
    case emailChangeUndo = "email_change_undo"
}

/// A confirmation or reset token. Only the SHA-256 of its secret is stored.
package struct OneTimeTokenRecord: Sendable, Hashable {
    package var id: String
    package var appId: String
    package var kind: OneTimeTokenKind
    package var userId: String
    package var secretHash: [UInt8]
    package var createdAt: Date
    package var expiresAt: Date
    package var usedAt: Date?
    package var supersededAt: Date?
    /// The (normalized) address the token was made for: a confirmation or reset proves this mailbox and no other of
    /// the user's. Nil for tokens made before it was recorded.
    package var email: String? = nil
    /// Who asked for it: a key of the asking client (``RequestOrigin/network``, hashed), empty when unknown. A newer
    /// token supersedes only the older ones the same client asked for, so that someone else asking for mail to the
    /// address cannot void the link the owner holds.
    package var requester: String = ""
    /// Wrong guesses of a code so far (codes only): at ``AccountCodes/maxAttempts`` it is spent.
    package var attempts: Int = 0
    /// The address as the user spelled it, where it differs from `email`'s normalized form (a new or old address of
    /// an email change).
    package var address: String? = nil
    /// What the token acts on beyond its user, where that is not its address: for an email change's undo, the
    /// email/password identity whose address changed (which a later change may have moved again).
    package var subject: String? = nil

    package init(
        id: String, appId: String, kind: OneTimeTokenKind, userId: String, secretHash: [UInt8], createdAt: Date,
        expiresAt: Date, usedAt: Date? = nil, supersededAt: Date? = nil, email: String? = nil, requester: String = "",
        attempts: Int = 0, address: String? = nil, subject: String? = nil
    ) {
        self.attempts = attempts
        self.address = address
        self.subject = subject
        self.id = id
        self.appId = appId
        self.kind = kind
        self.userId = userId
        self.secretHash = secretHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.supersededAt = supersededAt
        self.email = email
        self.requester = requester
    }
}

/// A refresh-token session: one login on one device.
package struct SessionRecord: Sendable, Hashable {
    package var id: String
    package var appId: String
    package var userId: String
    package var deviceId: String
    /// `options.device` of the login, kept as sent.
    package var device: [String: JSONValue]
    /// SHA-256 of the refresh token's secret (`jti`).
    package var secretHash: [UInt8]
    package var createdAt: Date
    package var expiresAt: Date
    package var revokedAt: Date?
    /// Native auth sessions: the `client_id` the tokens were issued to (the `aud` of their id tokens).
    package var clientId: String? = nil
    /// Native auth refresh tokens rotate: the secret before the current one, while it may still be retried.
    package var previousSecretHash: [UInt8]? = nil
    /// The salt the current secret was derived from the previous one with.
    package var rotationSalt: [UInt8]? = nil
    package var rotatedAt: Date? = nil
    /// The API key the session was logged in with: disabling or deleting the key ends the session.
    package var apiKeyId: String? = nil
    /// When the refresh token was last used (at most a minute off); nil until its first use.
    package var lastUsedAt: Date? = nil
    /// How the session began, which decides what it may do (``SessionKind``).
    package var kind: SessionKind = .firstParty
    /// The methods that proved it (``AuthenticationMethod``, RFC 8176 `amr` values), in the order they were proven.
    package var methods: [AuthenticationMethod] = []
    /// When its user last proved a first-party credential in it (`auth_time`); the session's start for now.
    package var provenAt: Date? = nil

    /// When the session was last active: its last refresh, rotation or login.
    package var lastActiveAt: Date { [lastUsedAt, rotatedAt, createdAt].compactMap { $0 }.max()! }

    package init(
        id: String, appId: String, userId: String, deviceId: String, device: [String: JSONValue], secretHash: [UInt8],
        createdAt: Date, expiresAt: Date, revokedAt: Date? = nil, clientId: String? = nil,
        previousSecretHash: [UInt8]? = nil, rotationSalt: [UInt8]? = nil, rotatedAt: Date? = nil,
        apiKeyId: String? = nil, lastUsedAt: Date? = nil, kind: SessionKind? = nil, methods: [AuthenticationMethod] = [],
        provenAt: Date? = nil
    ) {
        self.id = id
        self.appId = appId
        self.userId = userId
        self.deviceId = deviceId
        self.device = device
        self.secretHash = secretHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.clientId = clientId
        self.previousSecretHash = previousSecretHash
        self.rotationSalt = rotationSalt
        self.rotatedAt = rotatedAt
        self.apiKeyId = apiKeyId
        self.lastUsedAt = lastUsedAt
        self.kind = kind ?? (apiKeyId == nil ? .firstParty : .apiKey)
        self.methods = methods
        self.provenAt = provenAt
    }
}

/// A user or server API key. Only the SHA-256 of its secret is stored. Each key has an `api-key` identity whose
/// `externalId` is the key's id: on its owner for a user key, on a user of its own for a server key.
package struct APIKeyRecord: Sendable, Hashable {
    package var id: String
    package var appId: String
    /// The owner of a user key; nil for a server key (made with `gatehouse apikeys`).
    package var userId: String?
    /// Unique per owner (and among the app's server keys).
    package var name: String
    package var keyHash: [UInt8]
    package var disabled: Bool
    package var createdAt: Date

    package init(
        id: String, appId: String, userId: String? = nil, name: String, keyHash: [UInt8], disabled: Bool,
        createdAt: Date
    ) {
        self.id = id
        self.appId = appId
        self.userId = userId
        self.name = name
        self.keyHash = keyHash
        self.disabled = disabled
        self.createdAt = createdAt
    }
}

/// An email waiting in (or delivered from) the transactional outbox.
package struct OutboxMessage: Sendable, Hashable {
    package enum Status: String, Sendable, Hashable {
        case pending, delivered, failed
    }
    package var id: String
    package var appId: String
    /// `confirmation`, `password_reset`, `already_confirmed`, …
    package var kind: String
    package var recipient: String
    package var subject: String
    package var text: String
    package var html: String
    package var createdAt: Date
    package var status: Status = .pending
    package var attempts: Int = 0
    package var nextAttemptAt: Date
    package var deliveredAt: Date? = nil
    package var lastError: String? = nil

    package init(
        id: String, appId: String, kind: String, recipient: String, subject: String, text: String, html: String,
        createdAt: Date, status: Status = .pending, attempts: Int = 0, nextAttemptAt: Date, deliveredAt: Date? = nil,
        lastError: String? = nil
    ) {
        self.id = id
        self.appId = appId
        self.kind = kind
        self.recipient = recipient
        self.subject = subject
        self.text = text
        self.html = html
        self.createdAt = createdAt
        self.status = status
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
        self.lastError = lastError
    }
}

/// An ES256 signing key. The newest one signs; all verify.
package struct SigningKeyRecord: Sendable, Hashable {
    package var kid: String
    /// Raw P-256 private key (32 bytes).
    package var privateKey: [UInt8]
    package var createdAt: Date

    package init(kid: String, privateKey: [UInt8], createdAt: Date) {
        self.kid = kid
        self.privateKey = privateKey
        self.createdAt = createdAt
    }
}

/// A rate limit counter: `key` names the app, the kind of request and the client address or hashed identifier.
package struct RateCounter: Sendable, Hashable {
    package var key: String
    /// Seconds.
    package var window: Int
    /// How many requests this write counts (more than one when an instance writes hits it admitted on its own).
    package var hits: Int
    /// When the window these hits fall in started, as the writer knows it; nil: at the write.
    package var windowStart: Date?

    package init(key: String, window: Int, hits: Int = 1, windowStart: Date? = nil) {
        self.key = key
        self.window = window
        self.hits = hits
        self.windowStart = windowStart
    }
}

/// What a counter holds after a hit.
package struct RateCount: Sendable, Hashable {
    package var hits: Int
    package var windowStart: Date

    package init(hits: Int, windowStart: Date) {
        self.hits = hits
        self.windowStart = windowStart
    }
}

/// A run of consecutive failed password checks for one identifier.
package struct LoginFailureRecord: Sendable, Hashable {
    package var failures: Int
    package var lastAttemptAt: Date

    package init(failures: Int, lastAttemptAt: Date) {
        self.failures = failures
        self.lastAttemptAt = lastAttemptAt
    }
}

/// One line of the audit log: a security event, never a secret (`gatehouse audit tail` prints them).
public struct AuditEvent: Sendable, Hashable {
    /// Assigned by the store, in recording order; nil before it is stored.
    public var seq: Int64? = nil
    public var at: Date
    /// The app, or `*` for server-wide events (signing keys).
    public var appId: String
    /// `login_succeeded`, `login_failed`, `refresh`, … (``AuditKind``; docs/security-model.md lists them).
    public var kind: String
    public var userId: String?
    public var ip: String?
    public var userAgent: String?
    /// Non-secret facts about the event (the provider, the reason of a failure, a key id).
    public var detail: [String: String] = [:]

    package init(
        seq: Int64? = nil, at: Date, appId: String, kind: String, userId: String? = nil, ip: String? = nil,
        userAgent: String? = nil, detail: [String: String] = [:]
    ) {
        self.seq = seq
        self.at = at
        self.appId = appId
        self.kind = kind
        self.userId = userId
        self.ip = ip
        self.userAgent = userAgent
        self.detail = detail
    }
}
