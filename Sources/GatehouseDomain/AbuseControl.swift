import Crypto
import Foundation
import Logging

extension AuthEnvironment {
    /// Counts this request against the app's limits of `kind`: per client (``RequestOrigin/network``: an IPv4
    /// address, an IPv6 /64), and per `account` or `identifier` when given. Throws
    /// ``AuthError/rateLimited(retryAfter:)`` when either is over, with the seconds until its window ends.
    ///
    /// An `account` is what anyone may name: an email address or an API key someone else holds. Its count is kept per
    /// account *and client*, so that no one can use up a limit that would then refuse the account's owner asking from
    /// elsewhere; many clients against one account are slowed by the login delays (``LoginBackoff``) and, for mail,
    /// by the send limit's cap per recipient (``checkSendLimit(_:app:address:)``), which never refuse a client that
    /// has not been asking. An `identifier` is a secret the caller holds (a token id, a flow, a session) and is
    /// counted on its own, whoever presents it.
    ///
    /// - Parameter countingAddress: false when this request's address was counted for `kind` already (an API key
    ///   login: its address counts with every other login, its key on its own).
    package func checkRateLimit(
        _ kind: RateLimitSettings.Kind, app: AppSettings, account: String? = nil, identifier: String? = nil, countingAddress: Bool = true
    ) async throws {
        guard let rule = app.rateLimits.rule(kind) else { return }
        var limits: [(counter: RateCounter, limit: RateLimitSettings.Limit)] = []
        if countingAddress, let limit = rule.perIP, let network = origin.network {
            limits.append((RateCounter(key: "\(app.id)|\(kind.rawValue)|ip|\(network)", window: limit.window), limit))
        }
        if let limit = rule.perIdentifier {
            if let account {
                let key = Self.hashedIdentifier(account + "|from:" + (origin.network ?? "-"))
                limits.append((RateCounter(key: "\(app.id)|\(kind.rawValue)|acct|\(key)", window: limit.window), limit))
            }
            if let identifier {
                limits.append((RateCounter(key: "\(app.id)|\(kind.rawValue)|id|\(Self.hashedIdentifier(identifier))", window: limit.window), limit))
            }
        }
        guard !limits.isEmpty else { return }
        let now = clock.now
        // Counted by this instance's RateLimiter against the database's shared counts; counters whose window ended
        // are deleted by the retention service (RetentionTarget.rateLimits).
        let verdicts = try await rateLimiter.hit(limits.map { ($0.counter, $0.limit.count) }, now: now)
        var wait: TimeInterval = 0
        var firstRefusal = false
        for (counter, limit) in limits {
            guard let verdict = verdicts[counter.key], verdict.count.hits > limit.count else { continue }
            wait = max(wait, verdict.count.windowStart.addingTimeInterval(TimeInterval(limit.window)).timeIntervalSince(now))
            firstRefusal = firstRefusal || verdict.firstRefusal
        }
        guard wait > 0 else { return }
        if firstRefusal {
            // Once per window, counter and instance, not per refused request: a flood must not flood the log.
            logger.notice("rate limit reached", metadata: ["app": "\(app.id)", "kind": "\(kind.rawValue)"])
            await audit(.rateLimited, app: app.id, detail: ["kind": kind.rawValue])
        } else {
            // The audit log has the first refusal of the window; the metric counts every one.
            countAuthEvent(.rateLimited, app: app.id, detail: ["kind": kind.rawValue])
        }
        throw AuthError.rateLimited(retryAfter: max(1, Int(wait.rounded(.up))))
    }

    /// Identifiers are counted by a hash: the counters' table holds no email address or key.
    package static func hashedIdentifier(_ identifier: String) -> String {
        var hasher = SHA256()
        Secrets.update(&hasher, with: "gatehouse-limit:")
        // Most identifiers (session ids, hashed addresses) have no capital letter: lowercased only when needed.
        Secrets.update(&hasher, with: identifier.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A || $0 >= 0x80 }) ? identifier.lowercased() : identifier)
        return hasher.finalize().withUnsafeBytes { Secrets.hex(UnsafeRawBufferPointer(rebasing: $0.prefix(16))) }
    }
}

/// Growing delays after wrong passwords (``LoginBackoffSettings``), counted per account and client address.
///
/// Each attempt is counted before its password is checked (a compare-and-swap on the address's count, so of racing
/// attempts each is counted once and none slips past a delay), and the count goes when the password is right. An
/// address with no failures for the account is never delayed: whatever others guess, the owner's first try from a
/// clean address is checked. Every address's failures also add up per account: past
/// ``LoginBackoffSettings/accountFailures`` an address's delays start at its first failure instead of after its free
/// ones. A right password clears the account's counts for that address and the account's total; a proof of the
/// mailbox (a reset, a confirmation, a code sign-in) clears every count of the account.
package struct LoginBackoff: Sendable {
    package let env: AuthEnvironment
    package let app: AppSettings
    /// The account's rows: `app|hash(username)`.
    package let account: String
    /// This client address's row for the account.
    package let pair: String
    /// The account's total.
    package let total: String

    package init(env: AuthEnvironment, app: AppSettings, identifier: String) {
        self.env = env
        self.app = app
        account = Self.account(app: app.id, identifier: identifier)
        pair = account + "|" + AuthEnvironment.hashedIdentifier("address:" + (env.origin.network ?? "-"))
        total = account + "|*"
    }

    /// The key every login-failure row of an account shares.
    package static func account(app: String, identifier: String) -> String {
        "\(app)|\(AuthEnvironment.hashedIdentifier(identifier))"
    }

    /// Lets an attempt through (counted as a failure until ``succeeded()``), or refuses it with
    /// ``AuthError/loginDelayed(retryAfter:)`` while this address's delay for the account runs. Returns the
    /// attempt's number in this address's run (0 when delays are off), for ``failed(userId:attempt:)``.
    @discardableResult
    package func admit() async throws -> Int {
        guard app.loginBackoff.enabled else { return 0 }
        // Most attempts come from an address with no run for the account (the last login succeeded and cleared it):
        // counted at once, as ``admitPastRun()`` counts them when it finds no run, without reading first. A run that
        // exists makes this claim a no-op, and ``admitPastRun()`` decides.
        if let counted = try await env.store.claimLoginAttempt(key: pair, account: account, seen: nil, now: env.clock.now) {
            return counted
        }
        return try await admitPastRun()
    }

    /// ``admit()``, and the account of `email` with its user read in the same round trip as the attempt's first
    /// claim (``GatehouseStore/claimLoginAttempt(key:account:now:readingAccountOf:email:)``): what a password login
    /// needs before its hash. For an address with a run, the read is the one made with the first claim, a few
    /// statements before the attempt is admitted (as any read is a hash's time before the password is checked).
    package func admit(readingAccount email: String) async throws
        -> (attempt: Int, account: (account: EmailAccountRecord, user: UserRecord?)?)
    {
        guard app.loginBackoff.enabled else { return (0, try await env.store.emailAccountWithUser(appId: app.id, email: email)) }
        let first = try await env.store.claimLoginAttempt(key: pair, account: account, now: env.clock.now, readingAccountOf: app.id, email: email)
        if let counted = first.claimed { return (counted, first.account) }
        return (try await admitPastRun(), first.account)
    }

    /// Admits an attempt from an address whose run exists (the first claim found it): waits out its delay or counts it.
    private func admitPastRun() async throws -> Int {
        let settings = app.loginBackoff
        for _ in 0..<4 {
            let now = env.clock.now
            let run = try await env.store.loginFailures(key: pair)
            if let run, run.failures > 0 {
                let accountWide = try await env.store.loginFailures(key: total)?.failures ?? 0
                let free = accountWide >= settings.accountFailures ? 1 : settings.freeFailures
                let delay = settings.delay(afterFailures: run.failures, free: free)
                let ready = run.lastAttemptAt.addingTimeInterval(TimeInterval(delay))
                if ready > now { throw AuthError.loginDelayed(retryAfter: max(1, Int(ready.timeIntervalSince(now).rounded(.up)))) }
            }
            if let counted = try await env.store.claimLoginAttempt(key: pair, account: account, seen: run?.failures, now: now) { return counted }
            // Another attempt from this address was counted in between: look again.
        }
        throw AuthError.loginDelayed(retryAfter: 1)
    }

    /// Counts a wrong password in the account's total (the address's count already holds it, as `attempt`); the
    /// failure that starts this address's delays is audited (later ones are plain failures).
    package func failed(userId: String?, attempt: Int) async throws {
        let settings = app.loginBackoff
        guard settings.enabled else { return }
        _ = try await env.store.recordLoginFailure(key: total, account: account, now: env.clock.now)
        if attempt == settings.freeFailures {
            env.logger.notice("login delays start", metadata: ["app": "\(app.id)"])
            await env.audit(.loginDelayed, app: app.id, user: userId, detail: ["failures": "\(settings.freeFailures)"])
        }
    }

    /// A login that succeeded (the right password of a confirmed, enabled account): this address's count and the
    /// account's total go.
    package func succeeded() async throws {
        guard !clearedKeys.isEmpty else { return }
        try await env.store.clearLoginFailures(keys: clearedKeys)
    }

    /// Takes back one wrong password from this address's count and the account's total (a run of one ends; a longer
    /// one keeps its other failures and its last attempt's time): for a check that turned out to be no guess at this
    /// account, such as a reauthentication's try of one of the user's addresses when another address's password was
    /// the one given (``SessionGate/provePassword(of:_:)``). Only for a wrong password this backoff counted
    /// (``EmailPasswordService/PasswordAttempt/wrong(_:)``), once.
    package func giveBack() async throws {
        guard !clearedKeys.isEmpty else { return }
        try await env.store.returnLoginAttempt(keys: clearedKeys)
    }

    /// The runs a success ends: this address's count for the account and the account's total (none when delays are
    /// off). A Client API login ends them in the write of the session it starts
    /// (``SessionService/startSession(for:app:device:apiKeyId:recording:clearing:)``).
    package var clearedKeys: [String] {
        app.loginBackoff.enabled ? [pair, total] : []
    }
}
