/// `rateLimits`: how many requests of each kind one client address, and one identifier, may make in a window.
///
/// Counted in the database, so every instance sharing it enforces the same limits (``RateLimiter`` says how, and how
/// far several instances together may overshoot: a tenth of a limit per further instance). A request over a limit is refused
/// with HTTP 429 and `Retry-After` before any work is done for it. Windows are fixed (they start at the first
/// request and last `window` seconds), so a client can make at most twice a limit across a window boundary.
public struct RateLimitSettings: Sendable, Hashable {
    /// A kind of request, counted on its own.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Password checks (Client API and native), API key and provider logins, a native sign-in's last step.
        /// Identifier: the username (email) or the API key.
        case login
        /// `register`, native sign-up starts and anonymous logins (each makes a user). Identifier: the email.
        case registration
        /// Requests that send an email (confirmation, reset, codes). Per address the older `emailLimit` applies too.
        /// Identifier: the email.
        case email
        /// Checks of emailed tokens and codes (`confirm`, `reset`, the hosted pages that open a link, native code
        /// grants). Identifier: the token id or the flow.
        case code
        /// Refresh token use (`auth/session`, native refresh grants, native revoke): every presented token per client
        /// address, refused ones included. Identifier: the session, counted once the token is its own (in the same
        /// statement as the address, before a native token rotates).
        case refresh
        /// Native auth flows: starting a sign-in or a password reset (identifier: the email), and every step that
        /// presents a continuation token (identifier: the flow), each of which reads and writes the flow.
        case flow
    }

    /// At most `count` requests in `window` seconds.
    public struct Limit: Sendable, Hashable, CustomStringConvertible {
        public var count: Int
        public var window: Int
        public init(_ count: Int, per window: Int) {
            self.count = count
            self.window = window
        }
        public var description: String { "\(count)/\(window)s" }
    }

    /// The limits of one kind; nil turns that limit off.
    public struct Rule: Sendable, Hashable {
        public var perIP: Limit?
        public var perIdentifier: Limit?
        public init(perIP: Limit?, perIdentifier: Limit?) {
            self.perIP = perIP
            self.perIdentifier = perIdentifier
        }
    }

    /// `rateLimits.enabled`: false turns every limit of the app off (benchmarks, trusted internal apps).
    public var enabled: Bool
    public var rules: [Kind: Rule]

    public init(enabled: Bool = true, rules: [Kind: Rule] = Self.defaultRules) {
        self.enabled = enabled
        self.rules = rules
    }

    /// The defaults, per 5 minutes: generous enough for an office behind one address, tight enough to make
    /// guessing and flooding slow. Password guessing on one account is slowed further by ``LoginBackoffSettings``.
    public static let defaultRules: [Kind: Rule] = [
        .login: Rule(perIP: Limit(100, per: 300), perIdentifier: Limit(30, per: 300)),
        .registration: Rule(perIP: Limit(30, per: 300), perIdentifier: Limit(10, per: 300)),
        .email: Rule(perIP: Limit(30, per: 300), perIdentifier: nil),
        .code: Rule(perIP: Limit(60, per: 300), perIdentifier: Limit(10, per: 300)),
        .refresh: Rule(perIP: Limit(600, per: 300), perIdentifier: Limit(60, per: 300)),
        .flow: Rule(perIP: Limit(120, per: 300), perIdentifier: Limit(30, per: 300)),
    ]

    /// The rule of `kind`, or nil when limits are off.
    package func rule(_ kind: Kind) -> Rule? { enabled ? rules[kind] : nil }
}

/// `loginBackoff`: growing delays after repeated wrong passwords for one account, instead of a lock anyone could
/// set off against a victim.
///
/// Failures are counted per account (username, known or unknown, so a delay reveals nothing) and client address.
/// After `freeFailures` of them from one address, each further attempt from that address must wait
/// `baseDelay × 2^(failures − freeFailures)` seconds, at most `maxDelay`, after its previous attempt; earlier ones are
/// refused with 429 and `Retry-After` without checking the password. Another address is not slowed by them: an
/// address with no failures for the account is never delayed. Across all addresses, once the account has had
/// `accountFailures` failures (many addresses guessing), each address's delays start at its first failure. A right
/// password clears its address's count and the account's total; a reset, a confirmation or a code sign-in (a proof
/// of the mailbox) clears every count of the account.
public struct LoginBackoffSettings: Sendable, Hashable {
    public var enabled: Bool
    public var freeFailures: Int
    public var baseDelay: Int
    public var maxDelay: Int
    /// Failures of one account across every address after which each address gets one free failure only.
    public var accountFailures: Int

    public init(enabled: Bool = true, freeFailures: Int = 5, baseDelay: Int = 1, maxDelay: Int = 900, accountFailures: Int = 100) {
        self.enabled = enabled
        self.freeFailures = freeFailures
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.accountFailures = accountFailures
    }

    /// Seconds an attempt must wait after the previous one, `failures` failures into a run, the first `free` of
    /// them free (``freeFailures`` unless told otherwise); 0 while free.
    package func delay(afterFailures failures: Int, free: Int? = nil) -> Int {
        let free = free ?? freeFailures
        guard enabled, failures >= free else { return 0 }
        let exponent = min(failures - free, 30)
        return min(maxDelay, baseDelay << exponent)
    }
}
