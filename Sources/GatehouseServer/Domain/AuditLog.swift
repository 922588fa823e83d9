import Foundation
import Logging

/// The security events the audit log records (`gatehouse audit tail`). Each row has the time, app, user, client
/// address and user agent; its detail holds facts like a provider or a key id, never a secret.
enum AuditKind: String, Sendable, CaseIterable {
    case registration = "registration"
    case confirmation = "confirmation"
    case loginSucceeded = "login_succeeded"
    case loginFailed = "login_failed"
    case loginDelayed = "login_delayed"
    case rateLimited = "rate_limited"
    case refresh = "refresh"
    case refreshTokenReused = "refresh_token_reused"
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
}

extension AuthEnvironment {
    /// The app id of events that belong to the server rather than one app (signing keys).
    static let serverWideApp = "*"

    /// Records an event with the request's origin. A failure to record is logged, not thrown: the audit log must not
    /// turn a database hiccup into a failed login that already succeeded.
    func audit(_ kind: AuditKind, app: String, user: String? = nil, detail: [String: String] = [:]) async {
        let origin = RequestOrigin.current
        let event = AuditEvent(
            at: clock.now, appId: app, kind: kind.rawValue, userId: user, ip: origin.ip, userAgent: origin.userAgent, detail: detail
        )
        do {
            try await store.appendAuditEvent(event)
        } catch {
            logger.error("audit event not recorded", metadata: ["kind": "\(kind.rawValue)", "error": "\(error)"])
        }
    }
}
