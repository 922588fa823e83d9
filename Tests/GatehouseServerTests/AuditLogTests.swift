import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The audit log: security events with time, app, user, address and user agent, never a secret.
@Suite struct AuditLogTests {
    @Test func securityEventsAreRecordedWithTheirOriginAndNoSecrets() async throws {
        var config = testConfiguration()
        config.server.clientIPHeader = "X-Forwarded-For"
        try await withGatehouse(config) { gatehouse, client in
            _ = try await client.signUp("hal@example.com", "hal's passphrase")
            #expect(try await client.login("hal@example.com", "not hal's passphrase").status == .unauthorized)
            let headers: HTTPFields = [
                .contentType: "application/json", .userAgent: "AuditTest/1.0", HTTPField.Name("X-Forwarded-For")!: "198.51.100.77",
            ]
            let body = try JSONEncoder().encode(EmailPasswordLoginRequest(username: "hal@example.com", password: "hal's passphrase"))
            let login = try await client.execute(uri: Path.local("login"), method: .post, headers: headers, body: ByteBuffer(bytes: body)) {
                try JSONDecoder().decode(LoginResponse.self, from: Data($0.body.readableBytesView))
            }
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .created)
            #expect(try await client.call(Path.session, .delete, bearer: login.refreshToken).status == .noContent)

            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 50)
            let kinds = events.map(\.kind)
            // The refresh is routine: not recorded unless `audit.refreshes` asks (below).
            #expect(kinds == ["registration", "confirmation", "login_succeeded", "login_failed", "login_succeeded", "logout"])
            let userId = login.userId
            #expect(events.filter { $0.kind != "login_failed" }.allSatisfy { $0.userId == userId })
            let second = try #require(events.last { $0.kind == "login_succeeded" })
            #expect(second.ip == "198.51.100.77")
            #expect(second.userAgent == "AuditTest/1.0")
            #expect(second.detail["provider"] == "local-userpass")
            // No password, token or secret anywhere in the log.
            let everything = events.map { "\($0)" }.joined()
            for secret in ["hal's passphrase", login.refreshToken, login.accessToken, String(login.refreshToken.split(separator: ".")[2])] {
                #expect(!everything.contains(secret))
            }
            #expect(try await gatehouse.env.store.auditEvents(appId: nil, userId: userId, afterSeq: nil, limit: 2).map(\.kind) == ["login_succeeded", "logout"])
        }
    }

    /// Successful refreshes are rows only with `audit.refreshes: true`; by default they are counted in the metrics
    /// alone, on both protocols. Refused ones are always rows.
    @Test(arguments: [false, true])
    func refreshesAreRecordedWhenAsked(recorded: Bool) async throws {
        var config = nativeConfiguration()
        config.audit.refreshes = recorded
        try await withGatehouse(config) { gatehouse, client in
            let login = try await client.signUp("ray@example.com")
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .created)
            let ct = try await client.nativeSignUp("rey@example.com", password: "a fine passphrase")
            let tokens = try await client.nativeTokens(ct, username: "rey@example.com")
            #expect(try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": try #require(tokens.refreshToken)]).status == .ok)
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken + "x").status == .unauthorized)

            // A token that fails its signature names no app it could be trusted for: its event is server-wide.
            let kinds = try await gatehouse.env.store.auditEvents(appId: nil, userId: nil, afterSeq: nil, limit: 100).map(\.kind)
            #expect(kinds.filter { $0 == "refresh" }.count == (recorded ? 2 : 0), "\(kinds)")
            #expect(kinds.contains("refresh_token_invalid"), "\(kinds)")
        }
    }

    /// Audit rows are written in groups under load (AuditWriter): every event of many racing requests is written
    /// exactly once, before its request returns, and the refreshes behind them all succeed.
    @Test func racingRefreshesEachWriteTheirOwnAuditRow() async throws {
        var config = testConfiguration()
        config.audit.refreshes = true
        try await withGatehouse(config) { gatehouse, client in
            let login = try await client.signUp("ivy@example.com", "ivy's passphrase")
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<40 {
                    group.addTask { try await client.call(Path.session, .post, bearer: login.refreshToken).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: .created, count: 40))
            // Each request returned after its row was written: all 40 are there now, and no more.
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: login.userId, afterSeq: nil, limit: 100)
            #expect(events.filter { $0.kind == "refresh" }.count == 40)
            #expect(Set(events.map(\.seq)).count == events.count)
            // Direct writes racing through one writer: each lands exactly once.
            let writer = AuditWriter(store: gatehouse.env.store)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<30 {
                    group.addTask {
                        try await writer.append(AuditEvent(at: Date(), appId: "writer-app", kind: "refresh", detail: ["n": "\(index)"]))
                    }
                }
                try await group.waitForAll()
            }
            let written = try await gatehouse.env.store.auditEvents(appId: "writer-app", userId: nil, afterSeq: nil, limit: 100)
            #expect(written.compactMap { $0.detail["n"] }.sorted() == (0..<30).map { "\($0)" }.sorted())
        }
    }

    @Test func resetsAPIKeysLogoutsAndRefreshTokenReuseAreRecorded() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { gatehouse, client in
            let login = try await client.signUp("ida@example.com")
            let key = try await client.createKey("laptop", refreshToken: login.refreshToken)
            #expect(try await client.call(Path.apiKey(key.id, "disable"), .put, bearer: login.refreshToken).status == .noContent)
            #expect(try await client.call(Path.apiKey(key.id), .delete, bearer: login.refreshToken).status == .noContent)
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "ida@example.com"))
            let link = try await client.latestLink("ida@example.com")
            let reset = ResetPasswordRequest(password: "a brand new secret", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            let fresh = try await client.login("ida@example.com", "a brand new secret").decode(LoginResponse.self)
            #expect(try await client.call("/api/client/v2.0/auth/sessions", .delete, bearer: fresh.accessToken).status == .noContent)

            // A native refresh token presented again after the reuse window revokes its session, and says so.
            let ct = try await client.nativeSignUp("jon@example.com", password: "a fine passphrase")
            let tokens = try await client.nativeTokens(ct, username: "jon@example.com")
            let first = try #require(tokens.refreshToken)
            #expect(try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": first]).status == .ok)
            clock.advance(by: 31)
            #expect(try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": first]).status == .badRequest)

            let kinds = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100).map(\.kind)
            for expected in [
                "api_key_created", "api_key_disabled", "api_key_deleted", "reset_requested", "reset_completed", "logout_everywhere",
                "refresh_token_reused",
            ] {
                #expect(kinds.contains(expected), "\(expected) missing from \(kinds)")
            }
            let order = ["api_key_created", "api_key_disabled", "api_key_deleted", "reset_requested", "reset_completed"].compactMap { kinds.firstIndex(of: $0) }
            #expect(order == order.sorted())
        }
    }
}
