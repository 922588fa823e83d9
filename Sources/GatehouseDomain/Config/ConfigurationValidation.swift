import Foundation
import GatehouseArgon2

extension GatehouseConfiguration {
    /// Range and consistency checks of a whole configuration, however it was made: the file loader runs them after
    /// it has read a file, the environment and the flags, and `AuthServer.open` runs them for every configuration it
    /// is given, so a program that embeds Gatehouse and builds its configuration in code meets the same rules, with
    /// the same keys and messages.
    ///
    /// Besides the ranges, it checks what the loader checks while it reads (so that the loader never reaches these
    /// wrong): every webhook's URL (https, or http to a loopback host), secret and timeout, and the identity
    /// providers' outbound URLs.
    ///
    /// Not here, because they need more than the configuration: the email templates (files, read when the server
    /// opens), the functions an app uses having a webhook or a closure (the closures are given to `AuthServer.open`),
    /// and the `custom-token` keys (parsed when the server opens). Only the loader checks what a document alone can
    /// get wrong: unknown keys, wrong types, the spelling of rate limits and CORS origins.
    public func validate() throws(ConfigurationError) {
        guard (0...65535).contains(server.port) else {
            throw ConfigurationError(key: "server.port", message: "expected 0…65535, found \(server.port)")
        }
        if let header = server.clientIPHeader, !Self.isHTTPToken(header) {
            throw ConfigurationError(key: "server.clientIPHeader", message: "expected a header name like X-Forwarded-For, found \"\(header)\"")
        }
        for (key, value, range) in [
            ("idleTimeout", server.idleTimeout, 1...3600), ("headerTimeout", server.headerTimeout, 1...300),
            ("bodyTimeout", server.bodyTimeout, 1...3600), ("shutdownTimeout", server.shutdownTimeout, 1...3600),
            ("ipv6PrefixLength", server.ipv6PrefixLength, 48...128),
        ] where !range.contains(value) {
            throw ConfigurationError(key: "server.\(key)", message: "expected \(range.lowerBound)…\(range.upperBound) seconds, found \(value)")
        }
        if let token = server.metrics.token, token.count < 16 || token.contains(where: { $0.isWhitespace || $0.isNewline }) {
            // A short token is guessable; one with spaces could never be sent in an Authorization header.
            throw ConfigurationError(key: "server.metrics.token", message: "expected at least 16 characters without spaces, found \(token.count)")
        }
        if let value = server.maxConnections, !(1...1_000_000).contains(value) {
            throw ConfigurationError(key: "server.maxConnections", message: "expected 1…1000000, found \(value)")
        }
        if !(0...131_072).contains(server.verifiedTokenCache) {
            throw ConfigurationError(key: "server.verifiedTokenCache", message: "expected 0…131072 tokens, found \(server.verifiedTokenCache)")
        }
        guard !server.host.isEmpty else {
            throw ConfigurationError(key: "server.host", message: "must not be empty")
        }
        // An IPv6 address goes without brackets (they belong in URLs); a colon is an IPv6 address's, never a port's.
        guard Loopback.isListeningHost(server.host) else {
            throw ConfigurationError(
                key: "server.host",
                message: "expected an address or host name to listen on, without brackets or a port (IPv6: ::1, fe80::1%eth0), found \"\(server.host)\""
            )
        }
        if let url = server.publicURL {
            try Self.checkBaseURL(url, key: "server.publicURL", allowPath: false)
        }
        if let exposure = devMailboxExposure { throw exposure }
        guard !apps.isEmpty else {
            throw ConfigurationError(key: "apps", message: "at least one app is required")
        }
        if let smtp = mail.smtpURL {
            guard let components = URLComponents(string: smtp), ["smtp", "smtps"].contains(components.scheme?.lowercased() ?? ""),
                let host = components.host, !host.isEmpty
            else {
                throw ConfigurationError(key: "mail.smtp", message: "expected smtp://[user:pass@]host[:port] or smtps://…")
            }
        }
        guard (1...600).contains(mail.timeout) else {
            throw ConfigurationError(key: "mail.timeout", message: "expected 1…600 seconds, found \(mail.timeout)")
        }
        for (key, value, range) in [
            ("interval", retention.interval, 60...86_400), ("batchSize", retention.batchSize, 10...10_000),
            ("expired", retention.expired, 0...31_536_000), ("endedSessions", retention.endedSessions, 0...31_536_000),
            ("sentMail", retention.sentMail, 0...31_536_000), ("auditEvents", retention.auditEvents, 0...315_360_000),
        ] where !range.contains(value) {
            throw ConfigurationError(key: "retention." + key, message: "expected \(range.lowerBound)…\(range.upperBound), found \(value)")
        }
        guard mail.from.contains("@") else {
            throw ConfigurationError(key: "mail.from", message: "expected an address like Name <no-reply@example.com>")
        }
        var seen = Set<String>()
        for (index, app) in apps.enumerated() {
            let path = "apps[\(index)]"
            guard app.id.range(of: "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", options: .regularExpression) != nil else {
                throw ConfigurationError(key: path + ".id", message: "use 1–128 letters, digits, '.', '_' or '-', found \"\(app.id)\"")
            }
            guard seen.insert(app.id).inserted else {
                throw ConfigurationError(key: path + ".id", message: "app id \"\(app.id)\" is used twice")
            }
            try Self.validate(app, path: path)
        }
    }

    private static func validate(_ app: AppSettings, path: String) throws(ConfigurationError) {
        guard (60...86_400).contains(app.accessTokenTTL) else {
            throw ConfigurationError(key: path + ".accessTokenTTL", message: "expected 60…86400 seconds, found \(app.accessTokenTTL)")
        }
        guard (1800...15_552_000).contains(app.refreshTokenTTL) else {
            throw ConfigurationError(
                key: path + ".refreshTokenTTL",
                message: "expected 1800…15552000 seconds (30 minutes to 180 days), found \(app.refreshTokenTTL)"
            )
        }
        guard (1...1000).contains(app.emailLimit) else {
            throw ConfigurationError(key: path + ".emailLimit.count", message: "expected 1…1000, found \(app.emailLimit)")
        }
        guard (1...86_400).contains(app.emailLimitWindow) else {
            throw ConfigurationError(key: path + ".emailLimit.window", message: "expected 1…86400 seconds, found \(app.emailLimitWindow)")
        }
        guard (1...10_000).contains(app.emailLimitTotal) else {
            throw ConfigurationError(key: path + ".emailLimit.total", message: "expected 1…10000, found \(app.emailLimitTotal)")
        }
        guard app.sessionIdleTimeout == 0 || (300...15_552_000).contains(app.sessionIdleTimeout) else {
            throw ConfigurationError(
                key: path + ".sessionIdleTimeout", message: "expected 0 (off) or 300…15552000 seconds, found \(app.sessionIdleTimeout)"
            )
        }
        guard (60...3_600).contains(app.recentProofWindow) else {
            throw ConfigurationError(key: path + ".recentProofWindow", message: "expected 60…3600 seconds, found \(app.recentProofWindow)")
        }
        let backoff = app.loginBackoff
        guard (1...100).contains(backoff.freeFailures) else {
            throw ConfigurationError(key: path + ".loginBackoff.freeFailures", message: "expected 1…100, found \(backoff.freeFailures)")
        }
        guard (1...3600).contains(backoff.baseDelay) else {
            throw ConfigurationError(key: path + ".loginBackoff.baseDelay", message: "expected 1…3600 seconds, found \(backoff.baseDelay)")
        }
        guard (backoff.baseDelay...86_400).contains(backoff.maxDelay) else {
            throw ConfigurationError(key: path + ".loginBackoff.maxDelay", message: "expected baseDelay…86400 seconds, found \(backoff.maxDelay)")
        }
        guard (backoff.freeFailures...1_000_000).contains(backoff.accountFailures) else {
            throw ConfigurationError(
                key: path + ".loginBackoff.accountFailures", message: "expected freeFailures…1000000, found \(backoff.accountFailures)"
            )
        }
        let hash = app.passwordHash
        guard (1...64).contains(hash.parallelism) else {
            throw ConfigurationError(key: path + ".passwordHash.parallelism", message: "expected 1…64, found \(hash.parallelism)")
        }
        guard hash.memoryKiB >= 8 * hash.parallelism, hash.memoryKiB <= 1_048_576 else {
            throw ConfigurationError(key: path + ".passwordHash.memoryKiB", message: "expected 8×parallelism…1048576 KiB, found \(hash.memoryKiB)")
        }
        guard (1...100).contains(hash.iterations) else {
            throw ConfigurationError(key: path + ".passwordHash.iterations", message: "expected 1…100, found \(hash.iterations)")
        }
        guard hash.work <= Argon2Parameters.maxWork else {
            throw ConfigurationError(
                key: path + ".passwordHash",
                message: "memoryKiB × iterations is \(hash.work), above \(Argon2Parameters.maxWork) (about a second of one core per login, the cost budget every stored hash is held to)"
            )
        }
        let providers = path + ".providers"
        if let local = app.localUserpass {
            let lp = providers + ".local-userpass"
            guard (60...604_800).contains(local.tokenTTL) else {
                throw ConfigurationError(key: lp + ".tokenTTL", message: "expected 60…604800 seconds, found \(local.tokenTTL)")
            }
            guard local.password.minLength >= 1 else {
                throw ConfigurationError(key: lp + ".password.minLength", message: "must be at least 1")
            }
            guard local.password.maxLength >= local.password.minLength, local.password.maxLength <= 4096 else {
                throw ConfigurationError(key: lp + ".password.maxLength", message: "must be between minLength and 4096")
            }
            if let url = local.emailConfirmationURL { try checkBaseURL(url, key: lp + ".emailConfirmationURL", allowPath: true) }
            if let url = local.resetPasswordURL { try checkBaseURL(url, key: lp + ".resetPasswordURL", allowPath: true) }
            if let hook = local.confirmationFunction { try validate(hook, path: lp + ".confirmationFunction") }
            if let hook = local.resetFunction { try validate(hook, path: lp + ".resetFunction") }
            // It receives passwords: never over plain http to another host, however configured.
            if let hook = local.migrateUserFunction { try validate(hook, path: lp + ".migrateUserFunction") }
        }
        if case .some(.some(let hook)) = app.customFunction { try validate(hook, path: providers + ".custom-function.webhook") }
        if let jwks = app.customToken?.jwksURL { try checkOutboundURL(jwks, key: providers + ".custom-token.jwksURL") }
        if let google = app.google {
            try checkOutboundURL(google.openID.jwksURL, key: providers + ".oauth2-google.jwksURL")
            try checkOutboundURL(google.tokenURL, key: providers + ".oauth2-google.tokenURL")
        }
        if let apple = app.apple { try checkOutboundURL(apple.openID.jwksURL, key: providers + ".oauth2-apple.jwksURL") }
        if let facebook = app.facebook { try checkOutboundURL(facebook.graphURL, key: providers + ".oauth2-facebook.graphURL") }
        if let native = app.nativeAuth { try validate(native, path: path + ".nativeAuth") }
    }

    /// A webhook's URL, secret and timeout (`{ url, secret, timeout }` in the file).
    package static func validate(_ hook: WebhookSettings, path: String) throws(ConfigurationError) {
        try checkOutboundURL(hook.url, key: path + ".url")
        guard hook.secretKey != nil else {
            throw ConfigurationError(key: path + ".secret", message: "expected whsec_ followed by the base64 of at least 24 random bytes")
        }
        guard (1...60).contains(hook.timeout) else {
            throw ConfigurationError(key: path + ".timeout", message: "expected 1…60 seconds, found \(Int(hook.timeout))")
        }
    }

    private static func validate(_ native: NativeAuthSettings, path: String) throws(ConfigurationError) {
        func range(_ key: String, _ value: Int, _ allowed: ClosedRange<Int>, unit: String = "") throws(ConfigurationError) {
            guard allowed.contains(value) else {
                throw ConfigurationError(key: path + "." + key, message: "expected \(allowed.lowerBound)…\(allowed.upperBound)\(unit), found \(value)")
            }
        }
        if native.enabled, native.clientIds.isEmpty {
            throw ConfigurationError(key: path + ".clientIds", message: "list at least one client id, like [\"ios-app\"]")
        }
        for (index, id) in native.clientIds.enumerated() where id.isEmpty || id.utf8.count > 256 {
            throw ConfigurationError(key: path + ".clientIds[\(index)]", message: "expected 1–256 characters")
        }
        if native.signUpMethods.isEmpty {
            throw ConfigurationError(key: path + ".signUp.methods", message: "list emailOTP, emailPassword or both")
        }
        var names = Set<String>()
        for (index, attribute) in native.attributes.enumerated() {
            let key = path + ".attributes[\(index)]"
            guard attribute.name.range(of: "^[A-Za-z][A-Za-z0-9_]{0,63}$", options: .regularExpression) != nil else {
                throw ConfigurationError(key: key + ".name", message: "use a letter then up to 63 letters, digits or '_', found \"\(attribute.name)\"")
            }
            guard !["email", "username", "password"].contains(attribute.name.lowercased()) else {
                throw ConfigurationError(key: key + ".name", message: "\"\(attribute.name)\" is not an attribute: it is part of every sign-up")
            }
            guard names.insert(attribute.name).inserted else {
                throw ConfigurationError(key: key + ".name", message: "attribute \"\(attribute.name)\" is listed twice")
            }
            guard attribute.type == "string" else {
                throw ConfigurationError(key: key + ".type", message: "expected string, found \"\(attribute.type)\"")
            }
            if let regex = attribute.regex, (try? Regex(regex)) == nil {
                throw ConfigurationError(key: key + ".regex", message: "not a valid regular expression: \(regex)")
            }
        }
        try range("code.length", native.code.length, 4...10, unit: " digits")
        try range("code.ttl", native.code.ttl, 60...3600, unit: " seconds")
        try range("code.maxAttempts", native.code.maxAttempts, 1...20)
        try range("code.resendInterval", native.code.resendInterval, 0...3600, unit: " seconds")
        try range("continuationTokenTTL", native.continuationTokenTTL, 60...600, unit: " seconds")
        try range("refreshTokenReuseWindow", native.refreshTokenReuseWindow, 0...300, unit: " seconds")
    }

    /// A URL the server calls (a webhook, a key set, a token endpoint): https, or http to a loopback host only.
    package static func checkOutboundURL(_ text: String, key: String) throws(ConfigurationError) {
        try checkBaseURL(text, key: key, allowPath: true)
        if let problem = Loopback.outboundProblem(text) { throw ConfigurationError(key: key, message: problem) }
    }

    /// An http(s) URL with a host; with `allowPath` false, scheme, host and port only.
    package static func checkBaseURL(_ text: String, key: String, allowPath: Bool) throws(ConfigurationError) {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            throw ConfigurationError(key: key, message: "expected an http(s) URL, found \"\(text)\"")
        }
        if !allowPath {
            guard components.path.isEmpty || components.path == "/", components.query == nil else {
                throw ConfigurationError(key: key, message: "expected scheme, host and port only (no path), found \"\(text)\"")
            }
        }
    }

    /// An HTTP field name: an RFC 9110 token (the rule swift-http-types' `HTTPField.Name` applies, which the domain
    /// does not import).
    package static func isHTTPToken(_ text: String) -> Bool {
        !text.isEmpty
            && text.utf8.allSatisfy { byte in
                switch byte {
                case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): true
                default: false
                }
            }
    }
}
