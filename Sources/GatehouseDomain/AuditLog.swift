import Foundation
import Logging

/// The security events the audit log records (`gatehouse audit tail`). Each row has the time, app, user, client
/// address and user agent; its detail holds facts like a provider or a key id, never a secret.
package enum AuditKind: String, Sendable, CaseIterable {
    case registration = "registration"
    /// Someone tried to register (or sign up with) a taken address; the owner was told by email.
    case registrationRefused = "registration_refused"
    case confirmation = "confirmation"
    case loginSucceeded = "login_succeeded"
    case loginFailed = "login_failed"
    case loginDelayed = "login_delayed"
    case rateLimited = "rate_limited"
    case refresh = "refresh"
    case refreshTokenReused = "refresh_token_reused"
    /// A refresh token was refused: unknown, of a wrong secret, expired, revoked. Detail: the reason.
    case refreshTokenInvalid = "refresh_token_invalid"
    /// A wrong or expired one-time code in a native auth flow. Detail: the flow kind and the attempt's number.
    case codeFailed = "code_failed"
    /// A native auth flow used up its code attempts: it is dead. Detail: the flow kind.
    case flowExhausted = "flow_exhausted"
    case logout = "logout"
    case logoutEverywhere = "logout_everywhere"
    case resetRequested = "reset_requested"
    case resetCompleted = "reset_completed"
    case userDeleted = "user_deleted"
    case userDisabled = "user_disabled"
    case userEnabled = "user_enabled"
    case keyRotated = "signing_key_rotated"
    case keyRetired = "signing_key_retired"
    case apiKeyCreated = "api_key_created"
    case apiKeyDeleted = "api_key_deleted"
    case apiKeyEnabled = "api_key_enabled"
    case apiKeyDisabled = "api_key_disabled"
    /// `gatehouse import --from`: one per batch written, with `source` and `users` (how many).
    case usersImported = "users_imported"
    /// Lazy migration made a user the migrate-user function vouched for (or gave a migrated user without a password
    /// its old one). Detail: `at` (`login` or `passwordReset`), `replacedPending` when a pending registration of the
    /// address was discarded, `passwordSet`. Never the password.
    case userMigrated = "user_migrated"
    /// A signed-in user proved their password again in a session (`auth/reauthenticate`, or a change that carried
    /// it). Detail: the session.
    case reauthenticated = "reauthenticated"
    /// A signed-in user changed their password; every other session ended. Detail: the session kept, and how many
    /// ended.
    case passwordChanged = "password_changed"
    /// A signed-in user ended one of their sessions, or all but their own. Detail: the session(s).
    case sessionEnded = "session_ended"
    /// A signed-in user unlinked one of their identities. Detail: its provider.
    case identityUnlinked = "identity_unlinked"
    /// A signed-in user asked to change their address; a code went to the new one (or its owner was told it is
    /// taken). Never the address.
    case emailChangeRequested = "email_change_requested"
    /// The new address's code came back: the account has it now; the old one was mailed an undo link.
    case emailChanged = "email_changed"
    /// The old address's owner undid a change: the address is back, every session ended, the password must be set
    /// again.
    case emailChangeUndone = "email_change_undone"
}

/// `audit`: the routine events the audit log records besides the security events, which it always records.
public struct AuditSettings: Sendable, Hashable {
    /// `audit.refreshes`: a row for every refresh that succeeded (an access token for a refresh token, a native
    /// refresh grant). Off by default: a session is refreshed every few minutes for as long as it lives, and its
    /// rows would outnumber every other event; each one is still counted in `gatehouse_auth_events_total`, and the
    /// session's start (a login) and end (a logout, a reuse detection) are recorded. Refused, reused and invalid
    /// refresh tokens are always recorded.
    public var refreshes: Bool

    public init(refreshes: Bool = false) {
        self.refreshes = refreshes
    }
}

extension AuthEnvironment {
    /// Records a refresh that succeeded: in the audit log when `audit.refreshes` asks for it, in the metrics always.
    package func auditRefresh(app: String, user: String, session: String) async {
        if configuration.audit.refreshes {
            await audit(.refresh, app: app, user: user, detail: ["session": session])
        } else {
            countAuthEvent(.refresh, app: app)
        }
    }

    /// The row ``audit(_:app:user:detail:)`` writes, with the request's origin and the time, for a write that records
    /// it together with what it tells of (``GatehouseStore/createSession(_:recording:clearingLoginFailures:)``); the caller counts it
    /// (``countAuthEvent(_:app:detail:)``) once that write succeeded.
    package func auditEvent(_ kind: AuditKind, app: String, user: String? = nil, detail: [String: String] = [:]) -> AuditEvent {
        let origin = self.origin
        return AuditEvent(at: clock.now, appId: app, kind: kind.rawValue, userId: user, ip: origin.ip, userAgent: origin.userAgent, detail: detail)
    }

    /// The app id of events that belong to the server rather than one app (signing keys).
    package static let serverWideApp = "*"

    /// Records an event with the request's origin, and counts it (`gatehouse_auth_events_total`). A failure to
    /// record is logged, not thrown: the audit log must not turn a database hiccup into a failed login that already
    /// succeeded.
    package func audit(_ kind: AuditKind, app: String, user: String? = nil, detail: [String: String] = [:]) async {
        countAuthEvent(kind, app: app, detail: detail)
        let event = auditEvent(kind, app: app, user: user, detail: detail)
        do {
            try await auditWriter.append(event)
        } catch {
            logger.error("audit event not recorded", metadata: ["kind": "\(kind.rawValue)", "error": "\(error)"])
        }
    }
}

/// Writes audit events in groups (group commit): each request still waits until its own row is written, and the
/// events of requests that arrive while a write is under way go together into the next multi-row INSERT. An idle
/// server writes each event at once in a statement of its own; a busy one pays one statement for many events
/// instead of one per refresh, login or logout.
package actor AuditWriter {
    private let store: any GatehouseStore
    private var pending: [(event: AuditEvent, written: CheckedContinuation<Void, any Error>)] = []
    private var writing = false
    /// Events per INSERT at most (7 parameters each, far below SQLite's and PostgreSQL's limits).
    package static let batchLimit = 256

    package init(store: any GatehouseStore) {
        self.store = store
    }

    /// Returns once `event` is in the database; throws what the write threw.
    package func append(_ event: AuditEvent) async throws {
        try await withCheckedThrowingContinuation { continuation in
            pending.append((event, continuation))
            if !writing {
                writing = true
                Task { await self.drain() }
            }
        }
    }

    /// Writes what is pending, group by group, until nothing is.
    private func drain() async {
        while !pending.isEmpty {
            let group = Array(pending.prefix(Self.batchLimit))
            pending.removeFirst(group.count)
            do {
                try await store.appendAuditEvents(group.map(\.event))
                for entry in group { entry.written.resume() }
            } catch {
                for entry in group { entry.written.resume(throwing: error) }
            }
        }
        writing = false
    }
}
