import Foundation
import Logging

/// `retention`: how long data that is only kept for a while stays in the database. Every instance deletes what
/// has aged out every `interval` seconds (`gatehouse purge` does it once), in batches of `batchSize` rows, each its
/// own short statement: no long lock, and instances running it at the same time only share the work.
public struct RetentionSettings: Sendable, Hashable {
    /// False: nothing is deleted by the server (run `gatehouse purge` from a scheduler instead).
    public var enabled: Bool
    /// Seconds between two runs on one instance.
    public var interval: Int
    /// Rows per DELETE.
    public var batchSize: Int
    /// Seconds native flows and one-time tokens are kept after they expire.
    public var expired: Int
    /// Seconds sessions are kept after they end (signed out, revoked, or past their lifetime).
    public var endedSessions: Int
    /// Seconds delivered emails are kept in the outbox (and shown by the dev mailbox); failed ones stay until they
    /// are retried.
    public var sentMail: Int
    /// Seconds audit events are kept; 0 keeps them for ever.
    public var auditEvents: Int

    public init(
        enabled: Bool = true, interval: Int = 3600, batchSize: Int = 500, expired: Int = 86_400, endedSessions: Int = 7 * 86_400,
        sentMail: Int = 7 * 86_400, auditEvents: Int = 90 * 86_400
    ) {
        self.enabled = enabled
        self.interval = interval
        self.batchSize = batchSize
        self.expired = expired
        self.endedSessions = endedSessions
        self.sentMail = sentMail
        self.auditEvents = auditEvents
    }
}

/// What the retention service deletes, each by age.
package enum RetentionTarget: String, Sendable, Hashable, CaseIterable {
    /// Native auth flows whose continuation token expired.
    case expiredFlows = "native_flows"
    /// Confirmation and reset tokens past their expiry (used and superseded ones included).
    case expiredTokens = "one_time_tokens"
    /// Sessions that ended, with their spent refresh secrets.
    case endedSessions = "sessions"
    /// Per-address email counts older than every app's send-limit window.
    case sendLog = "send_log"
    /// Login-failure counts not added to for longer than any delay they could cause.
    case loginFailures = "login_failures"
    /// Rate-limit counters whose window ended.
    case rateLimits = "rate_limits"
    /// Delivered outbox emails (failed ones stay until they are retried).
    case sentMail = "outbox"
    /// Audit events.
    case auditEvents = "audit_events"
}

/// Deletes what ``RetentionSettings`` says has aged out.
package struct RetentionService: Sendable {
    package let env: AuthEnvironment

    package init(env: AuthEnvironment) { self.env = env }

    /// The time before which rows of `target` may go, or nil when they are kept for ever.
    package func cutoff(_ target: RetentionTarget, now: Date) -> Date? {
        let settings = env.configuration.retention
        let apps = env.configuration.apps
        let age: Int
        switch target {
        case .expiredFlows, .expiredTokens: age = settings.expired
        case .endedSessions: age = settings.endedSessions
        // The send limit looks back one window; the longest of any app's decides.
        case .sendLog: age = apps.map(\.emailLimitWindow).max() ?? 0
        // A run of failures matters while it can still delay an attempt: twice the longest delay, at least a day.
        case .loginFailures: age = max(86_400, 2 * (apps.map(\.loginBackoff.maxDelay).max() ?? 0))
        case .rateLimits: age = 0  // the counter's own window (the store compares with its end)
        case .sentMail: age = settings.sentMail
        case .auditEvents:
            guard settings.auditEvents > 0 else { return nil }
            age = settings.auditEvents
        }
        return now.addingTimeInterval(-TimeInterval(age))
    }

    /// One pass over every target, batch by batch until a batch comes back short. Returns the rows deleted per
    /// target. Safe to run on several instances at once: a row deleted by one is simply not found by the other.
    @discardableResult
    package func run() async throws -> [RetentionTarget: Int] {
        let now = env.clock.now
        let batch = max(1, env.configuration.retention.batchSize)
        var deleted: [RetentionTarget: Int] = [:]
        for target in RetentionTarget.allCases {
            guard let cutoff = cutoff(target, now: now) else { continue }
            var total = 0
            // At most a million rows per target and pass: a backlog larger than that goes in the next passes.
            for _ in 0..<max(1, 1_000_000 / batch) {
                let count = try await env.store.purge(target, before: cutoff, limit: batch)
                total += count
                if count < batch { break }
                await Task.yield()
            }
            deleted[target] = total
        }
        let sum = deleted.values.reduce(0, +)
        if sum > 0 {
            env.logger.info(
                "retention: old rows deleted",
                metadata: Logger.Metadata(uniqueKeysWithValues: deleted.filter { $0.value > 0 }.map { ($0.key.rawValue, "\($0.value)") })
            )
        }
        return deleted
    }
}
