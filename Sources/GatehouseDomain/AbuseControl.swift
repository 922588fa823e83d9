import Foundation
import Logging

extension AuthEnvironment {
    /// Counts this request against the app's limits of `kind`: per client address (``AuthEnvironment/origin``), and
    /// per `identifier` (an email, an API key, a session) when given. Throws ``AuthError/rateLimited(retryAfter:)``
    /// when either is over, with the seconds until its window ends.
    package func checkRateLimit(_ kind: RateLimitSettings.Kind, app: AppSettings, identifier: String? = nil) async throws {
        guard let rule = app.rateLimits.rule(kind) else { return }
        var limits: [(counter: RateCounter, limit: RateLimitSettings.Limit)] = []
        if let limit = rule.perIP, let ip = origin.ip {
            limits.append((RateCounter(key: "\(app.id)|\(kind.rawValue)|ip|\(ip)", window: limit.window), limit))
        }
        if let limit = rule.perIdentifier, let identifier {
            limits.append((RateCounter(key: "\(app.id)|\(kind.rawValue)|id|\(Self.hashedIdentifier(identifier))", window: limit.window), limit))
        }
        guard !limits.isEmpty else { return }
        let now = clock.now
        let counts = try await store.hitRateLimits(limits.map(\.counter), now: now)
        // Old counters go now and then; a few requests in a thousand pay for one cheap DELETE.
        if Int.random(in: 0..<500) == 0 { try? await store.purgeRateLimits(now: now) }
        var wait: TimeInterval = 0
        var firstRefusal = false
        for (counter, limit) in limits {
            guard let count = counts[counter.key], count.hits > limit.count else { continue }
            wait = max(wait, count.windowStart.addingTimeInterval(TimeInterval(limit.window)).timeIntervalSince(now))
            firstRefusal = firstRefusal || count.hits == limit.count + 1
        }
        guard wait > 0 else { return }
        if firstRefusal {
            // Once per window and counter, not per refused request: a flood must not flood the log.
            logger.notice("rate limit reached", metadata: ["app": "\(app.id)", "kind": "\(kind.rawValue)"])
            await audit(.rateLimited, app: app.id, detail: ["kind": kind.rawValue])
        }
        throw AuthError.rateLimited(retryAfter: max(1, Int(wait.rounded(.up))))
    }

    /// Identifiers are counted by a hash: the counters' table holds no email address or key.
    package static func hashedIdentifier(_ identifier: String) -> String {
        Secrets.hex(Array(Secrets.sha256("gatehouse-limit:" + identifier.lowercased()).prefix(16)))
    }
}

/// Growing delays for one identifier's failed password checks (``LoginBackoffSettings``).
package struct LoginBackoff: Sendable {
    package let env: AuthEnvironment
    package let app: AppSettings
    package let key: String

    package init(env: AuthEnvironment, app: AppSettings, identifier: String) {
        self.env = env
        self.app = app
        key = "\(app.id)|\(AuthEnvironment.hashedIdentifier(identifier))"
    }

    /// Lets an attempt through, or refuses it with ``AuthError/loginDelayed(retryAfter:)`` while the identifier's
    /// delay runs. Of attempts racing for the end of a delay exactly one proceeds. True when a run of failures exists
    /// (a success must then clear it).
    package func admit() async throws -> Bool {
        guard app.loginBackoff.enabled, let run = try await env.store.loginFailures(key: key) else { return false }
        let delay = app.loginBackoff.delay(afterFailures: run.failures)
        guard delay > 0 else { return true }
        let now = env.clock.now
        let ready = run.lastAttemptAt.addingTimeInterval(TimeInterval(delay))
        if ready > now { throw AuthError.loginDelayed(retryAfter: max(1, Int(ready.timeIntervalSince(now).rounded(.up)))) }
        guard try await env.store.claimLoginAttempt(key: key, previous: run.lastAttemptAt, now: now) else {
            throw AuthError.loginDelayed(retryAfter: delay)
        }
        return true
    }

    /// Counts a wrong password; the first failure past the free ones is audited (later ones are plain failures).
    package func failed(userId: String?) async throws {
        guard app.loginBackoff.enabled else { return }
        let failures = try await env.store.recordLoginFailure(key: key, now: env.clock.now)
        if failures == app.loginBackoff.freeFailures {
            env.logger.notice("login delays start", metadata: ["app": "\(app.id)"])
            await env.audit(.loginDelayed, app: app.id, user: userId, detail: ["failures": "\(failures)"])
        }
    }

    package func succeeded(hadRun: Bool) async throws {
        if hadRun { try await env.store.clearLoginFailures(key: key) }
    }
}
