import Foundation
import GatehouseArgon2
import GatehouseDomain
@testable import GatehouseServer
import Hummingbird
import Testing

@Suite struct ConfigurationTests {
    let loader = ConfigurationLoader(environment: [:])

    static let fullYAML = """
        server:   { host: 127.0.0.1, port: 9191, publicURL: "https://auth.example.com" }
        database: { url: "sqlite:data/gh.sqlite" }
        dev:      { mailbox: true }
        mail:     { smtp: "smtp://user:pass@mail.example.com:587", starttls: optional, from: "My App <no-reply@example.com>", timeout: 10, caFile: "/etc/ca.pem" }
        apps:
          - id: my-app
            name: My App
            emailTemplates: templates/my-app
            emailLimit: { count: 3, window: 300 }
            accessTokenTTL: 900
            refreshTokenTTL: 86400
            revealUserExistence: true
            providers:
              local-userpass:
                enabled: true
                confirmation: auto
                emailConfirmationURL: "https://example.com/confirm"
                reset: email
                resetPasswordURL: "https://example.com/reset"
                tokenTTL: 600
                password: { minLength: 10, maxLength: 64 }
            passwordHash: { memoryKiB: 32768, iterations: 3, parallelism: 2 }
        """

    @Test func noConfigurationMeansTheDevelopmentDefaults() throws {
        let config = try loader.load(file: nil)
        #expect(config.server.host == "127.0.0.1")
        #expect(config.server.port == 9090)
        #expect(config.server.resolvedPublicURL() == "http://127.0.0.1:9090")
        #expect(config.database.url == .sqliteFile(".gatehouse/gatehouse.sqlite"))
        #expect(config.dev.mailbox)
        #expect(config.apps.map(\.id) == ["gatehouse-dev"])
        #expect(config.apps[0].localUserpass?.confirmation == .email)
        #expect(config.apps[0].passwordHash == Argon2Parameters(memoryKiB: 19456, iterations: 2, parallelism: 1))
        #expect(config.server.verifiedTokenCache == 4096)
    }

    /// The address to listen on is an address or a host name: an IPv6 one without the brackets URLs put around it,
    /// and never with a port (a colon makes it an IPv6 address, which must then parse as one; a link-local one may name
    /// its zone). Refused as a configuration error naming `server.host`, not when the bind fails.
    @Test(arguments: [
        ("::1", true), ("::", true), ("0.0.0.0", true), ("auth.internal", true), ("fe80::1%eth0", true), ("::ffff:10.0.0.1", true),
        ("[::1]", false), ("localhost:8080", false), ("10.0.0.1/24", false), ("cafe:8080", false), ("::1:", false),
        ("fe80::1%", false), ("fe80::1%eth 0", false), ("1:2:3:4:5:6:7:8:9", false),
    ])
    func theListeningHostIsABareAddress(_ host: String, _ accepted: Bool) throws {
        var config = try loader.load(file: nil)
        config.dev.mailbox = false
        config.server.host = host
        if accepted {
            try config.validate()
        } else {
            let error = try #require(throws: ConfigurationError.self) { try config.validate() }
            #expect(error.key == "server.host")
        }
    }

    /// A public address of plain http on a host others reach is said at start-up (tokens, links and the hosted pages'
    /// cookies all lose what TLS gives them); https and loopback are not.
    @Test func aPlainHTTPPublicAddressIsWarnedAbout() async throws {
        var config = testConfiguration()
        for (publicURL, host, warned) in [
            ("http://auth.example.com", "127.0.0.1", true), (nil, "0.0.0.0", true), ("https://auth.example.com", "0.0.0.0", false),
            ("http://127.0.0.1:9090", "127.0.0.1", false), (nil, "127.0.0.1", false),
            (nil, "::", true), (nil, "2001:db8::1", true), (nil, "::1", false), (nil, "0:0:0:0:0:0:0:1", false), (nil, "::ffff:127.0.0.1", false),
            ("http://[::1]:9090", "::1", false), ("http://[2001:db8::1]", "::1", true), (nil, "::1%lo", false), (nil, "fe80::1%eth0", true),
        ] as [(String?, String, Bool)] {
            config.server.publicURL = publicURL
            config.server.host = host
            #expect((config.plainHTTPExposure != nil) == warned, "\(publicURL ?? "none") on \(host)")
        }
        config.server.publicURL = nil
        config.server.host = "2001:db8::1"
        #expect(config.plainHTTPExposure?.contains("(http://[2001:db8::1])") == true)
        config.server.publicURL = "http://auth.example.com"
        config.server.host = "127.0.0.1"
        let log = CapturedLog()
        let gatehouse = try await AuthServer.open(configuration: config, logger: log.logger)
        try await gatehouse.close()
        #expect(log.text.contains("warning the public address is plain http (http://auth.example.com)"))
    }

    /// Without `server.publicURL`, the address tokens and links name is the bind's: an IPv6 one in brackets, so that
    /// it parses as a URL with that host and port (a zone is written as RFC 6874 says, `%25`; browsers do not take
    /// zones in URLs, so a link-local bind wants a `server.publicURL`).
    @Test(arguments: [
        ("::1", "http://[::1]:9090", "::1"), ("2001:db8::1", "http://[2001:db8::1]:9090", "2001:db8::1"),
        ("auth.internal", "http://auth.internal:9090", "auth.internal"), ("::", "http://127.0.0.1:9090", "127.0.0.1"),
    ])
    func theDerivedPublicAddressIsAURL(_ host: String, _ expected: String, _ parsedHost: String) throws {
        let server = ServerSettings(host: host, port: 9090)
        #expect(server.resolvedPublicURL() == expected)
        let url = try #require(URLComponents(string: server.resolvedPublicURL()))
        #expect(url.port == 9090)
        #expect(url.host?.trimmingCharacters(in: CharacterSet(charactersIn: "[]")) == parsedHost)
        #expect(ServerSettings(host: "fe80::1%eth0", port: 9090).resolvedPublicURL() == "http://[fe80::1%25eth0]:9090")
    }

    @Test func theVerifiedTokenCacheIsSized() throws {
        for size in [0, 1, 100_000] {
            let config = try loader.parse(yaml: "server: {verifiedTokenCache: \(size)}\napps: [{id: a}]")
            try ConfigurationLoader.validate(config)
            #expect(config.server.verifiedTokenCache == size)
        }
    }

    @Test func everyDocumentedKeyIsRead() throws {
        let config = try loader.parse(yaml: Self.fullYAML)
        #expect(config.server == ServerSettings(host: "127.0.0.1", port: 9191, publicURL: "https://auth.example.com"))
        #expect(config.database.url == .sqliteFile("data/gh.sqlite"))
        #expect(config.dev.mailbox)
        #expect(config.mail == MailSettings(
            smtpURL: "smtp://user:pass@mail.example.com:587", starttls: .optional, from: "My App <no-reply@example.com>", timeout: 10, caFile: "/etc/ca.pem"
        ))
        let app = try #require(config.apps.first)
        #expect(app.emailTemplates == "templates/my-app")
        #expect(app.emailLimit == 3 && app.emailLimitWindow == 300)
        #expect(app.id == "my-app" && app.name == "My App")
        #expect(app.accessTokenTTL == 900 && app.refreshTokenTTL == 86400 && app.revealUserExistence)
        let local = try #require(app.localUserpass)
        #expect(local.confirmation == .auto && local.reset == .email && local.tokenTTL == 600)
        #expect(local.emailConfirmationURL == "https://example.com/confirm")
        #expect(local.resetPasswordURL == "https://example.com/reset")
        #expect(local.password == PasswordPolicy(minLength: 10, maxLength: 64))
        #expect(app.passwordHash == Argon2Parameters(memoryKiB: 32768, iterations: 3, parallelism: 2))
    }

    @Test func jsonIsAcceptedToo() throws {
        let json = #"""
            {"server": {"port": 8080}, "database": {"url": "sqlite::memory:"},
             "apps": [{"id": "json-app", "providers": {"local-userpass": {"confirmation": "email"}}}]}
            """#
        let config = try loader.parse(yaml: json)
        #expect(config.server.port == 8080)
        #expect(config.database.url == .sqliteMemory)
        #expect(config.apps.map(\.id) == ["json-app"])
        #expect(!config.dev.mailbox)
    }

    @Test func postgresURLsAreParsedWithoutKeepingThePasswordInDescriptions() throws {
        let url = try DatabaseURL(parsing: "postgres://gh:s%40cret@db.example.com:6432/gatehouse?sslmode=require&pool=20&connect_timeout=5")
        guard case .postgres(let settings) = url else { Issue.record("not postgres: \(url)"); return }
        #expect(settings.host == "db.example.com" && settings.port == 6432 && settings.database == "gatehouse")
        #expect(settings.username == "gh" && settings.password == "s@cret")
        #expect(settings.sslMode == .require && settings.poolSize == 20 && settings.connectTimeout == 5)
        #expect(!url.description.contains("cret"))
        // Remote hosts verify TLS by default; loopback does not use it.
        guard case .postgres(let remote) = try DatabaseURL(parsing: "postgresql://gh@db.example.com/gh") else { return }
        #expect(remote.sslMode == .verifyFull)
        guard case .postgres(let local) = try DatabaseURL(parsing: "postgres://gh@127.0.0.1/gh") else { return }
        #expect(local.sslMode == .disable)
        for bad in ["postgres://db.example.com/gh", "postgres://gh@db.example.com", "postgres://gh@h/db?sslmode=maybe", "postgres://gh@h/db?color=red"] {
            #expect(throws: ConfigurationError.self) { try DatabaseURL(parsing: bad) }
        }
    }

    @Test func nativeAuthKeysAreRead() throws {
        let config = try loader.parse(
            yaml: """
                apps:
                  - id: a
                    nativeAuth:
                      enabled: true
                      clientIds: ["ios-app", "mac-app"]
                      signUp: { methods: [emailPassword] }
                      attributes:
                        - { name: displayName, type: string, required: true }
                        - { name: country, type: string, required: false, regex: "^[A-Z]{2}$" }
                      code: { length: 6, ttl: 300, maxAttempts: 3, resendInterval: 30 }
                      continuationTokenTTL: 300
                      refreshTokenReuseWindow: 10
                  - id: b
                """
        )
        try ConfigurationLoader.validate(config)
        let native = try #require(config.apps[0].nativeAuth)
        #expect(
            native
                == NativeAuthSettings(
                    clientIds: ["ios-app", "mac-app"], signUpMethods: [.emailPassword],
                    attributes: [.init(name: "displayName", required: true), .init(name: "country", regex: "^[A-Z]{2}$")],
                    code: .init(length: 6, ttl: 300, maxAttempts: 3, resendInterval: 30), continuationTokenTTL: 300, refreshTokenReuseWindow: 10
                )
        )
        #expect(native.requiresPassword)
        #expect(config.apps[1].nativeAuth == nil)
    }

    @Test func disabledProviderIsNil() throws {
        let config = try loader.parse(yaml: "apps: [{id: a, providers: {local-userpass: {enabled: false}}}]")
        #expect(config.apps[0].localUserpass == nil)
    }

    @Test func environmentOverridesTheFileAndFlagsOverrideTheEnvironment() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-\(UUID().uuidString).yaml")
        // The mailbox off: it would refuse the 0.0.0.0 bind below.
        try Self.fullYAML.replacingOccurrences(of: "{ mailbox: true }", with: "{ mailbox: false }").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let env = [
            "GATEHOUSE_HOST": "0.0.0.0", "GATEHOUSE_PORT": "7000", "GATEHOUSE_PUBLIC_URL": "https://env.example.com",
            "GATEHOUSE_DATABASE_URL": "sqlite:env.sqlite", "GATEHOUSE_SMTP_URL": "smtps://relay.example.com",
        ]
        let fromEnv = try ConfigurationLoader(environment: env).load(file: file.path)
        #expect(fromEnv.server.host == "0.0.0.0")
        #expect(fromEnv.server.port == 7000)
        #expect(fromEnv.server.publicURL == "https://env.example.com")
        #expect(fromEnv.database.url == .sqliteFile("env.sqlite"))
        #expect(fromEnv.mail.smtpURL == "smtps://relay.example.com")

        let fromFlags = try ConfigurationLoader(environment: env).load(
            file: file.path, overrides: .init(host: "127.0.0.2", port: "7001", database: "sqlite::memory:")
        )
        #expect(fromFlags.server.host == "127.0.0.2")
        #expect(fromFlags.server.port == 7001)
        #expect(fromFlags.database.url == .sqliteMemory)
    }

    /// Each bad input names its key.
    @Test(arguments: [
        ("server: { port: eighty }\napps: [{id: a}]", "server.port"),
        ("server: { port: 70000 }\napps: [{id: a}]", "server.port"),
        ("server: { prot: 80 }\napps: [{id: a}]", "server.prot"),
        ("server: { publicURL: 'ftp://x' }\napps: [{id: a}]", "server.publicURL"),
        ("database: { url: 'mysql://x' }\napps: [{id: a}]", "database.url"),
        ("dev: { mailbox: maybe }\napps: [{id: a}]", "dev.mailbox"),
        ("server: {}", "apps"),
        ("apps: []", "apps"),
        ("apps: [{name: x}]", "apps[0].id"),
        ("apps: [{id: a}, {id: a}]", "apps[1].id"),
        ("apps: [{id: 'a b'}]", "apps[0].id"),
        ("apps: [{id: a, accessTokenTTL: -5}]", "apps[0].accessTokenTTL"),
        ("apps: [{id: a, refreshTokenTTL: 10}]", "apps[0].refreshTokenTTL"),
        ("apps: [{id: a, providers: {local-userpass: {confirmation: sms}}}]", "apps[0].providers.local-userpass.confirmation"),
        ("apps: [{id: a, providers: {local-userpass: {tokenTTL: abc}}}]", "apps[0].providers.local-userpass.tokenTTL"),
        ("apps: [{id: a, providers: {local-userpass: {password: {minLength: 20, maxLength: 10}}}}]", "apps[0].providers.local-userpass.password.maxLength"),
        ("apps: [{id: a, providers: {local-userpass: {emailConfirmationURL: 'not a url'}}}]", "apps[0].providers.local-userpass.emailConfirmationURL"),
        ("apps: [{id: a, providers: {google: {}}}]", "apps[0].providers.google"),
        ("apps: [{id: a, providers: {custom-token: {}}}]", "apps[0].providers.custom-token"),
        ("apps: [{id: a, providers: {custom-token: {keys: [{secret: short}]}}}]", "apps[0].providers.custom-token.keys[0]"),
        ("apps: [{id: a, providers: {custom-token: {keys: [{publicKey: 'not pem'}]}}}]", "apps[0].providers.custom-token.keys[0]"),
        ("apps: [{id: a, providers: {custom-token: {jwksURL: 'https://idp.example/jwks'}}}]", "apps[0].providers.custom-token"),
        ("apps: [{id: a, providers: {oauth2-google: {}}}]", "apps[0].providers.oauth2-google.clientIds"),
        ("apps: [{id: a, providers: {oauth2-google: {clientIds: [x], clientSecret: s}}}]", "apps[0].providers.oauth2-google"),
        ("apps: [{id: a, providers: {oauth2-apple: {clientIds: []}}}]", "apps[0].providers.oauth2-apple.clientIds"),
        ("apps: [{id: a, providers: {oauth2-facebook: {appId: '1'}}}]", "apps[0].providers.oauth2-facebook.appSecret"),
        ("apps: [{id: a, providers: {custom-function: {webhook: {url: 'https://x.example', secret: 'plain'}}}}]", "apps[0].providers.custom-function.webhook.secret"),
        ("apps: [{id: a, providers: {local-userpass: {confirmationFunction: {secret: 'whsec_x'}}}}]", "apps[0].providers.local-userpass.confirmationFunction.url"),
        ("apps: [{id: a, passwordHash: {memoryKiB: 4}}]", "apps[0].passwordHash.memoryKiB"),
        ("apps: [{id: a, emailLimit: {count: 0}}]", "apps[0].emailLimit.count"),
        ("apps: [{id: a, emailLimit: {total: 0}}]", "apps[0].emailLimit.total"),
        ("server: {ipv6PrefixLength: 32}\napps: [{id: a}]", "server.ipv6PrefixLength"),
        ("server: {verifiedTokenCache: -1}\napps: [{id: a}]", "server.verifiedTokenCache"),
        ("server: {verifiedTokenCache: 131073}\napps: [{id: a}]", "server.verifiedTokenCache"),
        ("mail: {smtp: 'http://x'}\napps: [{id: a}]", "mail.smtp"),
        ("mail: {starttls: always}\napps: [{id: a}]", "mail.starttls"),
        ("mail: {from: nobody}\napps: [{id: a}]", "mail.from"),
        ("apps: [{id: a, nativeAuth: {clientIds: []}}]", "apps[0].nativeAuth.clientIds"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], signUp: {methods: [sms]}}}]", "apps[0].nativeAuth.signUp.methods[0]"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], signUp: {methods: []}}}]", "apps[0].nativeAuth.signUp.methods"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], attributes: [{name: a, regex: '('}]}}]", "apps[0].nativeAuth.attributes[0].regex"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], attributes: [{name: a}, {name: a}]}}]", "apps[0].nativeAuth.attributes[1].name"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], attributes: [{name: email}]}}]", "apps[0].nativeAuth.attributes[0].name"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], attributes: [{name: n, type: int}]}}]", "apps[0].nativeAuth.attributes[0].type"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], code: {length: 3}}}]", "apps[0].nativeAuth.code.length"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], code: {maxAttempts: 0}}}]", "apps[0].nativeAuth.code.maxAttempts"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], continuationTokenTTL: 3600}}]", "apps[0].nativeAuth.continuationTokenTTL"),
        ("apps: [{id: a, nativeAuth: {clientIds: [x], colour: blue}}]", "apps[0].nativeAuth.colour"),
        // What the server calls decides who signs in: https, or plain http to loopback only.
        ("apps: [{id: a, providers: {custom-function: {webhook: {url: 'http://hooks.example.com/login', secret: 'whsec_YSB3ZWJob29rIHNlY3JldCBvZiAzMiBieXRlcyEhISE='}}}}]", "apps[0].providers.custom-function.webhook.url"),
        ("apps: [{id: a, providers: {local-userpass: {confirmation: function, confirmationFunction: {url: 'http://10.0.0.5/c', secret: 'whsec_YSB3ZWJob29rIHNlY3JldCBvZiAzMiBieXRlcyEhISE='}}}}]", "apps[0].providers.local-userpass.confirmationFunction.url"),
        ("apps: [{id: a, providers: {custom-token: {jwksURL: 'http://idp.example/jwks', issuer: i}}}]", "apps[0].providers.custom-token.jwksURL"),
        ("apps: [{id: a, providers: {oauth2-google: {clientIds: [x], jwksURL: 'http://www.googleapis.example/certs'}}}]", "apps[0].providers.oauth2-google.jwksURL"),
        ("apps: [{id: a, providers: {oauth2-google: {clientIds: [x], tokenURL: 'http://oauth2.example/token'}}}]", "apps[0].providers.oauth2-google.tokenURL"),
        ("apps: [{id: a, providers: {oauth2-apple: {clientIds: [x], jwksURL: 'http://192.168.1.10/keys'}}}]", "apps[0].providers.oauth2-apple.jwksURL"),
        ("apps: [{id: a, providers: {oauth2-facebook: {appId: '1', appSecret: s, graphURL: 'http://graph.example'}}}]", "apps[0].providers.oauth2-facebook.graphURL"),
        // The dev mailbox shows every link it holds: loopback binds only.
        ("server: { host: 0.0.0.0 }\ndev: { mailbox: true }\napps: [{id: a}]", "dev.mailbox"),
        ("server: { host: 192.168.1.20 }\ndev: { mailbox: true }\napps: [{id: a}]", "dev.mailbox"),
        ("apps: {id: a}", "apps"),
        ("- just\n- a list", "(top level)"),
        ("apps: [{id: a}", ""),
    ])
    func badValuesNameTheirKey(yaml: String, key: String) throws {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.validate(try loader.parse(yaml: yaml))
        }
        #expect(error?.key == key, "\(String(describing: error))")
        #expect(error?.message.isEmpty == false)
    }

    /// Loopback is the exception to both rules above: plain http to this machine, and the dev mailbox on a
    /// loopback bind.
    @Test(arguments: ["http://127.0.0.1:8080/jwks", "http://localhost/jwks", "http://[::1]:9000/jwks", "https://idp.example/jwks"])
    func loopbackMayUsePlainHTTP(url: String) throws {
        let config = try loader.parse(yaml: "apps: [{id: a, providers: {custom-token: {jwksURL: '\(url)', issuer: i}}}]")
        try ConfigurationLoader.validate(config)
        #expect(config.apps[0].customToken?.jwksURL == url)
    }

    /// The refusal of a plain-http URL names its host, never its path or query (which may carry a token).
    @Test func anOutboundURLRefusalKeepsItsQueryOutOfTheMessage() throws {
        let yaml = "apps: [{id: a, providers: {custom-token: {jwksURL: 'http://idp.example/keys?access_token=s3cret', issuer: i}}}]"
        let error = #expect(throws: ConfigurationError.self) { try ConfigurationLoader.validate(try loader.parse(yaml: yaml)) }
        #expect(error?.message.contains("idp.example") == true)
        #expect(error?.description.contains("s3cret") == false)
    }

    @Test func withoutAFileTheDevMailboxRefusesANonLoopbackBindAndSaysHowToTurnItOff() throws {
        let error = #expect(throws: ConfigurationError.self) { try loader.load(file: nil, overrides: .init(host: "0.0.0.0")) }
        #expect(error?.key == "dev.mailbox")
        #expect(error?.message.contains("--host 127.0.0.1") == true)
        #expect(error?.message.contains("mailbox: false") == true)
        #expect(try loader.load(file: nil, overrides: .init(host: "::1")).dev.mailbox)
        let off = try loader.parse(yaml: "server: { host: 0.0.0.0 }\ndev: { mailbox: false }\napps: [{id: a}]")
        try ConfigurationLoader.validate(off)
    }

    @Test func badEnvironmentAndFlagsNameTheirSource() throws {
        #expect(throws: ConfigurationError(key: "GATEHOUSE_PORT", message: "expected a port number, found \"x\"")) {
            try ConfigurationLoader(environment: ["GATEHOUSE_PORT": "x"]).load(file: nil)
        }
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader(environment: [:]).load(file: nil, overrides: .init(database: "oracle://db"))
        }
        #expect(error?.key == "--database")
        let missing = #expect(throws: ConfigurationError.self) { try loader.load(file: "/nonexistent/gatehouse.yaml") }
        #expect(missing?.message.contains("/nonexistent/gatehouse.yaml") == true)
    }
}
