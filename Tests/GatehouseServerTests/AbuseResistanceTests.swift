import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// What a hostile client or network can make the server do beyond one request: lock owners out, make it work or
/// write without limit, trust plain-HTTP answers, reach the dev mailbox.
@Suite struct AbuseResistanceTests {
    /// A configuration built in code skips the loader's URL check; the outbound client refuses plain http to a
    /// remote host itself, before any connection (a network attacker could answer it).
    @Test func outboundCallsRefusePlainHTTPExceptToLoopback() async throws {
        let outbound = HTTPClientOutbound()
        
        for url in ["http://idp.example/jwks", "http://10.1.2.3/keys", "ftp://idp.example/jwks"] {
            do {
                _ = try await outbound.send(OutboundRequest(method: "GET", url: url, timeout: 5))
                Issue.record("\(url) was called")
            } catch {
                #expect(error.description.contains("loopback"), "\(url): \(error.description)")
            }
        }
        // Loopback over http is allowed: the call goes out. Nothing listened on this port when it was picked, so it
        // fails at connect; another test of the suite may have bound the port since and answer it, which proves the
        // same. Either way it must not be refused for its scheme.
        let port = try freePort()
        do {
            _ = try await outbound.send(OutboundRequest(method: "GET", url: "http://127.0.0.1:\(port)/jwks", timeout: 5))
        } catch {
            #expect(!error.description.contains("loopback"), "\(error.description)")
        }
        await outbound.shutdown()
    }
}

extension AbuseResistanceTests {
    /// The kinds of the app's audit events, oldest first.
    static func auditKinds(_ gatehouse: AuthServer, app: String = "test-app") async throws -> [String] {
        try await gatehouse.env.store.auditEvents(appId: app, userId: nil, afterSeq: nil, limit: 500).map(\.kind)
    }

    /// Guesses racing on one flow are audited with the numbers they were counted as — each once, the last one
    /// recording that the flow is spent — not with the count each read before the others were counted.
    @Test func racingWrongCodesAreAuditedAsCounted() async throws {
        let guesses = 5
        var configuration = nativeConfiguration(code: .init(maxAttempts: guesses))
        configuration.apps[0].rateLimits.enabled = false
        try await withGatehouse(configuration) { gatehouse, client in
            let token = try await client.nativeSignUpCodeSent("racer@example.com")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<guesses {
                    group.addTask { _ = try await client.native(.signUpContinue, ["continuation_token": token, "grant_type": "oob", "oob": "00000000"]) }
                }
                try await group.waitForAll()
            }
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 500)
            let numbers = events.filter { $0.kind == "code_failed" }.compactMap { $0.detail["attempt"] }.compactMap { Int($0) }
            #expect(numbers.sorted() == Array(1...guesses))
            #expect(events.filter { $0.kind == "flow_exhausted" }.count == 1)
        }
    }

    /// Wrong codes, a flow that runs out of attempts (recorded once, not per later try) and refused refresh tokens
    /// of both protocols reach the audit log.
    @Test func wrongCodesSpentFlowsAndBadRefreshTokensAreAudited() async throws {
        var configuration = nativeConfiguration(code: .init(maxAttempts: 2))
        configuration.apps[0].rateLimits.enabled = false
        try await withGatehouse(configuration) { gatehouse, client in
            let token = try await client.nativeSignUpCodeSent("ann@example.com")
            for _ in 0..<4 {
                _ = try await client.native(.signUpContinue, ["continuation_token": token, "grant_type": "oob", "oob": "00000000"])
            }
            let kinds = try await Self.auditKinds(gatehouse)
            #expect(kinds.filter { $0 == "code_failed" }.count == 2)
            #expect(kinds.filter { $0 == "flow_exhausted" }.count == 1)

            // Native: a made-up refresh token, and a real session id with a made-up secret.
            let tokens = try await client.nativeSignedUp("ben@example.com")
            let real = try #require(tokens.refreshToken)
            #expect(try await client.nativeRefresh("not-a-token").status == .badRequest)
            // The token is base64url(12 bytes of session id + the secret): keep the id, zero the secret.
            var standard = real.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
            var bytes = try #require(Data(base64Encoded: standard))
            for index in 12..<bytes.count { bytes[index] = 0 }
            let forged = bytes.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(try await client.nativeRefresh(forged).status == .badRequest)
            // Client API: a refresh token signed by no one.
            let response = try await client.call("/api/client/v2.0/auth/session", .post, bearer: "eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
            #expect(response.status == .unauthorized)
            let native = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 500)
                .filter { $0.kind == "refresh_token_invalid" }
            #expect(native.count == 2)
            #expect(native.allSatisfy { $0.detail["reason"]?.isEmpty == false })
            #expect(try await Self.auditKinds(gatehouse, app: AuthEnvironment.serverWideApp).contains("refresh_token_invalid"))
        }
    }
}

extension AbuseResistanceTests {
    /// `bücher.example` and `xn--bcher-kva.example` are one mailbox: registering it in the other form is a taken
    /// address, and its owner signs in with either.
    @Test func anInternationalDomainInUnicodeAndPunycodeIsOneAccount() async throws {
        try await withGatehouse { _, client in
            #expect(try await client.register("ann@bücher.example", app: "auto-app").status == .created)
            let again = try await client.register("ann@xn--bcher-kva.example", "another password", app: "auto-app")
            #expect(again.status == .conflict)
            #expect(try await client.login("ANN@XN--BCHER-KVA.example", app: "auto-app").status == .ok)
        }
    }
}

extension AbuseResistanceTests {
    /// JSON, YAML and error answers (some echo input) carry `nosniff`, so no browser reads them as HTML.
    @Test func everyAnswerSaysNoSniff() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let answers = [
                try await client.call(Path.app() + "/location", .get),
                try await client.login("nobody@example.com", "wrong"),
                try await client.call("/openapi.yaml", .get),
                try await client.native(.signInInitiate, ["username": "<script>"]),
                try await client.call("/no/such/route", .get),
            ]
            for answer in answers {
                #expect(answer.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff", "\(answer.status): \(answer.text.prefix(80))")
            }
        }
    }
}
