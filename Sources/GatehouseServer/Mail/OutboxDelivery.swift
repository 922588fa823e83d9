import CoreMetrics
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
/// exponential backoff (10 s, 20 s, 40 s … capped at `maxRetryDelay`) for `retryBudget` seconds after the message
/// was written. Past the budget, or on a permanent failure, the message is kept as failed: an error line says so
/// and how to send it again (`gatehouse mail failed`, `gatehouse mail retry`); nothing is dropped silently. Each
/// failed attempt logs one warning. Logs say which message went where, never its content (it holds tokens).
struct OutboxDeliveryService: Service {
    let store: any GatehouseStore
    let transport: any MailTransport
    let clock: GatehouseClock
    let logger: Logger
    var pollInterval: Duration = .milliseconds(500)
    /// The longest wait between two attempts, seconds.
    var maxRetryDelay: TimeInterval = 900
    /// How long after it was written a message is still retried, seconds (a day: an SMTP outage of hours loses
    /// nothing).
    var retryBudget: TimeInterval = 86_400
    /// How long a claimed message stays invisible to other instances: longer than one delivery can take.
    var lease: TimeInterval = 300
    /// `gatehouse_outbox_sent_total`, `gatehouse_outbox_delivery_failures_total{outcome}`.
    var metrics: GatehouseMetrics?

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
                metrics?.outboxSent.increment()
                logger.info("mail delivered", metadata: meta)
            } catch MailDeliveryError.permanent(let reason) {
                metrics?.outboxFailed.increment()
                try await store.markAttemptFailed(id: message.id, error: reason, retryAt: nil)
                logger.error(
                    "mail failed permanently; kept as failed (gatehouse mail failed lists it, gatehouse mail retry sends it again)",
                    metadata: meta.merging(["reason": "\(reason)"]) { $1 }
                )
            } catch {
                let reason = (error as? MailDeliveryError).map { if case .transient(let r) = $0 { r } else { "" } } ?? "\(error)"
                let attempts = message.attempts + 1
                let now = clock.now
                let retryAt = now.addingTimeInterval(min(maxRetryDelay, pow(2, Double(min(attempts, 30))) * 5))
                if retryAt.timeIntervalSince(message.createdAt) > retryBudget {
                    metrics?.outboxFailed.increment()
                    try await store.markAttemptFailed(id: message.id, error: reason, retryAt: nil)
                    logger.error(
                        "mail given up after its retry budget; kept as failed (gatehouse mail failed lists it, gatehouse mail retry sends it again)",
                        metadata: meta.merging(["reason": "\(reason)", "attempts": "\(attempts)"]) { $1 }
                    )
                } else {
                    metrics?.outboxRetrying.increment()
                    try await store.markAttemptFailed(id: message.id, error: reason, retryAt: retryAt)
                    logger.warning(
                        "mail delivery failed; will be retried",
                        metadata: meta.merging(["reason": "\(reason)", "attempt": "\(attempts)", "retry_in_s": "\(Int(retryAt.timeIntervalSince(now)))"]) { $1 }
                    )
                }
            }
        }
        return delivered
    }
}
