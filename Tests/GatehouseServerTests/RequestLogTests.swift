import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import Testing

/// One structured line per request, with a request id the answer carries; and no secret in any line.
@Suite struct RequestLogTests {
    /// Runs `body` against an in-process server whose every log line is captured.
    func withLoggedGatehouse(
        _ configuration: GatehouseConfiguration = testConfiguration(),
        _ body: @Sendable (any TestClientProtocol, CapturedLog) async throws -> Void
    ) async throws {
        let log = CapturedLog()
        let gatehouse = try await AuthServer.open(configuration: configuration, clock: ManualClock().clock, logger: log.logger)
        do {
            try await gatehouse.makeApplication().test(.router) { client in try await body(client, log) }
            try await gatehouse.close()
        } catch {
            try? await gatehouse.close()
            throw error
        }
    }

    /// The captured `request` lines.
    static func requestLines(_ log: CapturedLog) -> [String] {
        log.text.split(separator: "\n").map(String.init).filter { $0.hasPrefix("info request ") }
    }

    @Test func aRoutesTemplateNamesItsParametersAndIsItsPathWithoutThem() {
        typealias Log = RequestLogMiddleware<GatehouseRequestContext>
        #expect(Log.template("/native/:appId/oauth2/v2.0/token") == "/native/{appId}/oauth2/v2.0/token")
        #expect(Log.template("api/client/v2.0/app/:appId/auth/providers/:provider/login") == "/api/client/v2.0/app/{appId}/auth/providers/{provider}/login")
        #expect(Log.template("/api/client/v2.0/auth/session") == "/api/client/v2.0/auth/session")
        #expect(Log.template("api/client/v2.0/auth/session") == "/api/client/v2.0/auth/session")
        #expect(Log.template("") == "/")
    }

    @Test func aNewRequestIdIs32HexDigitsAndNeverRepeats() {
        typealias Log = RequestLogMiddleware<GatehouseRequestContext>
        let ids = (0..<1_000).map { _ in Log.makeID() }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.utf8.count == 32 && Log.acceptable($0) == $0 && $0.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } })
        // Every digit position takes many values (a draw's bytes all reach the id).
        for position in 0..<32 { #expect(Set(ids.map { Array($0.utf8)[position] }).count >= 12, "position \(position)") }
    }

    @Test func eachRequestLogsItsRouteTemplateStatusAppAndTheIdItAnswersWith() async throws {
        try await withLoggedGatehouse { client, log in
            let reply = try await client.register("ida@example.com")
            #expect(reply.status == .created)
            let id = try #require(reply.headers[HTTPField.Name("X-Request-Id")!])
            #expect(id.count == 32 && id.allSatisfy(\.isHexDigit), "\(id)")
            let lines = Self.requestLines(log)
            #expect(lines.count == 1, "\(lines)")
            let line = try #require(lines.first)
            for expected in [
                #""route": /api/client/v2.0/app/{appId}/auth/providers/local-userpass/register"#, #""status": 201"#, #""app": test-app"#,
                #""request_id": \#(id)"#, #""method": POST"#,
            ] {
                #expect(line.contains(expected), "\(expected) in \(line)")
            }

            // A second request gets another id.
            let again = try await client.login("ida@example.com")
            #expect(again.headers[HTTPField.Name("X-Request-Id")!] != id)
        }
    }

    @Test func aProxysRequestIdIsKeptAndAHostileOneReplaced() async throws {
        try await withLoggedGatehouse { client, log in
            let kept = try await client.execute(uri: "/healthz", method: .get, headers: [HTTPField.Name("X-Request-Id")!: "proxy-7f3a:2.1_x"])
            #expect(kept.headers[HTTPField.Name("X-Request-Id")!] == "proxy-7f3a:2.1_x")
            for hostile in [String(repeating: "a", count: 129), "two words", "line\u{7F}break", "<script>"] {
                let replaced = try await client.execute(uri: "/healthz", method: .get, headers: [HTTPField.Name("X-Request-Id")!: hostile])
                let id = try #require(replaced.headers[HTTPField.Name("X-Request-Id")!])
                #expect(id != hostile && id.count == 32)
                #expect(!log.text.contains(hostile))
            }
            #expect(Self.requestLines(log).contains { $0.contains(#""route": /healthz"#) && $0.contains(#""request_id": proxy-7f3a:2.1_x"#) })
        }
    }

    @Test func aPathIsNeverLoggedOnlyItsTemplate() async throws {
        try await withLoggedGatehouse { client, log in
            _ = try await client.execute(uri: "/api/client/v2.0/app/test-app/auth/providers/local-userpass/confirm?token=query-secret-1", method: .post)
            _ = try await client.execute(uri: "/no/such/route/path-secret-2", method: .get)
            _ = try await client.execute(uri: "/native/\(String(repeating: "x", count: 100))/oauth2/v2.0/token", method: .post)
            #expect(!log.text.contains("query-secret-1") && !log.text.contains("path-secret-2"))
            let lines = Self.requestLines(log)
            #expect(lines.count == 3, "\(lines)")
            #expect(lines.contains { $0.contains(#""status": 404"#) && !$0.contains("no/such") }, "\(lines)")
            #expect(!lines.contains { $0.contains(#""app": xxxx"#) }, "an app id longer than any configured one is not logged")
        }
    }

    /// A whole life of an account in both protocols — sign-up and confirmation, login, refresh, password reset, a
    /// native code sign-up — and then every secret it used is searched for in every line logged.
    @Test func noSecretOfASignUpLoginRefreshOrResetReachesTheLog() async throws {
        try await withLoggedGatehouse(nativeConfiguration()) { client, log in
            var secrets: [String] = ["first password of sam", "second password of sam"]
            #expect(try await client.register("sam@example.com", secrets[0]).status == .created)
            let confirmation = try await client.latestLink("sam@example.com")
            secrets += [confirmation.token]
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: confirmation.token, tokenId: confirmation.tokenId)).status == .ok)
            let login = try await client.login("sam@example.com", secrets[0]).decode(LoginResponse.self)
            secrets += [login.accessToken, login.refreshToken]
            let session = try await client.call(Path.session, bearer: login.refreshToken)
            #expect(session.status == .created)
            secrets += [try #require(String(decoding: session.body, as: UTF8.self).firstMatch(of: /"access_token":"([^"]+)"/)?.output.1).description]
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "sam@example.com")).status == .ok)
            let reset = try #require(try await client.mailbox("sam@example.com").first { $0.text.contains("reset?token=") }?.link)
            secrets += [reset.token]
            #expect(try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: secrets[1], token: reset.token, tokenId: reset.tokenId)).status == .ok)
            // Native auth: a code sign-up with a password, then its tokens.
            let started = try await client.nativeStep(
                .signUpStart, ["username": "nat@example.com", "challenge_type": allChallengeTypes, "password": "native password 1"]
            )
            let challenged = try await client.nativeStep(
                .signUpChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": allChallengeTypes]
            )
            let code = try await client.latestCode("nat@example.com")
            let done = try await client.nativeStep(
                .signUpContinue, ["continuation_token": try #require(challenged.continuationToken), "grant_type": "oob", "oob": code]
            )
            let tokens = try await client.nativeTokens(try #require(done.continuationToken), username: "nat@example.com")
            secrets += [
                "native password 1", code, try #require(started.continuationToken), try #require(challenged.continuationToken),
                try #require(done.continuationToken), tokens.accessToken, try #require(tokens.refreshToken),
            ]
            #expect(try await client.nativeRefresh(try #require(tokens.refreshToken)).status == .ok)

            let text = log.text
            #expect(!text.isEmpty && Self.requestLines(log).count >= 9)
            for secret in secrets {
                #expect(!text.contains(secret), "a secret (\(secret.prefix(6))…) reached the log")
            }
        }
    }

    @Test func theJSONHandlerWritesOneParsableObjectPerEvent() throws {
        let lines = NIOLockedValueBox<[String]>([])
        var handler = JSONLogHandler(label: "gatehouse") { line in lines.withLockedValue { $0.append(line) } }
        handler.logLevel = .debug
        handler[metadataKey: "request_id"] = "abc"
        let logger = Logger(label: "gatehouse") { _ in handler }
        logger.info("request", metadata: ["route": "/healthz", "status": "200", "quote": "say \"hi\"\nbye"])
        logger.trace("below the level")
        let written = lines.withLockedValue { $0 }
        #expect(written.count == 1 && !written[0].contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written[0].utf8)) as? [String: String])
        #expect(object["message"] == "request" && object["level"] == "info" && object["label"] == "gatehouse")
        #expect(object["request_id"] == "abc" && object["route"] == "/healthz" && object["quote"] == "say \"hi\"\nbye")
        #expect(object["ts"].flatMap { try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse($0) } != nil)
    }
}
