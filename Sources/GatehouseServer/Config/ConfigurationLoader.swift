import Foundation
import GatehouseArgon2
import GatehouseDomain
import Yams

/// Builds a ``GatehouseConfiguration`` from, in increasing order of precedence: the built-in defaults, a YAML file
/// (JSON is YAML too), environment variables, and command-line flags.
///
/// Every key is checked: an unknown key (usually a typo), a wrong type or an out-of-range value is a
/// ``ConfigurationError`` naming the key, reported before the server listens.
///
/// Environment variables: `GATEHOUSE_HOST`, `GATEHOUSE_PORT`, `GATEHOUSE_PUBLIC_URL`, `GATEHOUSE_DATABASE_URL`.
public struct ConfigurationLoader: Sendable {
    /// Values given on the command line (`--host`, `--port`, `--database`); nil when absent.
    public struct Overrides: Sendable, Hashable {
        public var host: String?
        public var port: String?
        public var database: String?
        public init(host: String? = nil, port: String? = nil, database: String? = nil) {
            self.host = host
            self.port = port
            self.database = database
        }
    }

    public var environment: [String: String]

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// Loads the file at `path` (or the development defaults when nil) and applies environment and flags.
    public func load(file path: String?, overrides: Overrides = .init()) throws(ConfigurationError) -> GatehouseConfiguration {
        var config: GatehouseConfiguration
        if let path {
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw ConfigurationError(key: "", message: "cannot read configuration file \(path): \(error.localizedDescription)")
            }
            config = try parse(yaml: text)
        } else {
            config = .development
        }
        try applyOverrides(to: &config, overrides)
        try Self.validate(config)
        return config
    }

    /// Parses a YAML or JSON document into a configuration (no environment, no flags).
    public func parse(yaml text: String) throws(ConfigurationError) -> GatehouseConfiguration {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw ConfigurationError(key: "", message: "the configuration file is not valid YAML or JSON: \(error)")
        }
        guard let root else { throw ConfigurationError(key: "", message: "the configuration file is empty") }
        let top = try ConfigNode(node: root, path: "").mapping(allowed: ["server", "database", "dev", "mail", "apps", "retention", "audit"])

        var config = GatehouseConfiguration(apps: [])
        if let server = try top.optionalMapping(
            "server",
            allowed: ["host", "port", "publicURL", "location", "clientIPHeader", "ipv6PrefixLength", "idleTimeout", "headerTimeout", "bodyTimeout", "maxConnections", "shutdownTimeout", "verifiedTokenCache", "metrics"]
        ) {
            if let metrics = try server.optionalMapping("metrics", allowed: ["enabled", "token"]) {
                if let value = try metrics.optionalBool("enabled") { config.server.metrics.enabled = value }
                config.server.metrics.token = try metrics.optionalString("token")
            }
            if let value = try server.optionalInt("idleTimeout") { config.server.idleTimeout = value }
            if let value = try server.optionalInt("headerTimeout") { config.server.headerTimeout = value }
            if let value = try server.optionalInt("bodyTimeout") { config.server.bodyTimeout = value }
            config.server.maxConnections = try server.optionalInt("maxConnections")
            if let value = try server.optionalInt("verifiedTokenCache") { config.server.verifiedTokenCache = value }
            if let value = try server.optionalInt("shutdownTimeout") { config.server.shutdownTimeout = value }
            if let host = try server.optionalString("host") { config.server.host = host }
            config.server.clientIPHeader = try server.optionalString("clientIPHeader")
            if let value = try server.optionalInt("ipv6PrefixLength") { config.server.ipv6PrefixLength = value }
            if let port = try server.optionalInt("port") { config.server.port = port }
            config.server.publicURL = try server.optionalString("publicURL")
            if let location = try server.optionalString("location") { config.server.location = location }
        }
        if let database = try top.optionalMapping("database", allowed: ["url"]) {
            if let url = try database.optionalString("url") {
                config.database.url = try DatabaseURL(parsing: url)
            }
        }
        if let dev = try top.optionalMapping("dev", allowed: ["mailbox"]) {
            config.dev.mailbox = try dev.optionalBool("mailbox") ?? false
        }
        if let mail = try top.optionalMapping("mail", allowed: ["smtp", "starttls", "from", "timeout", "caFile"]) {
            config.mail.smtpURL = try mail.optionalString("smtp")
            if let starttls = try mail.optionalEnum("starttls", MailSettings.StartTLS.self) { config.mail.starttls = starttls }
            if let from = try mail.optionalString("from") { config.mail.from = from }
            if let timeout = try mail.optionalInt("timeout") { config.mail.timeout = timeout }
            config.mail.caFile = try mail.optionalString("caFile")
        }
        if let retention = try top.optionalMapping(
            "retention", allowed: ["enabled", "interval", "batchSize", "expired", "endedSessions", "sentMail", "auditEvents"]
        ) {
            if let value = try retention.optionalBool("enabled") { config.retention.enabled = value }
            if let value = try retention.optionalInt("interval") { config.retention.interval = value }
            if let value = try retention.optionalInt("batchSize") { config.retention.batchSize = value }
            if let value = try retention.optionalInt("expired") { config.retention.expired = value }
            if let value = try retention.optionalInt("endedSessions") { config.retention.endedSessions = value }
            if let value = try retention.optionalInt("sentMail") { config.retention.sentMail = value }
            if let value = try retention.optionalInt("auditEvents") { config.retention.auditEvents = value }
        }
        if let audit = try top.optionalMapping("audit", allowed: ["refreshes"]) {
            if let value = try audit.optionalBool("refreshes") { config.audit.refreshes = value }
        }
        guard let apps = try top.optionalSequence("apps") else {
            throw ConfigurationError(key: "apps", message: "at least one app is required")
        }
        for app in apps {
            config.apps.append(try parseApp(app))
        }
        return config
    }

    private func parseApp(_ node: ConfigNode) throws(ConfigurationError) -> AppSettings {
        let app = try node.mapping(allowed: [
            "id", "name", "accessTokenTTL", "refreshTokenTTL", "revealUserExistence", "providers", "passwordHash",
            "emailTemplates", "emailLimit", "nativeAuth", "cors", "rateLimits", "loginBackoff", "sessionIdleTimeout", "recentProofWindow",
        ])
        guard let id = try app.optionalString("id") else {
            throw ConfigurationError(key: app.path + ".id", message: "every app needs an id")
        }
        var config = AppSettings(id: id, name: try app.optionalString("name"), localUserpass: nil)
        if let ttl = try app.optionalInt("accessTokenTTL") { config.accessTokenTTL = ttl }
        if let ttl = try app.optionalInt("refreshTokenTTL") { config.refreshTokenTTL = ttl }
        if let reveal = try app.optionalBool("revealUserExistence") { config.revealUserExistence = reveal }
        config.emailTemplates = try app.optionalString("emailTemplates")
        if let limit = try app.optionalMapping("emailLimit", allowed: ["count", "window", "total"]) {
            if let count = try limit.optionalInt("count") { config.emailLimit = count }
            if let window = try limit.optionalInt("window") { config.emailLimitWindow = window }
            if let total = try limit.optionalInt("total") { config.emailLimitTotal = total }
        }
        if let idle = try app.optionalInt("sessionIdleTimeout") { config.sessionIdleTimeout = idle }
        if let window = try app.optionalInt("recentProofWindow") { config.recentProofWindow = window }
        if let limits = try app.optionalMapping("rateLimits", allowed: Set(["enabled"] + RateLimitSettings.Kind.allCases.map(\.rawValue))) {
            if let enabled = try limits.optionalBool("enabled") { config.rateLimits.enabled = enabled }
            for kind in RateLimitSettings.Kind.allCases {
                guard let rule = try limits.optionalMapping(kind.rawValue, allowed: ["perIP", "perIdentifier"]) else { continue }
                var parsed = config.rateLimits.rules[kind] ?? RateLimitSettings.Rule(perIP: nil, perIdentifier: nil)
                if let text = try rule.optionalString("perIP") { parsed.perIP = try Self.limit(text, key: rule.path + ".perIP") }
                if let text = try rule.optionalString("perIdentifier") {
                    parsed.perIdentifier = try Self.limit(text, key: rule.path + ".perIdentifier")
                }
                config.rateLimits.rules[kind] = parsed
            }
        }
        if let backoff = try app.optionalMapping("loginBackoff", allowed: ["enabled", "freeFailures", "baseDelay", "maxDelay", "accountFailures"]) {
            if let enabled = try backoff.optionalBool("enabled") { config.loginBackoff.enabled = enabled }
            if let value = try backoff.optionalInt("freeFailures") { config.loginBackoff.freeFailures = value }
            if let value = try backoff.optionalInt("baseDelay") { config.loginBackoff.baseDelay = value }
            if let value = try backoff.optionalInt("maxDelay") { config.loginBackoff.maxDelay = value }
            if let value = try backoff.optionalInt("accountFailures") { config.loginBackoff.accountFailures = value }
        }
        if let hash = try app.optionalMapping("passwordHash", allowed: ["memoryKiB", "iterations", "parallelism"]) {
            func uint(_ key: String, _ fallback: UInt32) throws(ConfigurationError) -> UInt32 {
                guard let value = try hash.optionalInt(key) else { return fallback }
                guard value > 0, value <= Int(UInt32.max) else {
                    throw ConfigurationError(key: hash.path + "." + key, message: "expected a positive integer, found \(value)")
                }
                return UInt32(value)
            }
            config.passwordHash = Argon2Parameters(
                memoryKiB: try uint("memoryKiB", 19456),
                iterations: try uint("iterations", 2),
                parallelism: try uint("parallelism", 1)
            )
        }
        if let providers = try app.optionalMapping(
            "providers",
            allowed: [
                "local-userpass", "anon-user", "api-key", "custom-token", "oauth2-google", "oauth2-apple", "oauth2-facebook", "custom-function",
            ]
        ) {
            if let anonymous = try providers.optionalMapping("anon-user", allowed: ["enabled"]) {
                config.anonymousUsers = try anonymous.optionalBool("enabled") ?? true
            }
            if let apiKeys = try providers.optionalMapping("api-key", allowed: ["enabled"]) {
                config.apiKeys = try apiKeys.optionalBool("enabled") ?? true
            }
            try externalProviders(providers, into: &config)
            if let local = try providers.optionalMapping(
                "local-userpass",
                allowed: [
                    "enabled", "confirmation", "emailConfirmationURL", "reset", "resetPasswordURL", "tokenTTL", "password",
                    "confirmationFunction", "resetFunction", "migrateUserFunction",
                ]
            ) {
                var lp = LocalUserpassConfiguration()
                if let confirmation = try local.optionalEnum("confirmation", LocalUserpassConfiguration.Confirmation.self) {
                    lp.confirmation = confirmation
                }
                lp.emailConfirmationURL = try local.optionalString("emailConfirmationURL")
                if let reset = try local.optionalEnum("reset", LocalUserpassConfiguration.Reset.self) { lp.reset = reset }
                lp.resetPasswordURL = try local.optionalString("resetPasswordURL")
                if let ttl = try local.optionalInt("tokenTTL") { lp.tokenTTL = ttl }
                lp.confirmationFunction = try webhook(local, "confirmationFunction")
                lp.resetFunction = try webhook(local, "resetFunction")
                // It receives passwords: https (or loopback http) as every webhook, checked in webhook(_:_:).
                lp.migrateUserFunction = try webhook(local, "migrateUserFunction")
                if let password = try local.optionalMapping("password", allowed: ["minLength", "maxLength", "refuseCommon", "refuseEmail"]) {
                    if let min = try password.optionalInt("minLength") { lp.password.minLength = min }
                    if let max = try password.optionalInt("maxLength") { lp.password.maxLength = max }
                    if let refuse = try password.optionalBool("refuseCommon") { lp.password.refuseCommon = refuse }
                    if let refuse = try password.optionalBool("refuseEmail") { lp.password.refuseEmail = refuse }
                }
                config.localUserpass = (try local.optionalBool("enabled") ?? true) ? lp : nil
            }
        }
        if let native = try app.optionalMapping(
            "nativeAuth",
            allowed: ["enabled", "clientIds", "signUp", "attributes", "code", "continuationTokenTTL", "refreshTokenReuseWindow"]
        ) {
            config.nativeAuth = try nativeAuth(native)
        }
        if let cors = try app.optionalMapping("cors", allowed: ["allowedOrigins"]), let origins = try cors.optionalSequence("allowedOrigins") {
            for node in origins {
                let origin = try node.string()
                // An origin is scheme://host[:port], nothing more; no wildcards: browsers send the exact origin.
                guard let url = URLComponents(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme),
                    let host = url.host, !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || "-.[]:".contains($0) }),
                    url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil
                else { throw ConfigurationError(key: node.path, message: "expected an origin like https://app.example.com, found \"\(origin)\"") }
                // As browsers write it: `https://app.example.com:443` is sent as `https://app.example.com`.
                config.corsOrigins.insert(BrowserOrigin.of(origin) ?? origin.lowercased())
            }
        }
        return config
    }

    /// A rate limit written `COUNT/WINDOW`, the window in seconds or with a unit (`100/5m`, `10/30s`, `1000/1h`), or
    /// `off`.
    static func limit(_ text: String, key: String) throws(ConfigurationError) -> RateLimitSettings.Limit? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed == "off" { return nil }
        let parts = trimmed.split(separator: "/", omittingEmptySubsequences: false)
        var window = parts.count == 2 ? String(parts[1]) : ""
        var unit = 1
        if let last = window.last, let scale = ["s": 1, "m": 60, "h": 3600][String(last)] {
            unit = scale
            window.removeLast()
        }
        guard parts.count == 2, let count = Int(parts[0]), (1...1_000_000).contains(count), let length = Int(window.isEmpty ? "1" : window),
            (1...86_400).contains(length * unit)
        else {
            throw ConfigurationError(
                key: key, message: "expected COUNT/WINDOW like 100/5m (count 1…1000000, window 1s…24h) or off, found \"\(text)\""
            )
        }
        return RateLimitSettings.Limit(count, per: length * unit)
    }

    /// A webhook: `{ url, secret, timeout }`, the secret a Standard Webhooks `whsec_…` secret.
    private func webhook(_ parent: ConfigMapping, _ key: String) throws(ConfigurationError) -> WebhookSettings? {
        guard let hook = try parent.optionalMapping(key, allowed: ["url", "secret", "timeout"]) else { return nil }
        guard let url = try hook.optionalString("url") else { throw ConfigurationError(key: hook.path + ".url", message: "required") }
        try Self.checkOutboundURL(url, key: hook.path + ".url")
        guard let secret = try hook.optionalString("secret") else { throw ConfigurationError(key: hook.path + ".secret", message: "required") }
        let settings = WebhookSettings(url: url, secret: secret, timeout: TimeInterval(try hook.optionalInt("timeout") ?? 5))
        guard settings.secretKey != nil else {
            throw ConfigurationError(key: hook.path + ".secret", message: "expected whsec_ followed by the base64 of at least 24 random bytes")
        }
        guard (1...60).contains(settings.timeout) else {
            throw ConfigurationError(key: hook.path + ".timeout", message: "expected 1…60 seconds, found \(Int(settings.timeout))")
        }
        return settings
    }

    /// `custom-token`, `oauth2-google`, `oauth2-apple`, `oauth2-facebook`: each on when present (and `enabled` is not
    /// false), with its keys checked here so that a bad key stops the start, not the first login.
    private func externalProviders(_ providers: ConfigMapping, into config: inout AppSettings) throws(ConfigurationError) {
        func strings(_ mapping: ConfigMapping, _ key: String) throws(ConfigurationError) -> [String]? {
            if let single = try? mapping.optionalString(key) { return [single] }
            guard let nodes = try mapping.optionalSequence(key) else { return nil }
            var values: [String] = []
            for node in nodes { values.append(try node.string()) }
            return values
        }
        func required(_ mapping: ConfigMapping, _ key: String) throws(ConfigurationError) -> String {
            guard let value = try mapping.optionalString(key), !value.isEmpty else {
                throw ConfigurationError(key: mapping.path + "." + key, message: "required")
            }
            return value
        }
        func url(_ mapping: ConfigMapping, _ key: String, default fallback: String) throws(ConfigurationError) -> String {
            guard let value = try mapping.optionalString(key) else { return fallback }
            try Self.checkOutboundURL(value, key: mapping.path + "." + key)
            return value
        }
        if let custom = try providers.optionalMapping(
            "custom-token", allowed: ["enabled", "keys", "jwksURL", "issuer", "audience", "metadataFields", "maxLifetime"]
        ), try custom.optionalBool("enabled") ?? true {
            var settings = CustomTokenSettings()
            if let lifetime = try custom.optionalInt("maxLifetime") {
                guard (60...2_592_000).contains(lifetime) else {
                    throw ConfigurationError(key: custom.path + ".maxLifetime", message: "expected 60…2592000 seconds, found \(lifetime)")
                }
                settings.maxLifetime = lifetime
            }
            for node in try custom.optionalSequence("keys") ?? [] {
                let key = try node.mapping(allowed: ["kid", "secret", "publicKey"])
                let kid = try key.optionalString("kid")
                switch (try key.optionalString("secret"), try key.optionalString("publicKey")) {
                case (let secret?, nil): settings.keys.append(.secret(secret, kid: kid))
                case (nil, let pem?): settings.keys.append(.publicKey(pem, kid: kid))
                default: throw ConfigurationError(key: node.path, message: "give either secret (HS256) or publicKey (PEM, RS256 or ES256)")
                }
                do {
                    _ = try CustomTokenSettings(keys: [settings.keys.last!]).verificationKeys()
                } catch let error as ConfigurationError {
                    throw ConfigurationError(key: node.path, message: error.message)
                } catch {
                    throw ConfigurationError(key: node.path, message: "\(error)")
                }
            }
            if let jwks = try custom.optionalString("jwksURL") {
                try Self.checkOutboundURL(jwks, key: custom.path + ".jwksURL")
                settings.jwksURL = jwks
            }
            guard !settings.keys.isEmpty || settings.jwksURL != nil else {
                throw ConfigurationError(key: custom.path, message: "needs keys or jwksURL to verify tokens with")
            }
            settings.issuers = try strings(custom, "issuer") ?? []
            settings.audiences = try strings(custom, "audience") ?? []
            if settings.jwksURL != nil, settings.issuers.isEmpty, settings.audiences.isEmpty {
                // A key set may sign tokens for many apps (a shared identity provider tenant): say whose are welcome.
                throw ConfigurationError(key: custom.path, message: "with jwksURL, set issuer or audience (or both)")
            }
            for node in try custom.optionalSequence("metadataFields") ?? [] {
                let field = try node.mapping(allowed: ["name", "field", "required"])
                let name = try required(field, "name")
                settings.metadataFields.append(
                    .init(name: name, field: try field.optionalString("field"), required: try field.optionalBool("required") ?? false)
                )
            }
            config.customToken = settings
        }
        if let google = try providers.optionalMapping(
            "oauth2-google", allowed: ["enabled", "clientIds", "serverClientId", "clientSecret", "redirectURI", "issuer", "jwksURL", "tokenURL"]
        ), try google.optionalBool("enabled") ?? true {
            guard let ids = try strings(google, "clientIds"), !ids.isEmpty else {
                throw ConfigurationError(key: google.path + ".clientIds", message: "required: the OAuth client ids whose ID tokens are accepted")
            }
            var settings = GoogleSettings(
                clientIds: ids, serverClientId: try google.optionalString("serverClientId"), clientSecret: try google.optionalString("clientSecret"),
                redirectURI: try google.optionalString("redirectURI") ?? "",
                jwksURL: try url(google, "jwksURL", default: GoogleSettings.defaultJWKSURL),
                tokenURL: try url(google, "tokenURL", default: GoogleSettings.defaultTokenURL)
            )
            if let issuers = try strings(google, "issuer") { settings.openID.issuers = issuers }
            if (settings.serverClientId == nil) != (settings.clientSecret == nil) {
                throw ConfigurationError(key: google.path, message: "serverClientId and clientSecret go together (for server auth codes)")
            }
            config.google = settings
        }
        if let apple = try providers.optionalMapping("oauth2-apple", allowed: ["enabled", "clientIds", "issuer", "jwksURL"]),
            try apple.optionalBool("enabled") ?? true
        {
            guard let ids = try strings(apple, "clientIds"), !ids.isEmpty else {
                throw ConfigurationError(key: apple.path + ".clientIds", message: "required: the bundle ids and service ids whose ID tokens are accepted")
            }
            config.apple = AppleSettings(
                clientIds: ids, issuer: try apple.optionalString("issuer") ?? AppleSettings.defaultIssuer,
                jwksURL: try url(apple, "jwksURL", default: AppleSettings.defaultJWKSURL)
            )
        }
        if let function = try providers.optionalMapping("custom-function", allowed: ["enabled", "webhook"]), try function.optionalBool("enabled") ?? true {
            config.customFunction = .some(try webhook(function, "webhook"))
        }
        if let facebook = try providers.optionalMapping("oauth2-facebook", allowed: ["enabled", "appId", "appSecret", "graphURL"]),
            try facebook.optionalBool("enabled") ?? true
        {
            config.facebook = FacebookSettings(
                appId: try required(facebook, "appId"), appSecret: try required(facebook, "appSecret"),
                graphURL: try url(facebook, "graphURL", default: FacebookSettings.defaultGraphURL)
            )
        }
    }

    private func nativeAuth(_ native: ConfigMapping) throws(ConfigurationError) -> NativeAuthSettings {
        var settings = NativeAuthSettings(clientIds: [])
        if let enabled = try native.optionalBool("enabled") { settings.enabled = enabled }
        if let ids = try native.optionalSequence("clientIds") {
            settings.clientIds = []
            for id in ids { settings.clientIds.append(try id.string()) }
        }
        if let signUp = try native.optionalMapping("signUp", allowed: ["methods"]), let methods = try signUp.optionalSequence("methods") {
            settings.signUpMethods = []
            for method in methods { settings.signUpMethods.insert(try method.enumValue(NativeAuthSettings.SignUpMethod.self)) }
        }
        if let attributes = try native.optionalSequence("attributes") {
            for node in attributes {
                let attribute = try node.mapping(allowed: ["name", "type", "required", "regex"])
                guard let name = try attribute.optionalString("name") else {
                    throw ConfigurationError(key: node.path + ".name", message: "every attribute needs a name")
                }
                settings.attributes.append(
                    NativeAuthSettings.Attribute(
                        name: name,
                        type: try attribute.optionalString("type") ?? "string",
                        required: try attribute.optionalBool("required") ?? false,
                        regex: try attribute.optionalString("regex")
                    )
                )
            }
        }
        if let code = try native.optionalMapping("code", allowed: ["length", "ttl", "maxAttempts", "resendInterval"]) {
            if let length = try code.optionalInt("length") { settings.code.length = length }
            if let ttl = try code.optionalInt("ttl") { settings.code.ttl = ttl }
            if let attempts = try code.optionalInt("maxAttempts") { settings.code.maxAttempts = attempts }
            if let interval = try code.optionalInt("resendInterval") { settings.code.resendInterval = interval }
        }
        if let ttl = try native.optionalInt("continuationTokenTTL") { settings.continuationTokenTTL = ttl }
        if let window = try native.optionalInt("refreshTokenReuseWindow") { settings.refreshTokenReuseWindow = window }
        return settings
    }

    private func applyOverrides(to config: inout GatehouseConfiguration, _ flags: Overrides) throws(ConfigurationError) {
        if let host = flags.host ?? environment["GATEHOUSE_HOST"] { config.server.host = host }
        if let port = flags.port {
            config.server.port = try Self.port(port, key: "--port")
        } else if let port = environment["GATEHOUSE_PORT"] {
            config.server.port = try Self.port(port, key: "GATEHOUSE_PORT")
        }
        if let url = environment["GATEHOUSE_PUBLIC_URL"] { config.server.publicURL = url }
        if let smtp = environment["GATEHOUSE_SMTP_URL"] { config.mail.smtpURL = smtp }
        if let token = environment["GATEHOUSE_METRICS_TOKEN"] { config.server.metrics.token = token }
        if let database = flags.database {
            config.database.url = try DatabaseURL(parsing: database, key: "--database")
        } else if let database = environment["GATEHOUSE_DATABASE_URL"] {
            config.database.url = try DatabaseURL(parsing: database, key: "GATEHOUSE_DATABASE_URL")
        }
    }

    private static func port(_ text: String, key: String) throws(ConfigurationError) -> Int {
        guard let port = Int(text.trimmingCharacters(in: .whitespaces)) else {
            throw ConfigurationError(key: key, message: "expected a port number, found \"\(text)\"")
        }
        return port
    }

    /// Range and consistency checks shared by every source: ``GatehouseConfiguration/validate()``, which
    /// `AuthServer.open` runs too, for a configuration built in code.
    static func validate(_ config: GatehouseConfiguration) throws(ConfigurationError) {
        try config.validate()
    }

    /// A URL the server calls (a webhook, a key set, a token endpoint): https, or http to a loopback host only.
    private static func checkOutboundURL(_ text: String, key: String) throws(ConfigurationError) {
        try GatehouseConfiguration.checkOutboundURL(text, key: key)
    }
}

/// Records, while a configuration is parsed, every key the loader accepts and every key the document has, as dotted
/// paths with list positions written `[]` (`apps[].providers.oauth2-google.clientIds`). The one place that decides
/// which keys exist is ``ConfigNode/mapping(allowed:)``; the test that keeps `docs/configuration.md` in step with the
/// code reads what it recorded.
final class ConfigurationKeyRecorder: @unchecked Sendable {
    @TaskLocal static var current: ConfigurationKeyRecorder?

    private let lock = NSLock()
    private var acceptedKeys: Set<String> = []
    private var presentKeys: Set<String> = []

    /// Every key some mapping of the parsed document would have accepted.
    var accepted: Set<String> { lock.withLock { acceptedKeys } }
    /// Every key the parsed document had.
    var present: Set<String> { lock.withLock { presentKeys } }

    func record(path: String, allowed: Set<String>, present: [String]) {
        let prefix = path.replacing(/\[\d+\]/, with: "[]")
        func key(_ name: String) -> String { prefix.isEmpty ? name : prefix + "." + name }
        lock.withLock {
            acceptedKeys.formUnion(allowed.map(key))
            presentKeys.formUnion(present.map(key))
        }
    }
}

/// A YAML node with its dotted path, so that every error names its key.
struct ConfigNode {
    let node: Node
    let path: String

    private func child(_ key: String) -> String { path.isEmpty ? key : path + "." + key }

    private func describe(_ node: Node) -> String {
        switch node {
        case .scalar(let s): "\"\(s.string)\""
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .alias: "an alias"
        }
    }

    /// This node as a string scalar.
    func string() throws(ConfigurationError) -> String {
        guard case .scalar(let scalar) = node else {
            throw ConfigurationError(key: path, message: "expected a string, found \(describe(node))")
        }
        return scalar.string
    }

    /// This node as one of `E`'s raw values.
    func enumValue<E: RawRepresentable & CaseIterable>(_ type: E.Type) throws(ConfigurationError) -> E where E.RawValue == String {
        let text = try string()
        guard let value = E(rawValue: text) else {
            throw ConfigurationError(key: path, message: "expected \(E.allCases.map(\.rawValue).joined(separator: " | ")), found \"\(text)\"")
        }
        return value
    }

    /// This node as a mapping whose keys must all be in `allowed`.
    func mapping(allowed: Set<String>) throws(ConfigurationError) -> ConfigMapping {
        guard case .mapping(let mapping) = node else {
            throw ConfigurationError(key: path.isEmpty ? "(top level)" : path, message: "expected a mapping of keys, found \(describe(node))")
        }
        ConfigurationKeyRecorder.current?.record(path: path, allowed: allowed, present: mapping.keys.compactMap(\.string))
        var values: [String: Node] = [:]
        for (key, value) in mapping {
            guard let name = key.string else {
                throw ConfigurationError(key: path, message: "keys must be strings")
            }
            guard allowed.contains(name) else {
                throw ConfigurationError(
                    key: child(name),
                    message: "unknown key; expected one of \(allowed.sorted().joined(separator: ", "))"
                )
            }
            values[name] = value
        }
        return ConfigMapping(values: values, path: path)
    }
}

/// The keys of one YAML mapping, read with type checks.
struct ConfigMapping {
    let values: [String: Node]
    let path: String

    private func child(_ key: String) -> String { path.isEmpty ? key : path + "." + key }

    private func scalar(_ key: String, expected: String) throws(ConfigurationError) -> Node.Scalar? {
        guard let node = values[key] else { return nil }
        if case .scalar(let s) = node {
            if s.tag.description == Tag.Name.null.rawValue || (s.style == .plain && ["null", "~", ""].contains(s.string)) {
                return nil
            }
            return s
        }
        throw ConfigurationError(key: child(key), message: "expected \(expected), found a \(node.isMapping ? "mapping" : "list")")
    }

    func optionalString(_ key: String) throws(ConfigurationError) -> String? {
        try scalar(key, expected: "a string")?.string
    }

    func optionalInt(_ key: String) throws(ConfigurationError) -> Int? {
        guard let s = try scalar(key, expected: "an integer") else { return nil }
        guard let value = Int(s.string.trimmingCharacters(in: .whitespaces)) else {
            throw ConfigurationError(key: child(key), message: "expected an integer, found \"\(s.string)\"")
        }
        return value
    }

    func optionalBool(_ key: String) throws(ConfigurationError) -> Bool? {
        guard let s = try scalar(key, expected: "true or false") else { return nil }
        switch s.string.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw ConfigurationError(key: child(key), message: "expected true or false, found \"\(s.string)\"")
        }
    }

    func optionalEnum<E: RawRepresentable & CaseIterable>(_ key: String, _ type: E.Type) throws(ConfigurationError) -> E?
    where E.RawValue == String {
        guard let text = try optionalString(key) else { return nil }
        guard let value = E(rawValue: text) else {
            let expected = E.allCases.map(\.rawValue).joined(separator: " | ")
            throw ConfigurationError(key: child(key), message: "expected \(expected), found \"\(text)\"")
        }
        return value
    }

    func optionalMapping(_ key: String, allowed: Set<String>) throws(ConfigurationError) -> ConfigMapping? {
        guard let node = values[key] else { return nil }
        return try ConfigNode(node: node, path: child(key)).mapping(allowed: allowed)
    }

    func optionalSequence(_ key: String) throws(ConfigurationError) -> [ConfigNode]? {
        guard let node = values[key] else { return nil }
        guard case .sequence(let sequence) = node else {
            throw ConfigurationError(key: child(key), message: "expected a list")
        }
        return sequence.enumerated().map { ConfigNode(node: $0.element, path: "\(child(key))[\($0.offset)]") }
    }
}

extension Node {
    fileprivate var isMapping: Bool {
        if case .mapping = self { return true }
        return false
    }
}
