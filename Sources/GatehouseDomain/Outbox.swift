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
    /// beyond it. Counted against the app's `email` rate limits too (per client).
    ///
    /// The limit is per recipient and asking client (``AppSettings/emailLimit`` in ``AppSettings/emailLimitWindow``),
    /// with a cap on what every client together may send one recipient (``AppSettings/emailLimitTotal``) past which
    /// each further client gets its first email only. So someone who asks for a victim's reset mail again and again
    /// fills neither the victim's mailbox nor the victim's own allowance: the owner's request from their own device
    /// goes through, and a flood from many clients costs the flooder one client per email. A refused request is not
    /// counted.
    package func checkSendLimit(_ kind: MailKind, app: AppSettings, address: String) async throws {
        try await checkRateLimit(.email, app: app, account: address)
        let now = clock.now
        let since = now.addingTimeInterval(-TimeInterval(app.emailLimitWindow))
        let requester = requesterKey
        guard try await store.recordSend(
            appId: app.id, address: address, kind: kind.rawValue, requester: requester, now: now, since: since, limit: app.emailLimit,
            total: max(app.emailLimitTotal, app.emailLimit)
        )
        else {
            let oldest = try await store.oldestSend(appId: app.id, address: address, kind: kind.rawValue, requester: requester, since: since) ?? now
            let retryAfter = max(1, Int((oldest.timeIntervalSince(since)).rounded(.up)))
            logger.notice("email send limit reached", metadata: ["app": "\(app.id)", "kind": "\(kind.rawValue)"])
            throw AuthError.tooManyEmails(retryAfter: retryAfter)
        }
    }

    /// The asking client (``RequestOrigin/network``), hashed: what send counts and one-time tokens record as who
    /// asked, never the address itself.
    package var requesterKey: String { Self.hashedIdentifier("mail-requester:" + (origin.network ?? "-")) }
}
