import Foundation
import GatehouseDomain
import Logging
import ServiceLifecycle

/// Where outbox messages go. SMTP plugs in here; the dev mailbox is one too.
protocol MailTransport: Sendable {
    /// Hands one message over. Throwing ``MailDeliveryError/transient(_:)`` schedules a retry;
    /// ``MailDeliveryError/permanent(_:)`` marks the message failed.
    func deliver(_ message: OutboxMessage) async throws
}

enum MailDeliveryError: Error {
    case transient(String)
    case permanent(String)
}

/// The local development mailbox: messages stay in the outbox, where `/_dev/mailbox` reads them, and count as
/// delivered.
struct DevMailboxTransport: MailTransport {
    func deliver(_ message: OutboxMessage) async throws {}
}

/// Background service that drains the outbox through a ``MailTransport``, retrying transient failures with
/// exponential backoff. Logs say which message went where, never its content (it holds tokens).
struct OutboxDeliveryService: Service {
    let store: any GatehouseStore
    let transport: any MailTransport
    let clock: GatehouseClock
    let logger: Logger
    var pollInterval: Duration = .milliseconds(500)
    var maxAttempts = 8
    /// How long a claimed message stays invisible to other instances: longer than one delivery can take.
    var lease: TimeInterval = 300

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                _ = try await deliverDue()
            } catch {
                logger.warning("outbox poll failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            try? await Task.sleep(for: pollInterval)
        }
    }

    /// Delivers every due message once. Returns how many were handed over.
    func deliverDue() async throws -> Int {
        var delivered = 0
        let now = clock.now
        for message in try await store.claimDueMail(now: now, leaseUntil: now.addingTimeInterval(lease), limit: 50) {
            let meta: Logger.Metadata = ["mail": "\(message.id)", "kind": "\(message.kind)", "app": "\(message.appId)"]
            do {
                try await transport.deliver(message)
                try await store.markDelivered(id: message.id, at: clock.now)
                delivered += 1
                logger.info("mail delivered", metadata: meta)
            } catch MailDeliveryError.permanent(let reason) {
                try await store.markAttemptFailed(id: message.id, error: reason, retryAt: nil)
                logger.error("mail failed", metadata: meta.merging(["reason": "\(reason)"]) { $1 })
            } catch {
                let reason = (error as? MailDeliveryError).map { if case .transient(let r) = $0 { r } else { "" } } ?? "\(error)"
                let attempts = message.attempts + 1
                let retryAt = attempts >= maxAttempts ? nil : clock.now.addingTimeInterval(pow(2, Double(attempts)) * 5)
                try await store.markAttemptFailed(id: message.id, error: reason, retryAt: retryAt)
                logger.warning("mail delivery will be retried", metadata: meta.merging(["reason": "\(reason)", "attempt": "\(attempts)"]) { $1 })
            }
        }
        return delivered
    }
}
