/// Why a domain operation refused. Each HTTP facade maps these to its own envelope and status.
package enum AuthError: Error, Hashable, Sendable {
    /// Unknown app id in the URL.
    case appNotFound(String)
    /// The provider is not enabled for the app.
    case providerNotEnabled(String)
    /// Wrong password or unknown user: the same answer for both.
    case invalidCredentials
    /// The password was right but the account is still pending confirmation.
    case confirmationRequired
    case userDisabled
    /// Registration with an email that already has an account.
    case accountNameInUse
    /// Only when the app reveals user existence.
    case userNotFound
    case userAlreadyConfirmed
    /// Unknown, expired, used or superseded one-time token.
    case invalidTokenData
    /// A bad, expired, revoked or wrong-kind bearer token.
    case invalidSession(String)
    /// A valid session that may not do this (a session logged in with an API key changing the account).
    case forbidden(String)
    case invalidEmail
    /// The password breaks the app's policy; the message says which rule.
    case passwordPolicy(PasswordPolicy.Violation, String)
    /// Too many emails of one kind to one address; try again after that many seconds.
    case tooManyEmails(retryAfter: Int)
    /// Too many requests of one kind from one client address or for one identifier (``RateLimitSettings``).
    case rateLimited(retryAfter: Int)
    /// Too many wrong passwords for this account lately: the next attempt must wait (``LoginBackoffSettings``).
    case loginDelayed(retryAfter: Int)
    /// An unknown, disabled or deleted API key at login: the same answer for each.
    case invalidAPIKey
    /// No API key with that id belongs to the caller.
    case apiKeyNotFound
    /// The caller already has an API key of that name.
    case apiKeyAlreadyExists
    /// An API key may not be made now (from a key's own session, or beyond the per-user limit); the message says why.
    case apiKeyRefused(String)
    /// An API key name breaks the naming rule; the message says how.
    case invalidAPIKeyName(String)
    /// The database cannot be reached.
    case storeUnavailable
    /// A provider's credential (custom JWT, ID token, access token, auth code) was refused; the message says why.
    case invalidCredential(String)
    /// An identity provider (its keys, token endpoint or API) could not be reached or answered nonsense.
    case providerUnavailable(String)
    /// Linking an identity that belongs to another user.
    case identityInUse
    /// Linking anonymous credentials to a user.
    case cannotLinkAnonymous
    /// Linking API-key credentials to a user.
    case cannotLinkAPIKey
    /// The confirmation function answered `fail`: the registration (or retry) failed. Carries the email.
    case confirmationFailed(String)
    /// The reset function answered `fail` (or the address is unknown and the app does not reveal it).
    case resetFailed(String)
    /// `confirm/call` or `reset/call` where the app does not use that function; the message says why.
    case functionNotEnabled(String)
    /// Changing a credential needs a session proven within the app's `recentProofWindow`, or the current password in
    /// the request.
    case reauthenticationRequired
    /// The current password given to prove the session again is wrong (the session itself stays valid).
    case wrongCurrentPassword
    /// No live session of the caller's user has that id.
    case sessionNotFound
    /// The caller's user has no such identity.
    case identityNotFound
    /// A wrong, expired, used or superseded code mailed to a signed-in user (reauthentication, email change), or one
    /// given in another session than the one that asked for it.
    case invalidCode
    /// A self-service change the account cannot take; the message says why (no password to change, the last way
    /// to sign in).
    case accountChangeRefused(String)

    /// A refusal to look at the request now, made before anything in it was checked: a rate limit or a login delay
    /// (the client is told to wait `retryAfter` seconds and send it again).
    package var refusesUnchecked: Bool {
        switch self {
        case .rateLimited, .loginDelayed: true
        default: false
        }
    }
}

/// Errors of the store layer that the domain understands.
package enum StoreError: Error, Hashable, Sendable {
    /// A unique constraint refused the write (for example the email is taken).
    case conflict
    /// The database cannot be reached or refused to work; nothing was written.
    case unavailable(String)
    /// The database stopped answering (or its deadline passed) after a write was sent and before its answer came: the
    /// write may or may not have taken effect. Answered 503 like ``unavailable(_:)``, with a message that says so.
    case outcomeUnknown(String)
    /// A session was not written because what proved it no longer holds: every session of its user was ended (or
    /// the user deleted or disabled, or its API key disabled or deleted) after its credential was read. Nothing of
    /// the write happened. ``SessionGate`` answers it as the credential's refusal.
    case sessionEnded
    /// A credential a stale anonymous session added under the anonymous user's exemption from the recent proof was not
    /// written: the user gained another way in since it was read (``OwnerHold/whileOnlyAnonymous``). Nothing of the
    /// write happened; answered as the recent proof's refusal.
    case recentProofRequired

    /// Seconds a client is told to wait (`Retry-After`) when the database is away.
    package static let retryAfterSeconds = 5

    /// ``unavailable(_:)`` or ``outcomeUnknown(_:)``: the database, not the request, is at fault.
    package var isInfrastructure: Bool {
        switch self {
        case .unavailable, .outcomeUnknown: true
        case .conflict, .sessionEnded, .recentProofRequired: false
        }
    }
}
