import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

@Suite struct PasswordResetTests {
    /// A user with two addresses (the second linked to it) resets the password of the second, through either
    /// protocol: the new password is the user's, as a password change sets it, and the first address's old
    /// password — perhaps the one that leaked — logs in no more.
    @Test(arguments: ["link", "native"]) func aResetSetsThePasswordOfEveryAddressOfTheUser(_ via: String) async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let owner = try await client.signUp("first@example.com", "first password one")
            try await client.registerConfirmed("second@example.com", "second password two")
            let link = EmailPasswordLoginRequest(username: "second@example.com", password: "second password two")
            #expect(try await client.call(Path.local("login") + "?link=true", json: link, bearer: owner.accessToken).status == .ok)
            #expect(try await client.login("first@example.com", "first password one").status == .ok)

            if via == "link" {
                try await LoginInFlightTests().reset(client, "second@example.com", to: "brand new password")
            } else {
                _ = try await NativeFlowEndingTests().resetUpToItsSignIn(client, "second@example.com", "brand new password")
            }
            for (address, old) in [("first@example.com", "first password one"), ("second@example.com", "second password two")] {
                #expect(try await client.login(address, old).status == .unauthorized, "\(address)'s old password")
                let reply = try await client.login(address, "brand new password")
                #expect(reply.status == .ok, "\(address)")
                #expect(try reply.decode(LoginResponse.self).userId == owner.userId)
            }
        }
    }

    @Test func resetSetsTheNewPasswordOnceAndEndsEverySession() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("mia@example.com", "old password")
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "mia@example.com")).status == .ok)
            let mail = try #require(try await client.mailbox("mia@example.com").first)
            #expect(mail.text.contains("http://gatehouse.test/app/test-app/reset?token="))
            let link = try #require(mail.link)

            let reset = ResetPasswordRequest(password: "new password", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)

            #expect(try await client.login("mia@example.com", "old password").status == .unauthorized)
            #expect(try await client.login("mia@example.com", "new password").status == .ok)
            // The session from before the reset is gone.
            let refresh = try await client.call(Path.session, bearer: login.refreshToken)
            #expect(refresh.status == .unauthorized)
            #expect(refresh.error?.errorCode == .invalidSession)
            // The token was single-use.
            let again = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "third password", token: link.token, tokenId: link.tokenId))
            #expect(again.error?.error == "invalid token data")
            #expect(try await client.login("mia@example.com", "new password").status == .ok)
        }
    }

    /// A reset ends every session of the user, whatever its kind and protocol, and both of its tokens: a Client API
    /// password login (first-party), an anonymous login that upgraded by linking (anonymous), an API key's login
    /// (api-key), a native password sign-in and a native sign-in with an emailed code. Each refresh token is refused,
    /// and each access token too, at once.
    @Test func aResetEndsEverySessionKindOfBothProtocolsAndBothTokenKinds() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { gatehouse, client in
            // An anonymous user who links a registered, confirmed address: its session stays an anonymous one.
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            try await client.linkConfirmedAddress("every@example.com", "old password", into: anonymous.accessToken)
            let password = try await client.login("every@example.com", "old password").decode(LoginResponse.self)
            let key = try await client.createKey("every-key", refreshToken: password.refreshToken)
            let keyed = try await client.loginWithKey(try #require(key.key)).decode(LoginResponse.self)
            let nativePassword = try await client.nativeSignIn("every@example.com", password: "old password")
            let started = try await client.nativeStep(.signInInitiate, ["username": "every@example.com", "challenge_type": "oob redirect"])
            let challenged = try await client.nativeStep(.signInChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": "oob redirect"])
            let coded = try await client.native(
                .token,
                [
                    "continuation_token": try #require(challenged.continuationToken), "grant_type": "oob", "oob": try await client.latestCode("every@example.com"),
                    "scope": "openid offline_access",
                ]
            ).decode(NativeAuthTokenResponse.self)
            let clientAPI = [(anonymous, SessionKind.anonymous), (password, .firstParty), (keyed, .apiKey)]
            let native = [(nativePassword, [AuthenticationMethod.password]), (coded, [.oneTimeCode])]
            // Every kind is there, recorded as it was proven.
            let live = try await gatehouse.env.store.liveSessions(userId: anonymous.userId, now: clock.now)
            #expect(Set(live.map(\.kind)) == [.anonymous, .firstParty, .apiKey])
            for (tokens, methods) in native {
                let sid = try #require(try jwtPayload(tokens.accessToken)["sid"] as? String)
                #expect(live.first { $0.id == sid }?.methods == methods)
            }

            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "every@example.com")).status == .ok)
            let mail = try await client.latestLink("every@example.com")
            let reset = ResetPasswordRequest(password: "new password", token: mail.token, tokenId: mail.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)

            for (tokens, kind) in clientAPI {
                #expect(try await client.call(Path.session, bearer: tokens.refreshToken).status == .unauthorized, "\(kind) refresh token")
                #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .unauthorized, "\(kind) access token")
            }
            for (tokens, methods) in native {
                expectNativeError(try await client.nativeRefresh(try #require(tokens.refreshToken)), .invalidGrant)
                #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .unauthorized, "native \(methods) access token")
            }
            #expect(try await gatehouse.env.store.liveSessions(userId: anonymous.userId, now: clock.now).isEmpty)
        }
    }

    @Test func aPolicyViolationKeepsTheToken() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("ned@example.com")
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "ned@example.com"))
            let link = try await client.latestLink("ned@example.com")
            let short = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "x", token: link.token, tokenId: link.tokenId))
            #expect(short.status == .badRequest)
            #expect(short.error?.error.contains("password must be") == true)
            let ok = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "long enough", token: link.token, tokenId: link.tokenId))
            #expect(ok.status == .ok)
        }
    }

    @Test func aConfirmationTokenCannotResetAPassword() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("olga@example.com")
            let link = try await client.latestLink("olga@example.com")
            let reply = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "new password", token: link.token, tokenId: link.tokenId))
            #expect(reply.error?.error == "invalid token data")
        }
    }

    @Test func unknownAddressesGetTheSameAnswerUnlessRevealed() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("pam@example.com")
            let known = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "pam@example.com"))
            let unknown = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "nobody@example.com"))
            #expect(known.status == .ok)
            #expect(unknown.status == .ok)
            #expect(known.body == unknown.body)
            #expect(try await client.mailbox("nobody@example.com").isEmpty)
        }
        try await withGatehouse(testConfiguration(reveal: true)) { _, client in
            let unknown = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "nobody@example.com"))
            #expect(unknown.status == .notFound)
            #expect(unknown.error?.errorCode == .userNotFound)
        }
    }
}

/// A database that records every statement it runs, and refuses every statement while `failing` is set.
final class RecordingDatabase: SQLDatabase, @unchecked Sendable {
    struct Refused: Error {}
    private let base: any SQLDatabase
    private let lock = NSLock()
    private var log: [String] = []
    private var _failing = false
    var dialect: SQLDialect { base.dialect }
    var failing: Bool {
        get { lock.withLock { _failing } }
        set { lock.withLock { _failing = newValue } }
    }

    init(_ base: any SQLDatabase) { self.base = base }

    /// Statements since the last call, and forget them.
    func drain() -> [String] { lock.withLock { defer { log = [] }; return log } }

    private func record(_ sql: String) { lock.withLock { log.append(sql) } }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        record(sql)
        if failing { throw Refused() }
        return try await base.query(sql, binds)
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        record("BEGIN")
        if failing { throw Refused() }
        do {
            let result = try await base.transaction { tx in try await body(Recorder(base: tx, db: self)) }
            record("COMMIT")
            return result
        } catch {
            record("ROLLBACK")
            throw error
        }
    }

    func ping() async throws { try await base.ping() }
    func close() async throws { try await base.close() }

    private struct Recorder: SQLExecutor {
        let base: any SQLExecutor
        let db: RecordingDatabase
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            db.record(sql)
            return try await base.query(sql, binds)
        }
    }
}
