import Foundation
import Logging

extension AuthEnvironment {
    /// An outbox row of `kind` to `recipient`, rendered with the app's templates.
    package func mail(_ kind: MailKind, app: AppSettings, recipient: String, _ variables: MailVariables) -> OutboxMessage {
        let now = clock.now
        let mail = templates(for: app).render(kind, variables)
        return OutboxMessage(
            id: Secrets.objectID(at: now), appId: app.id, kind: kind.rawValue, recipient: recipient, subject: mail.subject,
            text: mail.text, html: mail.html, createdAt: now, nextAttemptAt: now
        )
    }

    /// Counts one email request of `kind` to `address` (normalized) against the app's send limit, whether or not
    /// the address has an account (so the limit reveals nothing); throws ``AuthError/tooManyEmails(retryAfter:)``
    /// beyond it. Counted against the app's `email` rate limits too (per client address and per address).
    package func checkSendLimit(_ kind: MailKind, app: AppSettings, address: String) async throws {
        try await checkRateLimit(.email, app: app, identifier: address)
        let now = clock.now
        let since = now.addingTimeInterval(-TimeInterval(app.emailLimitWindow))
        guard try await store.recordSend(appId: app.id, address: address, kind: kind.rawValue, now: now, since: since, limit: app.emailLimit)
        else {
            let oldest = try await store.oldestSend(appId: app.id, address: address, kind: kind.rawValue, since: since) ?? now
            let retryAfter = max(1, Int((oldest.timeIntervalSince(since)).rounded(.up)))
            logger.notice("email send limit reached", metadata: ["app": "\(app.id)", "kind": "\(kind.rawValue)"])
            throw AuthError.tooManyEmails(retryAfter: retryAfter)
        }
    }
}
