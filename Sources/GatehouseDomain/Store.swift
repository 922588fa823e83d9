import Foundation
import GatehouseWire

/// The shared rate-limit counts, all ``RateLimiter`` needs from storage.
package protocol RateCountStore: Sendable {
    /// Counts each counter's `hits` (a key and its window in seconds), all in one statement, and returns per key the
    /// requests counted in its current window and when the window started. A window that has run out by the
    /// counter's `windowStart` (by `now` when it has none) starts again there with these hits.
    func hitRateLimits(_ counters: [RateCounter], now: Date) async throws -> [String: RateCount]
}

/// Everything the domain needs from storage. Each method is one atomic unit: where several rows change together
/// (an account with its token and its email, a redeemed token with the account it confirms), they change in one
/// transaction. No method hashes passwords or does other slow work while holding the database.
package protocol GatehouseStore: RateCountStore {
    func ping() async throws

    // MARK: Signing keys
    func signingKeys() async throws -> [SigningKeyRecord]
    /// The active keys, after inserting `first` if there are none: atomic across instances that start together, so
    /// that they all sign with the same first key.
    func signingKeys(insertingIfNone first: SigningKeyRecord) async throws -> [SigningKeyRecord]
    /// Every key, retired ones too, oldest first, with when each was retired.
    func allSigningKeys() async throws -> [(key: SigningKeyRecord, retiredAt: Date?)]
    /// Adds a key; being the newest, it signs from now on.
    func insertSigningKey(_ key: SigningKeyRecord) async throws
    /// Retires an active key unless it is the last active one; racing retirements take turns, so they cannot leave
    /// none. False when the key is unknown, already retired, or the last.
    func retireSigningKey(kid: String, at: Date) async throws -> Bool

    // MARK: Users
    /// Creates a user with a `local-userpass` identity and its account; with the confirmation token and email
    /// when given, and the audit row of what made it (`event`) in the same write: no user without its record.
    /// Throws ``StoreError/conflict`` when the email is taken (and writes nothing).
    func createEmailUser(
        user: UserRecord,
        identity: IdentityRecord,
        account: EmailAccountRecord,
        token: OneTimeTokenRecord?,
        mail: OutboxMessage?,
        recording event: AuditEvent?
    ) async throws
    /// Replaces a pending registration (the account of `account.userId`, if it is still unconfirmed) with a new one:
    /// its password and confirmation state (marked contested), the unused confirmation tokens `token`'s own requester
    /// asked for superseded at `now` (never another client's, never a reset token: a squatter re-registering cannot
    /// void the owner's links), `token` and `mail` stored. One transaction. False, changing nothing, when the account
    /// is gone or confirmed.
    func replacePendingRegistration(_ account: EmailAccountRecord, token: OneTimeTokenRecord?, mail: OutboxMessage?, now: Date) async throws -> Bool
    /// Deletes the pending registration `account` (its email account, identity and tokens, and its user if that has
    /// no other identity) if the address is still pending for that user. False, changing nothing, otherwise.
    func discardPendingRegistration(_ account: EmailAccountRecord) async throws -> Bool
    /// Creates a user with one identity (anonymous users, and later external providers).
    func createUser(_ user: UserRecord, identity: IdentityRecord) async throws
    /// The identity an app's provider knows by `externalId`.
    func identity(appId: String, providerType: String, externalId: String) async throws -> IdentityRecord?
    /// Replaces an identity's profile data (refreshed from its provider at each login).
    func updateIdentityData(id: String, data: [String: JSONValue]) async throws
    /// Adds an identity to an existing user. Throws ``StoreError/conflict`` when the identity exists.
    ///
    /// Like every credential added to an existing user (API keys too), it is written with the user's row locked and,
    /// when `owner` is given (a session adds it), only while it holds (``OwnerHold``): otherwise
    /// ``StoreError/sessionEnded`` or ``StoreError/recentProofRequired``, and nothing is written. So a link asked for
    /// while the owner proves the mailbox (which ends every session and discards every other identity) is not left
    /// behind.
    func addIdentity(_ identity: IdentityRecord, owner: OwnerHold?) async throws
    /// Moves identity `id` (with its email account) from user `from` to user `to` and deletes `from`, if `from` has
    /// no other identity and never had a session; one transaction. The identity counts as linked `at` (profiles list
    /// identities in link order). False, changing nothing, otherwise. As ``addIdentity(_:owner:)``, only while `owner`
    /// holds for `to`.
    func adoptIdentity(id: String, from: String, to: String, owner: OwnerHold, at: Date, addedBy: Provenance) async throws -> Bool
    /// Whether the old system already handed `email` over: a lazy migration or an import made an account of it (kept
    /// when that account moves to another address, gets a password or is deleted).
    func migratedAddress(appId: String, email: String) async throws -> Bool
    func emailAccount(appId: String, email: String) async throws -> EmailAccountRecord?
    /// The address's account and its user (nil when the user is gone), in one read: what a password login needs.
    func emailAccountWithUser(appId: String, email: String) async throws -> (account: EmailAccountRecord, user: UserRecord?)?
    func user(id: String) async throws -> UserRecord?
    func identities(userId: String) async throws -> [IdentityRecord]
    /// Removes the user with every identity, account, session, token and API key, and queues `notices`; one
    /// transaction. When `owner` is given (the user's own session deletes it), only while it holds (``OwnerHold``):
    /// otherwise ``StoreError/sessionEnded`` or ``StoreError/recentProofRequired``, and nothing is deleted.
    func deleteUser(id: String, notices: [OutboxMessage], owner: OwnerHold?) async throws
    /// Replaces the user's custom data. Returns false when the user does not exist in that app.
    func setCustomData(appId: String, userId: String, data: [String: JSONValue]) async throws -> Bool
    /// Replaces a password hash if it is still `old` (a rehash must not undo a concurrent reset).
    func upgradePasswordHash(appId: String, email: String, from old: String, to new: String) async throws

    // MARK: One-time tokens
    /// Stores `token`, supersedes the user's older unused tokens of the same kind, and queues `mail` if any.
    /// With `dryRun` it runs the same statements and rolls them back: the work done for an unknown address, so
    /// that its timing matches a known one.
    func issueOneTimeToken(_ token: OneTimeTokenRecord, mail: OutboxMessage?, dryRun: Bool) async throws
    func oneTimeToken(id: String) async throws -> OneTimeTokenRecord?
    /// Makes an unused token unusable (it counts as superseded).
    func retireOneTimeToken(id: String, now: Date) async throws
    /// Marks the token used if it is unused, not superseded and unexpired at `now`, and confirms its account; one
    /// atomic conditional update, so of many concurrent calls exactly one returns non-nil: whether the registration's
    /// password was confirmed, or none (a contested registration). `provingMailbox`: the token came back from the
    /// mailbox (a link, or a token the confirmation function handed on), which is ``MailboxProof/registrationConfirmed``;
    /// false for a confirmation function's `success`, which confirms the account and leaves its mailbox unproven.
    func redeemConfirmationToken(id: String, now: Date, provingMailbox: Bool) async throws -> MailboxProof.Confirmation?
    /// As ``redeemConfirmationToken(id:now:provingMailbox:)``, then sets the new password hash and revokes every session of
    /// the user, in the same transaction.
    func redeemPasswordResetToken(id: String, newPasswordHash: String, now: Date) async throws -> Bool

    // MARK: Sessions
    /// Stores a new session and the audit row of the login that started it, together (one statement on PostgreSQL):
    /// no session without its record, and one write instead of two. (A native sign-in's session is one of its flow's
    /// effects instead.)
    /// `keys`: login-failure runs that end in the same write (a password login's success clears its backoff counts,
    /// ``LoginBackoff/clearedKeys``, with the session it starts).
    func createSession(_ session: IssuedSession, recording event: AuditEvent, clearingLoginFailures keys: [String]) async throws
    func session(id: String) async throws -> SessionRecord?
    /// The session and its user (nil when the user is gone), in one read: what every authenticated request needs.
    func sessionWithUser(id: String) async throws -> (session: SessionRecord, user: UserRecord?)?
    /// The same, with the user's identities (as ``identities(userId:)`` orders them) in the same read: a profile read
    /// costs one statement.
    func sessionWithUserAndIdentities(id: String) async throws -> (session: SessionRecord, user: UserRecord?, identities: [IdentityRecord])?
    func revokeSession(id: String, now: Date) async throws
    /// Records that the session's refresh token was used `now`, unless that was already recorded after `notBefore`
    /// (so that busy sessions cost a write at most once a minute).
    func touchSession(id: String, now: Date, notBefore: Date) async throws
    /// Revokes every live session of the user ("log out everywhere"); the number revoked.
    func revokeAllSessions(userId: String, now: Date) async throws -> Int
    /// The user's sessions that have not ended at `now` (not revoked, not expired), newest first.
    func liveSessions(userId: String, now: Date) async throws -> [SessionRecord]
    /// Revokes every live session of the user but `keeping` (nil: every one); the number revoked.
    func revokeAllSessions(userId: String, keeping: String?, now: Date) async throws -> Int
    /// Records that the live session `id` was proven again `at` by `methods` (its new ``SessionRecord/methods``).
    /// False when the session has ended.
    func reproveSession(id: String, methods: [AuthenticationMethod], at: Date) async throws -> Bool
    /// The user's email accounts, oldest first.
    func emailAccounts(userId: String) async throws -> [EmailAccountRecord]
    /// A signed-in user's new password: sets `newPasswordHash` on the user's confirmed email accounts, ends every
    /// other session of the user, records `session` as proven again (`methods`, now), and queues `mail`; one
    /// transaction. False, changing nothing, when the user has no confirmed email account or the session has ended.
    func changePassword(
        userId: String, newPasswordHash: String, session: String, methods: [AuthenticationMethod], mail: OutboxMessage?, now: Date
    ) async throws -> Bool
    /// Removes the identity `id` of `userId` (with its email account when it has one, and that account's unused
    /// tokens) if what the user keeps passes `keepsAWayIn` (its remaining identities and email accounts); one
    /// transaction, with the user's row locked, so that racing removals cannot together leave the user no way in.
    func removeIdentity(
        id: String, userId: String, keepsAWayIn: @escaping @Sendable (_ identities: [IdentityRecord], _ accounts: [EmailAccountRecord]) -> Bool
    ) async throws -> IdentityRemoval
    /// The newest live token of `kind` that `requester` asked for `userId`: unused, not superseded, unexpired at
    /// `now`.
    func liveToken(userId: String, kind: OneTimeTokenKind, requester: String, now: Date) async throws -> OneTimeTokenRecord?
    /// Counts a guess of the live code token `id`, before it is compared: true while the guesses, this one
    /// included, are at most `limit`; the guess past it spends the token. False for a token no longer live.
    func countGuess(tokenId: String, limit: Int, now: Date) async throws -> Bool
    /// Marks the live code token `id` used; of racing calls one wins.
    func spendToken(id: String, now: Date) async throws -> Bool
    /// An email change whose new address the code token `code` proved: in one transaction the code is spent, a
    /// pending registration of the new address is discarded, the user's email account of `old` and its identity
    /// take the new address (proven now), the user's other live tokens are superseded, and `undo` and `mail` are
    /// stored.
    func changeEmail(
        userId: String, from old: String, code: String, undo: OneTimeTokenRecord, mail: [OutboxMessage], by: Provenance, now: Date
    ) async throws -> EmailChange
    /// Every credential of the user (``CredentialKind``), with who added it.
    func credentials(userId: String) async throws -> [Credential]
    /// Redeems the undo token `id` of an email change: in one transaction the identity it names takes its old address
    /// back (made again, without a password, if it was unlinked), proven now and without a password, a pending
    /// registration of that address is discarded, and the mailbox owner's trust reset runs (every session ends; API
    /// keys, other identities and email accounts and live tokens go). The user and the restored address; nil when
    /// the token cannot be redeemed, or the address belongs to someone else now.
    func undoEmailChange(tokenId: String, now: Date) async throws -> (userId: String, email: String)?
    /// Disables or enables a user of `appId`; disabling also revokes every session, in the same transaction. False
    /// when there is no such user.
    func setUserDisabled(appId: String, userId: String, disabled: Bool, now: Date) async throws -> Bool
    /// Replaces the session's secret hash `old` with `new` (keeping `old` as the previous one, with the salt `new`
    /// was derived with) if `old` is still current and the session alive at `now`. Of racing calls one wins.
    /// The spent secret is remembered with the session (``spentRefreshSecret(sessionId:secretHash:)``), in the same
    /// transaction.
    func rotateSessionSecret(id: String, from old: [UInt8], to new: [UInt8], salt: [UInt8], now: Date) async throws -> Bool
    /// When the session's refresh secret hashing to `secretHash` was spent by a rotation; nil if it never was.
    func spentRefreshSecret(sessionId: String, secretHash: [UInt8]) async throws -> Date?

    // MARK: API keys
    /// Stores `key` with its `api-key` identity; for a server key also `serverUser`, the user the identity belongs
    /// to. One transaction. Throws ``StoreError/conflict`` when the owner (or, for a server key, the app) already
    /// has a key of that name.
    ///
    /// A user's key is written with its owner's row locked, and only while the owner has fewer than `limit` keys and,
    /// when `ownerEpoch` is given (a key a session asks for), none of the owner's sessions were ended since that
    /// session was read (``UserRecord/sessionEpoch``): otherwise ``StoreError/sessionEnded`` or
    /// ``APIKeyWrite/limitReached``, and nothing is written. So two requests at once cannot pass the limit, and a key
    /// asked for while the owner proves the mailbox (which ends every session and removes every key) is not left behind.
    func createAPIKey(_ key: APIKeyRecord, identity: IdentityRecord, serverUser: UserRecord?, ownerEpoch: Int?, limit: Int) async throws -> APIKeyWrite
    func apiKey(appId: String, id: String) async throws -> APIKeyRecord?
    /// The keys of `userId`, or the app's server keys when nil, oldest first.
    func apiKeys(appId: String, userId: String?) async throws -> [APIKeyRecord]
    /// The key of the app whose secret hashes to `keyHash`, with the user it logs in as (through its `api-key`
    /// identity).
    func apiKeyLogin(appId: String, keyHash: [UInt8]) async throws -> (key: APIKeyRecord, user: UserRecord)?
    /// Enables or disables the key; disabling also revokes the sessions logged in with it (again, when the key was
    /// already off). ``APIKeySwitch/unchanged`` when the key already was so (of two requests turning it on at once,
    /// one changes it), ``APIKeySwitch/notFound`` when there is no such key. When `owner` is given (the key's owner's
    /// session turns it back on, a way in added again), only while it holds for the key's user (``OwnerHold``):
    /// otherwise ``StoreError/sessionEnded``, and nothing changes. So a re-enable read before the owner's reset does
    /// not land after it.
    func setAPIKeyDisabled(appId: String, id: String, disabled: Bool, owner: OwnerHold?, now: Date) async throws -> APIKeySwitch
    /// Deletes the key with its identity and revokes the sessions logged in with it; a server key's user goes too.
    /// False when no such key.
    func deleteAPIKey(appId: String, id: String, now: Date) async throws -> Bool

    // MARK: Native auth flows
    func insertFlow(_ flow: NativeFlowRecord) async throws
    func flow(id: String) async throws -> NativeFlowRecord?
    /// Replaces the stored flow with `flow` if its token hash is still `expectedTokenHash` and unexpired at `now`,
    /// and applies `effects`, in one transaction. Returns false, changing nothing, when the token was used or
    /// expired meanwhile. Throws ``StoreError/conflict`` when a new account's email is taken.
    func advanceFlow(_ flow: NativeFlowRecord, from expectedTokenHash: [UInt8], now: Date, effects: [NativeFlowEffect]) async throws -> Bool
    /// Counts one wrong-answer attempt against the flow if its token is still `tokenHash`, its basis holds
    /// (``NativeFlowRecord/userEpoch``) and fewer than `limit` were counted; atomic, so racing guesses cannot exceed
    /// the limit. Otherwise counts nothing and says why.
    func recordFlowAttempt(id: String, tokenHash: [UInt8], limit: Int) async throws -> FlowAttemptCount
    /// Takes back one attempt ``recordFlowAttempt(id:tokenHash:limit:)`` counted, if the flow's token is still
    /// `tokenHash`: for a request refused before its answer was checked (a rate limit, a login delay).
    func returnFlowAttempt(id: String, tokenHash: [UInt8]) async throws

    // MARK: Send limits
    /// Records one email request for (app, address, kind) from `requester` (a client's key) if, since `since`, fewer
    /// than `limit` were recorded from that requester, and either fewer than `total` from everyone or none from that
    /// requester; in one statement. Returns false when refused (nothing is recorded, so a refusal never counts).
    /// Exact on SQLite (one writer). On PostgreSQL, under read committed, requests racing for the last place in the
    /// same instant may each take it: the overshoot is at most the number of such simultaneous requests, each still
    /// counted by every later check.
    func recordSend(appId: String, address: String, kind: String, requester: String, now: Date, since: Date, limit: Int, total: Int) async throws -> Bool
    /// When the oldest request from `requester` still in the window was made (to compute Retry-After).
    func oldestSend(appId: String, address: String, kind: String, requester: String, since: Date) async throws -> Date?

    // MARK: Login backoff (rate-limit counts: RateCountStore)
    /// The current run of failed password checks for `key`, if any.
    func loginFailures(key: String) async throws -> LoginFailureRecord?
    /// Counts an attempt in `key`'s run (of account `account`) before its password is checked: sets failures to
    /// `seen + 1` and the last attempt to `now`, if the run still has `seen` failures (nil: no run yet), and returns
    /// the new count. Nil when another attempt was counted first: of racing attempts each is counted once.
    func claimLoginAttempt(key: String, account: String, seen: Int?, now: Date) async throws -> Int?
    /// ``claimLoginAttempt(key:account:seen:now:)`` for a key with no run yet (`seen` nil), and
    /// ``emailAccountWithUser(appId:email:)`` of `email`, in one round trip (one statement on PostgreSQL): a password
    /// login's first two. The read does not depend on the claim, which touches no account.
    func claimLoginAttempt(key: String, account: String, now: Date, readingAccountOf appId: String, email: String) async throws
        -> (claimed: Int?, account: (account: EmailAccountRecord, user: UserRecord?)?)
    /// Counts a failed password check in `key`'s run (of account `account`); returns the failures in the run.
    func recordLoginFailure(key: String, account: String, now: Date) async throws -> Int
    /// Ends these runs (a correct password).
    func clearLoginFailures(keys: [String]) async throws
    /// Takes one failure back from each of these runs (a run of one ends): an attempt counted in them that a later
    /// check showed was no guess at their account (``LoginBackoff/giveBack()``).
    func returnLoginAttempt(keys: [String]) async throws
    /// Ends every run of `account` (a proof of the mailbox).
    func clearLoginFailures(account: String) async throws

    // MARK: Retention

    /// Deletes at most `limit` rows of `target` that aged out before `cutoff`, in one short statement; returns how
    /// many it deleted.
    func purge(_ target: RetentionTarget, before cutoff: Date, limit: Int) async throws -> Int

    // MARK: Audit log
    /// Appends events in one statement, in order.
    func appendAuditEvents(_ events: [AuditEvent]) async throws
    /// The newest `limit` events of the app (all apps when nil) and user (all when nil), oldest first, after `afterSeq`.
    func auditEvents(appId: String?, userId: String?, afterSeq: Int64?, limit: Int) async throws -> [AuditEvent]

    // MARK: Outbox
    func enqueue(_ mail: OutboxMessage) async throws
    /// Claims up to `limit` pending messages due at `now` for one sender until `leaseUntil`, oldest first. Claimed
    /// messages are invisible to other senders (other instances) until delivered, failed, or the lease runs out
    /// (a sender that died mid-delivery).
    func claimDueMail(now: Date, leaseUntil: Date, limit: Int) async throws -> [OutboxMessage]
    func markDelivered(id: String, at: Date) async throws
    func markAttemptFailed(id: String, error: String, retryAt: Date?) async throws
    /// Messages to `recipient` (any status), newest first; all messages when nil.
    func mailbox(recipient: String?, limit: Int) async throws -> [OutboxMessage]
    /// Messages kept as failed, newest first (of `appId` when given).
    func failedMail(appId: String?, limit: Int) async throws -> [OutboxMessage]
    /// Makes failed messages pending again, due now, with a fresh retry budget (`ids` nil: every failed one).
    /// Returns how many.
    func retryFailedMail(ids: [String]?, now: Date) async throws -> Int
}

/// What ``GatehouseStore/removeIdentity(id:userId:keepsAWayIn:)`` did.
package enum IdentityRemoval: Sendable, Hashable {
    case removed(IdentityRecord)
    case notFound
    /// Nothing changed: the user would have kept no way to sign in.
    case lastWayIn
}

/// What ``GatehouseStore/changeEmail(userId:from:code:undo:mail:now:)`` did.
package enum EmailChange: Sendable, Hashable {
    case changed
    /// The code was spent meanwhile (used, superseded, expired): nothing changed.
    case codeSpent
    /// The user's account of the old address is gone or changed meanwhile: nothing changed.
    case accountGone
    /// Someone confirmed the new address meanwhile: nothing changed.
    case addressTaken
}

/// What turning an API key on or off found (``GatehouseStore/setAPIKeyDisabled(appId:id:disabled:owner:now:)``): only
/// a change is audited and told to the owner.
package enum APIKeySwitch: Sendable, Hashable {
    case changed
    /// The key already was on, or off.
    case unchanged
    case notFound
}

/// What ``GatehouseStore/createAPIKey(_:identity:serverUser:ownerEpoch:limit:)`` did.
package enum APIKeyWrite: Sendable, Hashable {
    case created
    /// The owner already has `limit` keys.
    case limitReached
}

/// What a credential a session adds to its user is written under, checked with the user's row locked in the write.
package struct OwnerHold: Sendable, Hashable {
    /// The user's ``UserRecord/sessionEpoch`` as the adding session read it: the write happens only while none of
    /// the user's sessions ended since.
    package var epoch: Int
    /// The session passed the recent proof only as an anonymous user
    /// (``SessionGate/RecentProof/anonymousUser``): the write happens only while the user still holds nothing but
    /// anonymous identities.
    package var whileOnlyAnonymous: Bool

    package init(epoch: Int, whileOnlyAnonymous: Bool = false) {
        self.epoch = epoch
        self.whileOnlyAnonymous = whileOnlyAnonymous
    }
}
