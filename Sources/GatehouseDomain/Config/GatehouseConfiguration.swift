import Foundation
public import GatehouseArgon2

/// Everything `gatehouse serve` needs to know, validated. Built by ``ConfigurationLoader`` from a YAML (or JSON)
/// file, environment variables and command-line flags; every key is documented in docs/configuration.md.
public struct GatehouseConfiguration: Sendable {
    public var server: ServerSettings
    public var database: DatabaseSettings
    public var dev: DevSettings
    public var mail: MailSettings
    /// The apps this server serves; ids are unique.
    public var apps: [AppSettings]
    /// How long data that is only kept for a while stays (`retention`).
    public var retention: RetentionSettings
    /// Which routine events the audit log records besides the security events (`audit`).
    public var audit = AuditSettings()

    public init(
        server: ServerSettings = .init(),
        database: DatabaseSettings = .init(),
        dev: DevSettings = .init(),
        mail: MailSettings = .init(),
        apps: [AppSettings],
        retention: RetentionSettings = .init()
    ) {
        self.server = server
        self.database = database
        self.dev = dev
        self.mail = mail
        self.apps = apps
        self.retention = retention
    }

    /// What `gatehouse serve` runs with no configuration at all: 127.0.0.1:9090, SQLite at
    /// `.gatehouse/gatehouse.sqlite`, the dev mailbox on, and one app `gatehouse-dev` with email/password sign-up
    /// confirmed by email, and native auth for the client id `dev-client` (an optional `displayName` attribute).
    public static var development: GatehouseConfiguration {
        GatehouseConfiguration(
            dev: DevSettings(mailbox: true),
            apps: [
                AppSettings(
                    id: "gatehouse-dev", localUserpass: LocalUserpassConfiguration(confirmation: .email),
                    nativeAuth: NativeAuthSettings(clientIds: ["dev-client"], attributes: [.init(name: "displayName")])
                )
            ]
        )
    }

    /// The app with this id, if configured.
    public func app(id: String) -> AppSettings? { apps.first { $0.id == id } }
}

/// `server.*`
public struct ServerSettings: Sendable, Hashable {
    /// Address to bind. Default `127.0.0.1`.
    public var host: String
    /// Port to bind; 0 picks a free port. Default 9090.
    public var port: Int
    /// The externally reachable base URL (scheme, host, optional port; no path). Clients are sent here by
    /// `/location`, and emailed links start with it. Default `http://HOST:PORT`.
    public var publicURL: String?
    /// `location` answered by `/location`.
    public var location: String
    /// The header a reverse proxy in front of Gatehouse puts the client's address in (`X-Forwarded-For`,
    /// `X-Real-IP`); its last entry is taken, the one the nearest proxy added. Nil (the default): the address of the
    /// connection's peer. Set it only behind a proxy that overwrites or appends the header, or clients can pick the
    /// address their rate limits are counted against.
    public var clientIPHeader: String?
    /// How many leading bits of an IPv6 client address name one client for rate limits, login delays and send
    /// limits (an IPv4 address always counts on its own). Default 64: a host is usually given a whole /64 and may
    /// use any address in it. 48…128.
    public var ipv6PrefixLength = 64
    /// Seconds a connection may sit without starting a request (new, or kept alive after an answer) before it is
    /// closed. Default 60.
    public var idleTimeout = 60
    /// Seconds from a request's first byte until its head (request line and headers) must be complete. Default 10.
    public var headerTimeout = 10
    /// Seconds from a request's head until its whole body must have arrived; past it 408. Default 30.
    public var bodyTimeout = 30
    /// Connections served at once; past it new ones wait in the listen backlog. Nil (the default): the soft file
    /// limit (raised to the hard limit at start) less 256, at most 16,384.
    public var maxConnections: Int?
    /// Tokens whose signature this process has verified and remembers, so that the same token presented again skips
    /// its ECDSA verification (``VerifiedTokens``); 0 remembers none. Default 4,096.
    public var verifiedTokenCache = 4096
    /// Seconds a graceful shutdown (SIGTERM, SIGINT) waits for requests in flight before it cancels them. Default 25.
    public var shutdownTimeout = 25
    /// `server.metrics`: Prometheus metrics at `/metrics`.
    public var metrics = MetricsSettings()

    public init(host: String = "127.0.0.1", port: Int = 9090, publicURL: String? = nil, location: String = "self-hosted") {
        self.host = host
        self.port = port
        self.publicURL = publicURL
        self.location = location
    }

    /// `publicURL`, or one derived from the bound host and port.
    public func resolvedPublicURL(boundPort: Int? = nil) -> String {
        if let publicURL { return publicURL }
        let visibleHost = (host == "0.0.0.0" || host == "::") ? "127.0.0.1" : host
        return "http://\(Loopback.urlHost(visibleHost)):\(boundPort ?? port)"
    }
}

/// `server.metrics.*`: who may read `/metrics`. Off by default. With a `token`, every request needs
/// `Authorization: Bearer TOKEN` (others get 401); without one, only connections from a loopback address that carry no
/// proxy header (`X-Forwarded-For`, `Forwarded`, `X-Real-IP`, `server.clientIPHeader`) may, and others get 404.
public struct MetricsSettings: Sendable, Hashable {
    /// Serve `/metrics` (and record the metrics). Default false.
    public var enabled: Bool
    /// The bearer token a scraper must send; at least 16 characters. Nil: loopback peers only.
    public var token: String?

    public init(enabled: Bool = false, token: String? = nil) {
        self.enabled = enabled
        self.token = token
    }
}

/// `database.*`
public struct DatabaseSettings: Sendable, Hashable {
    /// Where the data lives.
    public var url: DatabaseURL
    public init(url: DatabaseURL = .sqliteFile(".gatehouse/gatehouse.sqlite")) { self.url = url }
}

/// A parsed `database.url`.
public enum DatabaseURL: Sendable, Hashable, CustomStringConvertible {
    /// `sqlite:PATH` (relative to the working directory, or absolute); the folder is created if missing.
    case sqliteFile(String)
    /// `sqlite::memory:`: nothing survives a restart. For tests and experiments.
    case sqliteMemory
    /// `postgres://user:pass@host:port/db?sslmode=…&pool=…&connect_timeout=…`: for production and for several
    /// instances sharing one database.
    case postgres(PostgresSettings)

    /// Parses `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:` or `postgres://…`. `key` names the setting in errors.
    public init(parsing text: String, key: String = "database.url") throws(ConfigurationError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("postgres:") || trimmed.hasPrefix("postgresql:") {
            self = .postgres(try PostgresSettings(parsing: trimmed, key: key))
            return
        }
        guard trimmed.hasPrefix("sqlite:") else {
            throw ConfigurationError(key: key, message: "expected sqlite:PATH, sqlite::memory: or postgres://…")
        }
        var rest = String(trimmed.dropFirst("sqlite:".count))
        if rest.hasPrefix("//") { rest.removeFirst(2) }
        if rest == ":memory:" {
            self = .sqliteMemory
        } else if rest.isEmpty {
            throw ConfigurationError(key: key, message: "sqlite: needs a file path, for example sqlite:.gatehouse/gatehouse.sqlite")
        } else {
            self = .sqliteFile(rest)
        }
    }

    /// The URL without any password.
    public var description: String {
        switch self {
        case .sqliteFile(let path): "sqlite:\(path)"
        case .sqliteMemory: "sqlite::memory:"
        case .postgres(let settings): settings.description
        }
    }
}

/// `dev.*`
public struct DevSettings: Sendable, Hashable {
    /// Keep every email in a local mailbox readable at `/_dev/mailbox` instead of sending it. Never turn this on
    /// for a server real users reach: the mailbox shows their confirmation and reset links.
    public var mailbox: Bool
    public init(mailbox: Bool = false) { self.mailbox = mailbox }
}

/// `mail.*`: how the outbox is delivered.
public struct MailSettings: Sendable, Hashable {
    /// When to use STARTTLS on an `smtp://` connection.
    public enum StartTLS: String, Sendable, Hashable, CaseIterable {
        /// Refuse to send unless the server offers STARTTLS (the default).
        case required
        /// Use it when offered.
        case optional
        /// Never (plain text; for a relay on the same host).
        case never
    }

    /// `smtp://user:pass@host:port` (port 587 by default, STARTTLS per ``starttls``) or `smtps://…` (implicit TLS,
    /// port 465 by default). Nil: no SMTP delivery.
    public var smtpURL: String?
    public var starttls: StartTLS
    /// The `From` address, optionally with a name: `Gatehouse <no-reply@example.com>`.
    public var from: String
    /// Seconds for connecting and for each reply. Default 30.
    public var timeout: Int
    /// A PEM file of CA certificates to trust instead of the system's (for a private relay).
    public var caFile: String?

    public init(smtpURL: String? = nil, starttls: StartTLS = .required, from: String = "Gatehouse <no-reply@localhost>", timeout: Int = 30, caFile: String? = nil) {
        self.smtpURL = smtpURL
        self.starttls = starttls
        self.from = from
        self.timeout = timeout
        self.caFile = caFile
    }
}

/// One app: its own users, providers and token lifetimes.
public struct AppSettings: Sendable, Hashable {
    /// The client app id used in URLs (`/api/client/v2.0/app/{id}/…`).
    public var id: String
    /// Shown in emails. Defaults to the id.
    public var name: String
    /// Access token lifetime in seconds. Default 1800.
    public var accessTokenTTL: Int
    /// Refresh token (session) lifetime in seconds. Default 5184000 (60 days).
    public var refreshTokenTTL: Int
    /// When false (the default), unknown and known accounts get the same answers at the same timing.
    public var revealUserExistence: Bool
    /// `providers.local-userpass`; nil when the provider is off.
    public var localUserpass: LocalUserpassConfiguration?
    /// `providers.anon-user.enabled`: anonymous users (each login a new user). Default off.
    public var anonymousUsers: Bool
    /// `providers.api-key.enabled`: user API keys (`/api/client/v2.0/auth/api_keys`), server API keys (`gatehouse
    /// apikeys`), and logging in with either. Default off.
    public var apiKeys: Bool
    /// A folder of Mustache files replacing built-in email templates (`confirmation.html.mustache`, …).
    public var emailTemplates: String?
    /// `emailLimit.count`: at most this many emails of one kind to one address in ``emailLimitWindow`` seconds asked
    /// for by one client (an IPv4 address, an IPv6 network). Default 5.
    public var emailLimit: Int
    /// `emailLimit.window`. Default 600 (10 minutes).
    public var emailLimitWindow: Int
    /// `emailLimit.total`: emails of one kind to one address in the window from every client together, after which
    /// each further client still gets its first one (the owner asking from their own device is never refused because
    /// others asked), and no more. Default 20; a total below ``emailLimit`` counts as ``emailLimit``.
    public var emailLimitTotal: Int
    /// Argon2id parameters for new password hashes. Hashes with other parameters are upgraded at the next login.
    public var passwordHash: Argon2Parameters
    /// `nativeAuth`: the native auth API; nil when the key is absent (the API answers `nativeauthapi_disabled`).
    public var nativeAuth: NativeAuthSettings?
    /// `providers.custom-token`: JWTs from the app's own backend; nil when off.
    public var customToken: CustomTokenSettings?
    /// `providers.oauth2-google`; nil when off.
    public var google: GoogleSettings?
    /// `providers.oauth2-apple`; nil when off.
    public var apple: AppleSettings?
    /// `providers.oauth2-facebook`; nil when off.
    public var facebook: FacebookSettings?
    /// `cors.allowedOrigins`: browser origins allowed to call this app's APIs (exact `scheme://host[:port]`). Empty:
    /// browsers on other origins cannot read the answers.
    public var corsOrigins: Set<String> = []
    /// `providers.custom-function`: on when set; its webhook, or nil when the embedding program gives a closure.
    public var customFunction: WebhookSettings??
    /// `rateLimits`: requests per client address and per identifier, per kind of request.
    public var rateLimits = RateLimitSettings()
    /// `loginBackoff`: growing delays after repeated wrong passwords for one account.
    public var loginBackoff = LoginBackoffSettings()
    /// `sessionIdleTimeout`: a session whose refresh token has not been used for this many seconds ends (its refresh
    /// token is refused); 0 turns it off. Default 2592000 (30 days). `refreshTokenTTL` is the absolute lifetime.
    public var sessionIdleTimeout = 2_592_000
    /// `recentProofWindow`: how long, in seconds, after a session's last first-party proof (its login, or a
    /// reauthentication) it may change a credential (a password, an identity) without proving one again. 60…3600;
    /// default 300.
    public var recentProofWindow = 300

    public init(
        id: String,
        name: String? = nil,
        accessTokenTTL: Int = 1800,
        refreshTokenTTL: Int = 5_184_000,
        revealUserExistence: Bool = false,
        localUserpass: LocalUserpassConfiguration? = LocalUserpassConfiguration(),
        anonymousUsers: Bool = false,
        apiKeys: Bool = false,
        emailTemplates: String? = nil,
        emailLimit: Int = 5,
        emailLimitWindow: Int = 600,
        emailLimitTotal: Int = 20,
        passwordHash: Argon2Parameters = .owasp,
        nativeAuth: NativeAuthSettings? = nil,
        customToken: CustomTokenSettings? = nil,
        google: GoogleSettings? = nil,
        apple: AppleSettings? = nil,
        facebook: FacebookSettings? = nil,
        customFunction: WebhookSettings?? = nil
    ) {
        self.id = id
        self.name = name ?? id
        self.accessTokenTTL = accessTokenTTL
        self.refreshTokenTTL = refreshTokenTTL
        self.revealUserExistence = revealUserExistence
        self.localUserpass = localUserpass
        self.anonymousUsers = anonymousUsers
        self.apiKeys = apiKeys
        self.emailTemplates = emailTemplates
        self.emailLimit = emailLimit
        self.emailLimitWindow = emailLimitWindow
        self.emailLimitTotal = emailLimitTotal
        self.passwordHash = passwordHash
        self.nativeAuth = nativeAuth
        self.customToken = customToken
        self.google = google
        self.apple = apple
        self.facebook = facebook
        self.customFunction = customFunction
    }

    /// The password rules of every password this app accepts: `local-userpass.password`, or the defaults when
    /// the provider is off.
    public var passwordPolicy: PasswordPolicy { localUserpass?.password ?? PasswordPolicy() }
}

extension Argon2Parameters {
    /// OWASP's recommendation: m=19456 KiB, t=2, p=1.
    public static var owasp: Argon2Parameters { Argon2Parameters(memoryKiB: 19456, iterations: 2, parallelism: 1) }

    /// The most work (``work``: memory × passes, in 1 KiB blocks) an app's `passwordHash` may set: 2,000,000, such as
    /// 1 GiB with one pass or 64 MiB with 30, about a second of one core per login. It is the server's cost budget for
    /// every stored hash (`HashCostBudget`, which a login checks before running a hash that is not of the app's
    /// current parameters), so a hash Gatehouse made under any valid configuration still verifies, and is upgraded,
    /// after the configuration lowers its cost.
    public static let maxWork: UInt64 = 2_000_000
}

/// `providers.local-userpass`: email/password accounts.
public struct LocalUserpassConfiguration: Sendable, Hashable {
    /// How a new account is confirmed.
    public enum Confirmation: String, Sendable, Hashable, CaseIterable {
        /// Confirmed at registration.
        case auto
        /// Pending until the emailed link's token is confirmed.
        case email
        /// The confirmation function (``confirmationFunction``, or the embedding program's closure) decides.
        case function
    }
    /// How a password reset reaches the user.
    public enum Reset: String, Sendable, Hashable, CaseIterable {
        /// `reset/send` mails a link.
        case email
        /// `reset/call` runs the reset function (``resetFunction``, or the embedding program's closure); `reset/send`
        /// still mails links.
        case function
    }

    public var confirmation: Confirmation
    /// Link target of confirmation emails; `?token=…&tokenId=…` is appended. Default: the server's hosted page
    /// `PUBLIC_URL/app/APP_ID/confirm`.
    public var emailConfirmationURL: String?
    public var reset: Reset
    /// Link target of reset emails; `?token=…&tokenId=…` is appended. Default `PUBLIC_URL/app/APP_ID/reset`.
    public var resetPasswordURL: String?
    /// Lifetime of confirmation and reset tokens, in seconds. Default 1800.
    public var tokenTTL: Int
    public var password: PasswordPolicy
    /// The webhook of `confirmation: function`.
    public var confirmationFunction: WebhookSettings?
    /// The webhook of `reset: function`.
    public var resetFunction: WebhookSettings?
    /// Lazy migration: the webhook asked about addresses Gatehouse does not know, at a password login (with the
    /// password) and at a password reset request (without). Nil: no migration (unless the embedding program gives a
    /// `migrateUser` closure).
    public var migrateUserFunction: WebhookSettings?

    public init(
        confirmation: Confirmation = .email,
        emailConfirmationURL: String? = nil,
        reset: Reset = .email,
        resetPasswordURL: String? = nil,
        tokenTTL: Int = 1800,
        password: PasswordPolicy = .init()
    ) {
        self.confirmation = confirmation
        self.emailConfirmationURL = emailConfirmationURL
        self.reset = reset
        self.resetPasswordURL = resetPasswordURL
        self.tokenTTL = tokenTTL
        self.password = password
    }
}

/// `providers.local-userpass.password`: the rules every new password of the app must meet (registration, resets,
/// native sign-up and reset). Existing passwords are not checked again at login.
public struct PasswordPolicy: Sendable, Hashable {
    /// Minimum length in characters. Default 8.
    public var minLength: Int
    /// Maximum length in characters. Default 256; hashing cost does not depend on it, but request size does.
    public var maxLength: Int
    /// `refuseCommon`: refuse the passwords of the bundled list of the 19,640 most common ones (compared without
    /// regard to case). Default true.
    public var refuseCommon: Bool
    /// `refuseEmail`: refuse a password that is the account's email address, or its part before the `@`. Default true.
    public var refuseEmail: Bool

    public init(minLength: Int = 8, maxLength: Int = 256, refuseCommon: Bool = true, refuseEmail: Bool = true) {
        self.minLength = minLength
        self.maxLength = maxLength
        self.refuseCommon = refuseCommon
        self.refuseEmail = refuseEmail
    }

    /// A rule a password breaks. The raw value is its name in both APIs: the native auth `suberror`, and the start
    /// of the Client API's error message.
    public enum Violation: String, Sendable, Hashable {
        case tooShort = "password_too_short"
        case tooLong = "password_too_long"
        case banned = "password_banned"
        /// The password is the email address (or its local part).
        case isEmail = "password_is_invalid"
    }

    /// The first rule `password` breaks, or nil. Lengths count characters (grapheme clusters). `email`: the account's
    /// normalized address, when known.
    package func violation(_ password: String, email: String? = nil) -> Violation? {
        let length = password.count
        if length < minLength { return .tooShort }
        if length > maxLength { return .tooLong }
        let folded = password.lowercased()
        if refuseEmail, let email {
            let local = email.split(separator: "@", maxSplits: 1).first.map(String.init) ?? email
            if folded == email || folded == local { return .isEmail }
        }
        if refuseCommon, CommonPasswords.contains(folded) { return .banned }
        return nil
    }

    /// Refuses a new password that breaks a rule, as the Client API answers it (native auth flows ask ``violation(_:email:)``
    /// and answer the rule's suberror). `email`: the account's normalized address, when known.
    package func check(_ password: String, email: String?) throws(AuthError) {
        if let violation = violation(password, email: email) { throw .passwordPolicy(violation, message(violation)) }
    }

    /// What to tell the user about `violation`.
    package func message(_ violation: Violation) -> String {
        switch violation {
        case .tooShort: "password must be at least \(minLength) characters"
        case .tooLong: "password must be at most \(maxLength) characters"
        case .banned: "this password is one of the most commonly used; choose another"
        case .isEmail: "password must not be the email address"
        }
    }
}

/// The bundled list of common passwords (`Resources/common-passwords.txt`): Django 5.2's list (BSD-3-Clause),
/// 19,640 passwords lowercased and deduplicated, made by Royce Williams from breach corpora, compiled into the binary
/// (the EmbedResources plugin). Parsed once, at start (``load()``), so the first sign-up does not pay for it.
package enum CommonPasswords {
    /// Reads the list now if it has not been read yet.
    package static func load() { _ = list.count }

    private static let list: Set<String> = Set(EmbeddedResources.commonPasswords.split(whereSeparator: \.isNewline).map(String.init))

    /// Whether `lowercased` (already folded) is on the list.
    package static func contains(_ lowercased: String) -> Bool { list.contains(lowercased) }

    package static var count: Int { list.count }
}

/// A configuration problem, naming the key: `apps[0].accessTokenTTL: expected a positive integer, found "x"`.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Dotted path of the offending key (`server.port`, `apps[1].providers.local-userpass.tokenTTL`).
    public var key: String
    public var message: String
    public init(key: String, message: String) {
        self.key = key
        self.message = message
    }
    public var description: String { key.isEmpty ? message : "\(key): \(message)" }
}
