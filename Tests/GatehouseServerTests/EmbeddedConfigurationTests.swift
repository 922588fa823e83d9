import Foundation
import GatehouseArgon2
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import HTTPTypes
import Testing

/// A program that embeds Gatehouse builds its ``GatehouseConfiguration`` in code and never meets the file loader:
/// ``AuthServer/open(configuration:clock:logger:waitForDatabase:retry:functions:)`` validates it, with the key and
/// message the loader gives for the same mistake in a file.
@Suite struct EmbeddedConfigurationTests {
    struct Mistake: Sendable, CustomTestStringConvertible {
        var testDescription: String
        /// The same mistake in a file (its first app is `apps[0]`, as the test configuration's is).
        var yaml: String
        var make: @Sendable (inout GatehouseConfiguration) -> Void
    }

    static let mistakes: [Mistake] = [
        Mistake(testDescription: "accessTokenTTL", yaml: "apps: [{id: a, accessTokenTTL: 5}]") { $0.apps[0].accessTokenTTL = 5 },
        Mistake(testDescription: "refreshTokenTTL", yaml: "apps: [{id: a, refreshTokenTTL: 60}]") { $0.apps[0].refreshTokenTTL = 60 },
        Mistake(testDescription: "app id", yaml: "apps: [{id: 'no spaces'}]") { $0.apps[0].id = "no spaces" },
        Mistake(testDescription: "same app id twice", yaml: "apps: [{id: test-app}, {id: test-app}]") { $0.apps[1].id = $0.apps[0].id },
        Mistake(testDescription: "no apps", yaml: "apps: []") { $0.apps = [] },
        Mistake(testDescription: "server.port", yaml: "server: {port: 70000}\napps: [{id: a}]") { $0.server.port = 70_000 },
        Mistake(testDescription: "server.clientIPHeader", yaml: "server: {clientIPHeader: 'X Forwarded'}\napps: [{id: a}]") {
            $0.server.clientIPHeader = "X Forwarded"
        },
        Mistake(testDescription: "server.publicURL", yaml: "server: {publicURL: 'https://a.example/path'}\napps: [{id: a}]") {
            $0.server.publicURL = "https://a.example/path"
        },
        Mistake(testDescription: "dev mailbox on a public bind", yaml: "server: {host: 0.0.0.0}\ndev: {mailbox: true}\napps: [{id: a}]") {
            $0.server.host = "0.0.0.0"
            $0.dev.mailbox = true
        },
        Mistake(testDescription: "retention.interval", yaml: "retention: {interval: 1}\napps: [{id: a}]") { $0.retention.interval = 1 },
        Mistake(testDescription: "mail.timeout", yaml: "mail: {timeout: 0}\napps: [{id: a}]") { $0.mail.timeout = 0 },
        Mistake(testDescription: "passwordHash.iterations", yaml: "apps: [{id: a, passwordHash: {iterations: 101}}]") {
            $0.apps[0].passwordHash.iterations = 101
        },
        Mistake(testDescription: "passwordHash over the cost budget", yaml: "apps: [{id: a, passwordHash: {memoryKiB: 262144, iterations: 8}}]") {
            $0.apps[0].passwordHash = Argon2Parameters(memoryKiB: 262_144, iterations: 8, parallelism: 1)
        },
        Mistake(testDescription: "loginBackoff.maxDelay", yaml: "apps: [{id: a, loginBackoff: {baseDelay: 10, maxDelay: 5}}]") {
            $0.apps[0].loginBackoff.baseDelay = 10
            $0.apps[0].loginBackoff.maxDelay = 5
        },
        Mistake(
            testDescription: "local-userpass tokenTTL",
            yaml: "apps: [{id: a, providers: {local-userpass: {tokenTTL: 10}}}]"
        ) { $0.apps[0].localUserpass?.tokenTTL = 10 },
        Mistake(
            testDescription: "a webhook over plain http",
            yaml: "apps: [{id: a, providers: {local-userpass: {confirmation: function, confirmationFunction: {url: 'http://hooks.example/confirm', secret: '\(FunctionTests.secret)'}}}}]"
        ) {
            $0.apps[0].localUserpass?.confirmation = .function
            $0.apps[0].localUserpass?.confirmationFunction = WebhookSettings(url: "http://hooks.example/confirm", secret: FunctionTests.secret)
        },
        Mistake(
            testDescription: "native auth code.ttl",
            yaml: "apps: [{id: a, nativeAuth: {clientIds: [ios], code: {ttl: 5}}}]"
        ) {
            var native = NativeAuthSettings(clientIds: ["ios"])
            native.code.ttl = 5
            $0.apps[0].nativeAuth = native
        },
    ]

    @Test(arguments: mistakes)
    func aConfigurationBuiltInCodeIsRefusedWhenTheServerOpens(_ mistake: Mistake) async throws {
        let loaded = #expect(throws: ConfigurationError.self) {
            _ = try ConfigurationLoader(environment: [:]).validated(yaml: mistake.yaml)
        }
        var config = testConfiguration()
        mistake.make(&config)
        let opened = await #expect(throws: ConfigurationError.self) {
            let gatehouse = try await AuthServer.open(configuration: config, logger: quietLogger)
            try await gatehouse.close()
        }
        #expect(opened != nil && opened == loaded, "in code: \(String(describing: opened)); in a file: \(String(describing: loaded))")
        // The admin entry points, which open the database without a server, refuse it too.
        if let opened {
            await #expect(throws: opened) { _ = try await AuthServer.migrate(configuration: config, logger: quietLogger) }
        }
    }

    /// The domain's test of a header name is swift-http-types' (which the domain does not import).
    @Test(arguments: ["X-Forwarded-For", "x-real-ip", "CF-Connecting-IP", "a!#$%&'*+-.^_`|~9", "", "X Forwarded", "X:Y", "Ä", "X\r\nY", "(x)"])
    func headerNamesAreTokens(_ name: String) {
        #expect(GatehouseConfiguration.isHTTPToken(name) == (HTTPField.Name(name) != nil))
    }
}

extension ConfigurationLoader {
    /// Parses `yaml` and validates it, as ``load(file:overrides:)`` does a file.
    fileprivate func validated(yaml: String) throws -> GatehouseConfiguration {
        let config = try parse(yaml: yaml)
        try Self.validate(config)
        return config
    }
}
