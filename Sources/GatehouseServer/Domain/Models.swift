import Foundation
import GatehouseWire

/// A user of one app. Identities (how they sign in) hang off it.
struct UserRecord: Sendable, Hashable {
    var id: String
    var appId: String
    var createdAt: Date
    var disabled: Bool
    /// Custom user data: travels in the `user_data` claim of access tokens. `{}` until set.
    var customData: [String: JSONValue]
}

/// One way a user signs in: `local-userpass` with an email, and later anonymous, API keys, JWT, Google, …
struct IdentityRecord: Sendable, Hashable {
    var id: String
    var userId: String
    var appId: String
    var providerType: String
    /// The provider's key for this identity (normalized email for `local-userpass`). Unique per app and provider.
    var externalId: String
    /// Profile data contributed by this identity (`email`, `name`, …).
    var data: [String: JSONValue]
    var createdAt: Date
}

/// The password and confirmation state behind a `local-userpass` identity.
struct EmailAccountRecord: Sendable, Hashable {
    var appId: String
    /// Normalized (trimmed, lowercased).
    var email: String
    var userId: String
    /// Argon2id PHC string (or an imported format, later); empty for an account without a password (made by native
    /// sign-up with email codes only).
    var passwordHash: String
    /// When the account was confirmed (left pending); nil while pending.
    var confirmedAt: Date?
    /// When the owner of the address first proved they read it (``MailboxProof``). Nil for a pending account and
    /// for one an app with `confirmation: auto` confirmed without a proof.
    var mailboxProvenAt: Date? = nil
}

/// What a one-time token is for.
enum OneTimeTokenKind: String, Sendable, Hashable {
    case confirmation
    case passwordReset = "password_reset"
}

/// A confirmation or reset token. Only the SHA-256 of its secret is stored.
struct OneTimeTokenRecord: Sendable, Hashable {
    var id: String
    var appId: String
    var kind: OneTimeTokenKind
    var userId: String
    var secretHash: [UInt8]
    var createdAt: Date
    var expiresAt: Date
    var usedAt: Date?
    var supersededAt: Date?
    /// The (normalized) address the token was made for: a confirmation or reset proves this mailbox and no other of
    /// the user's. Nil for tokens made before it was recorded.
    var email: String? = nil
}

/// A refresh-token session: one login on one device.
struct SessionRecord: Sendable, Hashable {
    var id: String
    var appId: String
    var userId: String
    var deviceId: String
    /// `options.device` of the login, kept as sent.
    var device: [String: JSONValue]
    /// SHA-256 of the refresh token's secret (`jti`).
    var secretHash: [UInt8]
    var createdAt: Date
    var expiresAt: Date
    var revokedAt: Date?
    /// Native auth sessions: the `client_id` the tokens were issued to (the `aud` of their id tokens).
    var clientId: String? = nil
    /// Native auth refresh tokens rotate: the secret before the current one, while it may still be retried.
    var previousSecretHash: [UInt8]? = nil
    /// The salt the current secret was derived from the previous one with.
    var rotationSalt: [UInt8]? = nil
    var rotatedAt: Date? = nil
    /// The API key the session was logged in with: disabling or deleting the key ends the session.
    var apiKeyId: String? = nil
    /// When the refresh token was last used (at most a minute off); nil until its first use.
    var lastUsedAt: Date? = nil

    /// When the session was last active: its last refresh, rotation or login.
    var lastActiveAt: Date { [lastUsedAt, rotatedAt, createdAt].compactMap { $0 }.max()! }
}

/// A user or server API key. Only the SHA-256 of its secret is stored. Each key has an `api-key` identity whose
/// `externalId` is the key's id: on its owner for a user key, on a user of its own for a server key.
struct APIKeyRecord: Sendable, Hashable {
    var id: String
    var appId: String
    /// The owner of a user key; nil for a server key (made with `gatehouse apikeys`).
    var userId: String?
    /// Unique per owner (and among the app's server keys).
    var name: String
    var keyHash: [UInt8]
    var disabled: Bool
    var createdAt: Date
}

/// An email waiting in (or delivered from) the transactional outbox.
struct OutboxMessage: Sendable, Hashable {
    enum Status: String, Sendable, Hashable {
        case pending, delivered, failed
    }
    var id: String
    var appId: String
    /// `confirmation`, `password_reset`, `already_confirmed`, …
    var kind: String
    var recipient: String
    var subject: String
    var text: String
    var html: String
    var createdAt: Date
    var status: Status = .pending
    var attempts: Int = 0
    var nextAttemptAt: Date
    var deliveredAt: Date? = nil
    var lastError: String? = nil
}

/// An ES256 signing key. The newest one signs; all verify.
struct SigningKeyRecord: Sendable, Hashable {
    var kid: String
    /// Raw P-256 private key (32 bytes).
    var privateKey: [UInt8]
    var createdAt: Date
}

/// A rate limit counter: `key` names the app, the kind of request and the client address or hashed identifier.
struct RateCounter: Sendable, Hashable {
    var key: String
    /// Seconds.
    var window: Int
}

/// What a counter holds after a hit.
struct RateCount: Sendable, Hashable {
    var hits: Int
    var windowStart: Date
}

/// A run of consecutive failed password checks for one identifier.
struct LoginFailureRecord: Sendable, Hashable {
    var failures: Int
    var lastAttemptAt: Date
}

/// One line of the audit log: a security event, never a secret (`gatehouse audit tail` prints them).
public struct AuditEvent: Sendable, Hashable {
    /// Assigned by the store, in recording order; nil before it is stored.
    public var seq: Int64? = nil
    public var at: Date
    /// The app, or `*` for server-wide events (signing keys).
    public var appId: String
    /// `login_succeeded`, `login_failed`, `refresh`, … (``AuditKind``; the README lists them).
    public var kind: String
    public var userId: String?
    public var ip: String?
    public var userAgent: String?
    /// Non-secret facts about the event (the provider, the reason of a failure, a key id).
    public var detail: [String: String] = [:]
}
