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

/// A configuration whose client addresses come from `X-Forwarded-For` (so that one test process can be many
/// clients), with the app's rate limits replaced by `rules`.
private func limitedConfiguration(_ rules: [RateLimitSettings.Kind: RateLimitSettings.Rule], native: Bool = false) -> GatehouseConfiguration {
    var config = native ? nativeConfiguration() : testConfiguration()
    config.server.clientIPHeader = "X-Forwarded-For"
    config.apps[0].rateLimits = RateLimitSettings(rules: rules)
    return config
}

private extension TestClientProtocol {
    /// A password login from client address `ip`.
    func login(_ email: String, _ password: String = "correct horse", from ip: String) async throws -> Reply {
        let body = try JSONEncoder().encode(EmailPasswordLoginRequest(username: email, password: password))
        return try await post(Path.local("login"), body, from: ip)
    }

    /// A JSON POST from client address `ip` (behind a proxy that appends it), with a bearer token when given.
    func post(_ uri: String, _ body: Data, from ip: String, bearer: String? = nil) async throws -> Reply {
        var headers: HTTPFields = [.contentType: "application/json", HTTPField.Name("X-Forwarded-For")!: "203.0.113.250, \(ip)"]
        if let bearer { headers[.authorization] = "Bearer \(bearer)" }
        return try await execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(bytes: body)) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
    }
}

/// Rate limits per client address and per identifier, kept in the database (issue 8, point 1).
@Suite struct RateLimitTests {
    @Test func loginsPerAddressAreLimitedWith429AndRetryAfterUntilTheWindowEnds() async throws {
        let clock = ManualClock()
        let config = limitedConfiguration([.login: .init(perIP: .init(3, per: 60), perIdentifier: nil)])
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.signUp("rita@example.com")  // one login from no address (the helper sends no header)
            for _ in 0..<3 { #expect(try await client.login("rita@example.com", from: "198.51.100.7").status == .ok) }
            clock.advance(by: 20)
            let refused = try await client.login("rita@example.com", from: "198.51.100.7")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.error?.errorCode == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "40")
            // Another address has its own count; the last entry of X-Forwarded-For (the nearest proxy's) is the one.
            #expect(try await client.login("rita@example.com", from: "198.51.100.8").status == .ok)
            clock.advance(by: 40)
            #expect(try await client.login("rita@example.com", from: "198.51.100.7").status == .ok)
        }
    }

    @Test func loginsPerIdentifierAreLimitedWhateverTheAddress() async throws {
        let clock = ManualClock()
        let config = limitedConfiguration([.login: .init(perIP: nil, perIdentifier: .init(2, per: 300))])
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.register("sam@example.com")
            for ip in ["192.0.2.1", "192.0.2.2"] { #expect(try await client.login("SAM@example.com", "wrong", from: ip).status == .unauthorized) }
            // The same address however it is spelled, known or not: the answer reveals nothing about the account.
            let refused = try await client.login("sam@EXAMPLE.com", from: "192.0.2.3")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "300")
            #expect(try await client.login("nobody@example.com", "wrong", from: "192.0.2.3").status == .unauthorized)
        }
    }

    @Test func nativeAuthAnswers429InItsOwnEnvelope() async throws {
        let clock = ManualClock()
        let config = limitedConfiguration([.flow: .init(perIP: .init(1, per: 60), perIdentifier: nil)], native: true)
        try await withGatehouse(config, clock: clock) { _, client in
            let headers: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "198.51.100.20"]
            let fields = ["username": "una@example.com", "challenge_type": allChallengeTypes]
            #expect(try await client.native(.signInInitiate, headers: headers, fields).status == .ok)
            let refused = try await client.native(.signInInitiate, headers: headers, fields)
            expectNativeError(refused, .slowDown, code: NativeAuthErrorCode.rateLimited, status: .tooManyRequests)
            #expect(refused.nativeError?.retryAfter == 60)
            #expect(refused.headers[.retryAfter] == "60")
        }
    }

    @Test func registrationsEmailsCodeChecksAndRefreshesAreCountedToo() async throws {
        let clock = ManualClock()
        let one = RateLimitSettings.Rule(perIP: nil, perIdentifier: .init(1, per: 60))
        var config = limitedConfiguration([.registration: one, .code: one, .refresh: one, .email: .init(perIP: .init(1, per: 60), perIdentifier: nil)])
        config.apps[0].localUserpass?.confirmation = .auto
        try await withGatehouse(config, clock: clock) { _, client in
            #expect(try await client.register("vic@example.com").status == .created)
            #expect(try await client.register("vic@example.com").status == .tooManyRequests)
            let login = try await client.login("vic@example.com").decode(LoginResponse.self)
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .created)
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .tooManyRequests)
            let forwarded: HTTPFields = [.contentType: "application/json", HTTPField.Name("X-Forwarded-For")!: "192.0.2.9"]
            let send = try JSONEncoder().encode(EmailRequest(email: "vic@example.com"))
            for expected in [HTTPResponse.Status.ok, .tooManyRequests] {
                let status = try await client.execute(
                    uri: Path.local("reset/send"), method: .post, headers: forwarded, body: ByteBuffer(bytes: send)
                ) { $0.status }
                #expect(status == expected)
            }
            let bogus = ConfirmRequest(token: String(repeating: "0", count: 64), tokenId: "0123456789abcdef01234567")
            #expect(try await client.call(Path.local("confirm"), json: bogus).status == .badRequest)
            #expect(try await client.call(Path.local("confirm"), json: bogus).status == .tooManyRequests)
        }
    }

    /// Linking (`login?link=true`) checks credentials as a login does, and is counted per address as one (the
    /// anonymous login that made the user counted as a registration).
    @Test func linkAttemptsCountAsLoginsPerAddress() async throws {
        let config = limitedConfiguration([
            .login: .init(perIP: .init(2, per: 60), perIdentifier: nil), .registration: .init(perIP: .init(1, per: 60), perIdentifier: nil),
        ])
        try await withGatehouse(config) { _, client in
            func anonymousLogin(link bearer: String? = nil) async throws -> Reply {
                let uri = Path.app() + "/auth/providers/anon-user/login" + (bearer == nil ? "" : "?link=true")
                return try await client.post(uri, Data("{}".utf8), from: "198.51.100.60", bearer: bearer)
            }
            let login = try await anonymousLogin().decode(LoginResponse.self)
            let linked = try await anonymousLogin(link: login.accessToken)
            #expect(linked.status == .badRequest)  // an anonymous identity cannot be linked, but the attempt counts
            #expect(try await anonymousLogin(link: login.accessToken).status == .badRequest)
            #expect(try await anonymousLogin(link: login.accessToken).status == .tooManyRequests)
            #expect(try await anonymousLogin().status == .tooManyRequests)
        }
    }

    /// Native refreshes: a wrong secret for a real session id is refused without using up the session's allowance,
    /// and a refresh refused with 429 leaves the token as it was, so that the retry after Retry-After — past the
    /// reuse window — refreshes instead of revoking the session as a replay.
    @Test func nativeRefreshesAreCountedOnlyWithTheRightSecretAndA429RotatesNothing() async throws {
        let clock = ManualClock()
        let config = limitedConfiguration([.refresh: .init(perIP: nil, perIdentifier: .init(1, per: 60))], native: true)
        try await withGatehouse(config, clock: clock) { _, client in
            let ct = try await client.nativeSignUp("ned@example.com", password: "a fine passphrase")
            let first = try #require(try await client.nativeTokens(ct, username: "ned@example.com").refreshToken)
            let sessionId = try #require(OpaqueToken(first)).id
            for _ in 0..<3 {
                let forged = OpaqueToken.make(id: sessionId).encoded
                let refused = try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": forged])
                expectNativeError(refused, .invalidGrant, status: .badRequest)
            }
            let refreshed = try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": first])
            #expect(refreshed.status == .ok)
            let second = try #require(try refreshed.decode(NativeAuthTokenResponse.self).refreshToken)

            let limited = try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": second])
            expectNativeError(limited, .slowDown, code: NativeAuthErrorCode.rateLimited, status: .tooManyRequests)
            let retryAfter = try #require(limited.nativeError?.retryAfter)
            #expect(retryAfter > (config.apps[0].nativeAuth?.refreshTokenReuseWindow ?? 0))
            clock.advance(by: TimeInterval(retryAfter))
            let retried = try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": second])
            #expect(retried.status == .ok)
            #expect(try retried.decode(NativeAuthTokenResponse.self).refreshToken != second)
        }
    }

    /// Two instances on one database count together: a client cannot double its allowance by being balanced
    /// across them.
    @Test func instancesSharingADatabaseShareTheCounts() async throws {
        let clock = ManualClock()
        var config = limitedConfiguration([.login: .init(perIP: nil, perIdentifier: .init(3, per: 60))])
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(FileManager.default.temporaryDirectory.appendingPathComponent("limits-\(UUID()).sqlite").path))
        config.database.url = url
        let shared = config
        try await withGatehouse(shared, clock: clock) { _, first in
            try await withGatehouse(shared, clock: clock) { _, second in
                var statuses: [HTTPResponse.Status] = []
                for client in [first, second, first, second] {
                    statuses.append(try await client.login("wes@example.com", "wrong", from: "192.0.2.40").status)
                }
                #expect(statuses == [.unauthorized, .unauthorized, .unauthorized, .tooManyRequests])
            }
        }
        await drop()
    }

    @Test func limitsCanBeTurnedOffPerApp() async throws {
        var config = limitedConfiguration([.login: .init(perIP: .init(1, per: 60), perIdentifier: .init(1, per: 60))])
        config.apps[0].rateLimits.enabled = false
        config.apps[0].loginBackoff.enabled = false
        try await withGatehouse(config) { _, client in
            for _ in 0..<5 {
                let status = try await client.login("xan@example.com", "wrong", from: "192.0.2.50").status
                #expect(status == .unauthorized)
            }
        }
    }
}

/// The test app with its login delays set (native auth on when `native`; client addresses from `X-Forwarded-For`
/// when `addresses`, so that one test process can be many clients).
private func backoffConfiguration(
    freeFailures: Int, baseDelay: Int, maxDelay: Int, native: Bool = false, addresses: Bool = false
) -> GatehouseConfiguration {
    var config = native ? nativeConfiguration() : testConfiguration()
    config.apps[0].loginBackoff = LoginBackoffSettings(freeFailures: freeFailures, baseDelay: baseDelay, maxDelay: maxDelay)
    if addresses { config.server.clientIPHeader = "X-Forwarded-For" }
    return config
}

/// Growing delays after repeated wrong passwords (issue 8, point 2).
@Suite struct LoginBackoffTests {
    @Test func delaysGrowAfterTheFreeFailuresAndASuccessClearsThem() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 3, baseDelay: 2, maxDelay: 8)
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.signUp("yara@example.com")
            for _ in 0..<3 { #expect(try await client.login("yara@example.com", "wrong").status == .unauthorized) }
            // 3 failures: the next attempt waits 2 s, even with the right password (it is not even checked).
            let early = try await client.login("yara@example.com")
            #expect(early.status == .tooManyRequests)
            #expect(early.headers[.retryAfter] == "2")
            #expect(early.error?.error.contains("failed logins") == true)
            clock.advance(by: 2)
            #expect(try await client.login("yara@example.com", "wrong").status == .unauthorized)
            // 4 failures: 4 s; 5: 8 s; then capped at maxDelay.
            clock.advance(by: 3)
            #expect(try await client.login("yara@example.com").headers[.retryAfter] == "1")
            clock.advance(by: 1)
            #expect(try await client.login("yara@example.com", "wrong").status == .unauthorized)
            clock.advance(by: 7)
            #expect(try await client.login("yara@example.com").status == .tooManyRequests)
            clock.advance(by: 1)
            #expect(try await client.login("yara@example.com").status == .ok)
            // Cleared: three more free failures.
            for _ in 0..<3 { #expect(try await client.login("yara@example.com", "wrong").status == .unauthorized) }
            #expect(try await client.login("yara@example.com").status == .tooManyRequests)
        }
    }

    /// Unknown addresses get the same delays, so a delay says nothing about whether an account exists.
    @Test func unknownAccountsAreDelayedAlike() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 2, baseDelay: 5, maxDelay: 60)
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.signUp("zed@example.com")
            for email in ["zed@example.com", "ghost@example.com"] {
                for _ in 0..<2 { #expect(try await client.login(email, "wrong").status == .unauthorized) }
                let refused = try await client.login(email, "wrong")
                #expect(refused.status == .tooManyRequests)
                #expect(refused.headers[.retryAfter] == "5")
            }
        }
    }

    /// When a delay ends, racing guesses get one try between them, not one each.
    @Test func racingAttemptsAfterADelayGetOneTry() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 1, baseDelay: 10, maxDelay: 60)
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.register("amy@example.com")
            #expect(try await client.login("amy@example.com", "wrong").status == .unauthorized)
            clock.advance(by: 10)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for i in 0..<8 { group.addTask { try await client.login("amy@example.com", "guess \(i)").status } }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .unauthorized }.count == 1)
            #expect(statuses.filter { $0 == .tooManyRequests }.count == 7)
        }
    }

    @Test func nativeSignInIsDelayedToo() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 1, baseDelay: 30, maxDelay: 60, native: true)
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.signUp("bea@example.com")
            var statuses: [Reply] = []
            for _ in 0..<2 {
                let ct1 = try #require(try await client.nativeStep(.signInInitiate, ["username": "bea@example.com", "challenge_type": allChallengeTypes]).continuationToken)
                let ct2 = try #require(try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
                statuses.append(try await client.native(.token, ["continuation_token": ct2, "grant_type": "password", "password": "wrong horse"]))
            }
            expectNativeError(statuses[0], .invalidGrant, code: NativeAuthErrorCode.invalidCredentials)
            expectNativeError(statuses[1], .slowDown, code: NativeAuthErrorCode.loginDelayed, status: .tooManyRequests)
            #expect(statuses[1].headers[.retryAfter] == "30")
        }
    }

    /// Someone else's guesses from their own address cannot keep the owner out: failures count per account and
    /// client address, and an address with none is never delayed.
    @Test func guessesFromOneAddressDoNotDelayTheOwnerElsewhere() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 3, baseDelay: 60, maxDelay: 900, addresses: true)
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.signUp("vic@example.com")
            // The attacker keeps the victim's username under delay from 203.0.113.66, trying again each time it ends.
            for _ in 0..<3 { #expect(try await client.login("vic@example.com", "guess", from: "203.0.113.66").status == .unauthorized) }
            for _ in 0..<4 {
                let refused = try await client.login("vic@example.com", "guess", from: "203.0.113.66")
                #expect(refused.status == .tooManyRequests)
                clock.advance(by: TimeInterval(Int(refused.headers[.retryAfter] ?? "0") ?? 0))
                #expect(try await client.login("vic@example.com", "guess", from: "203.0.113.66").status == .unauthorized)
            }
            // The owner, from home: checked at once, and in.
            #expect(try await client.login("vic@example.com", from: "198.51.100.4").status == .ok)
            // The attacker's address is still delayed.
            #expect(try await client.login("vic@example.com", "guess", from: "203.0.113.66").status == .tooManyRequests)
        }
    }

    /// A reset proves the mailbox: it clears every count of the account, even at the address that made them (an
    /// office behind one address, or the owner's own mistyping).
    @Test func aSuccessfulResetClearsTheCount() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 2, baseDelay: 300, maxDelay: 900, addresses: true)
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.signUp("ula@example.com")
            for _ in 0..<2 { #expect(try await client.login("ula@example.com", "typo", from: "192.0.2.30").status == .unauthorized) }
            #expect(try await client.login("ula@example.com", from: "192.0.2.30").status == .tooManyRequests)
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "ula@example.com")).status == .ok)
            let link = try await client.latestLink("ula@example.com")
            let reset = ResetPasswordRequest(password: "a brand new secret", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            #expect(try await client.login("ula@example.com", "a brand new secret", from: "192.0.2.30").status == .ok)
        }
    }

    /// Guesses sent all at once from a clean address are counted before any is checked: exactly the free ones are.
    @Test func parallelGuessesDoNotSlipPastTheCount() async throws {
        let config = backoffConfiguration(freeFailures: 3, baseDelay: 60, maxDelay: 900, addresses: true)
        try await withGatehouse(config) { _, client in
            _ = try await client.register("wes@example.com")
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for i in 0..<12 { group.addTask { try await client.login("wes@example.com", "guess \(i)", from: "203.0.113.7").status } }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .unauthorized }.count == 3, "\(statuses)")
            #expect(statuses.filter { $0 == .tooManyRequests }.count == 9, "\(statuses)")
        }
    }

    /// Many addresses guessing one account: past `accountFailures` in all, each address is delayed after its first
    /// failure instead of its free ones; a clean address still gets its try.
    @Test func manyAddressesMeetTheAccountCeiling() async throws {
        var config = backoffConfiguration(freeFailures: 3, baseDelay: 60, maxDelay: 900, addresses: true)
        config.apps[0].loginBackoff.accountFailures = 4
        try await withGatehouse(config) { _, client in
            _ = try await client.signUp("xia@example.com")
            for host in 1...4 { #expect(try await client.login("xia@example.com", "guess", from: "203.0.113.\(host)").status == .unauthorized) }
            // Below the ceiling address .1 would have two more free tries; now it waits.
            #expect(try await client.login("xia@example.com", "guess", from: "203.0.113.1").status == .tooManyRequests)
            #expect(try await client.login("xia@example.com", from: "198.51.100.200").status == .ok)
        }
    }

    /// A pending account's right password answers as a wrong one, so it counts as one: if it cleared the delay,
    /// the delay's end would tell a guesser that this guess was right.
    @Test func aPendingAccountsRightPasswordDoesNotClearTheCount() async throws {
        let config = backoffConfiguration(freeFailures: 2, baseDelay: 60, maxDelay: 900, addresses: true)
        try await withGatehouse(config) { _, client in
            let registered = try await client.register("pat@example.com")
            #expect(registered.status == .created)
            #expect(try await client.login("pat@example.com", "guess one", from: "203.0.113.8").status == .unauthorized)
            #expect(try await client.login("pat@example.com", from: "203.0.113.8").status == .unauthorized)
            #expect(try await client.login("pat@example.com", "guess three", from: "203.0.113.8").status == .tooManyRequests)
        }
    }

    /// One count whichever protocol asks: native password sign-ins from an address delay that address's Client API
    /// logins, and the owner signs in with the other protocol from elsewhere.
    @Test func bothProtocolsShareOneCountPerAddress() async throws {
        let config = backoffConfiguration(freeFailures: 2, baseDelay: 60, maxDelay: 900, native: true, addresses: true)
        try await withGatehouse(config) { _, client in
            _ = try await client.signUp("nia@example.com")
            let attacker: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "203.0.113.77"]
            for _ in 0..<2 {
                let ct1 = try #require(
                    try await client.native(.signInInitiate, headers: attacker, ["username": "nia@example.com", "challenge_type": allChallengeTypes]).step?.continuationToken
                )
                let ct2 = try #require(
                    try await client.native(.signInChallenge, headers: attacker, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).step?.continuationToken
                )
                let reply = try await client.native(.token, headers: attacker, ["continuation_token": ct2, "grant_type": "password", "password": "guess"])
                expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.invalidCredentials)
            }
            #expect(try await client.login("nia@example.com", from: "203.0.113.77").status == .tooManyRequests)
            #expect(try await client.login("nia@example.com", from: "198.51.100.9").status == .ok)
        }
    }

    @Test func theDelayScheduleDoublesAndCaps() {
        let backoff = LoginBackoffSettings(freeFailures: 5, baseDelay: 1, maxDelay: 900)
        #expect((0...16).map { backoff.delay(afterFailures: $0) } == [0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900])
        #expect((0...3).map { backoff.delay(afterFailures: $0, free: 1) } == [0, 1, 2, 4])
        #expect(backoff.delay(afterFailures: 10_000) == 900)
        #expect(LoginBackoffSettings(enabled: false).delay(afterFailures: 50) == 0)
    }
}

/// The bundled common-password list and the rule against using the email (issue 8, point 4).
@Suite struct PasswordPolicyTests {
    @Test func theBundledListHasTheMostCommonPasswords() {
        #expect(CommonPasswords.count >= 10_000)
        for common in ["123456", "password", "qwerty", "iloveyou", "password1"] { #expect(CommonPasswords.contains(common)) }
        #expect(!CommonPasswords.contains("correct horse battery"))
    }

    @Test func rulesAreCheckedInOrderAndCanBeTurnedOff() {
        let policy = PasswordPolicy()
        #expect(policy.violation("1234567") == .tooShort)
        #expect(policy.violation("Sunshine1") == .banned)
        #expect(policy.violation("Maya.Lin@example.com", email: "maya.lin@example.com") == .isEmail)
        #expect(policy.violation("MAYA.LIN", email: "maya.lin@example.com") == .isEmail)
        #expect(policy.violation("a sturdy passphrase", email: "maya.lin@example.com") == nil)
        let lenient = PasswordPolicy(refuseCommon: false, refuseEmail: false)
        #expect(lenient.violation("Sunshine1") == nil)
        #expect(lenient.violation("maya.lin@example.com", email: "maya.lin@example.com") == nil)
    }

    @Test func nativeAuthNamesTheRuleInItsSuberror() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let banned = try await client.native(.signUpStart, ["username": "cy@example.com", "password": "qwerty123", "challenge_type": allChallengeTypes])
            expectNativeError(banned, .invalidGrant, code: NativeAuthErrorCode.passwordBanned, suberror: .passwordBanned)
            let email = try await client.native(.signUpStart, ["username": "cy@example.com", "password": "CY@example.com", "challenge_type": allChallengeTypes])
            expectNativeError(email, .invalidGrant, code: NativeAuthErrorCode.passwordIsEmail, suberror: .passwordIsInvalid)
        }
    }

    @Test func aResetToACommonPasswordIsRefusedAndTheTokenStillWorks() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("dee@example.com")
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "dee@example.com"))
            let link = try await client.latestLink("dee@example.com")
            let refused = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "letmein123", token: link.token, tokenId: link.tokenId))
            #expect(refused.status == .badRequest)
            #expect(refused.error?.error.hasPrefix("password_banned:") == true)
            let done = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "a new long secret", token: link.token, tokenId: link.tokenId))
            #expect(done.status == .ok)
        }
    }
}

/// Absolute lifetime and idle timeout of refresh tokens (issue 8, point 5).
@Suite struct SessionLifetimeTests {
    @Test func anUnusedSessionEndsAfterTheIdleTimeoutAndAUsedOneLivesOn() async throws {
        let clock = ManualClock()
        var config = testConfiguration()
        config.apps[0].sessionIdleTimeout = 3600
        try await withGatehouse(config, clock: clock) { _, client in
            let idle = try await client.signUp("eve@example.com")
            let busy = try #require(try await client.login("eve@example.com").decode(LoginResponse.self))
            for _ in 0..<3 {
                clock.advance(by: 3000)
                #expect(try await client.call(Path.session, .post, bearer: busy.refreshToken).status == .created)
            }
            // 9000 s after login: the busy session was used every 3000 s; the idle one not since its login.
            let refused = try await client.call(Path.session, .post, bearer: idle.refreshToken)
            #expect(refused.status == .unauthorized)
            #expect(refused.error?.errorCode == .invalidSession)
            #expect(try await client.call(Path.session, .post, bearer: busy.refreshToken).status == .created)
        }
    }

    @Test func theAbsoluteLifetimeEndsEvenABusySession() async throws {
        let clock = ManualClock()
        var config = testConfiguration()
        config.apps[0].refreshTokenTTL = 7200
        config.apps[0].sessionIdleTimeout = 3600
        try await withGatehouse(config, clock: clock) { _, client in
            let login = try await client.signUp("fin@example.com")
            for _ in 0..<2 {
                clock.advance(by: 3500)
                #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .created)
            }
            clock.advance(by: 201)  // 7201 s after login, 201 s after its last use
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .unauthorized)
        }
    }

    @Test func nativeRefreshTokensIdleOutToo() async throws {
        let clock = ManualClock()
        var config = nativeConfiguration()
        config.apps[0].sessionIdleTimeout = 600
        try await withGatehouse(config, clock: clock) { _, client in
            let ct = try await client.nativeSignUp("gil@example.com", password: "a fine passphrase")
            let tokens = try await client.nativeTokens(ct, username: "gil@example.com")
            let refresh = try #require(tokens.refreshToken)
            clock.advance(by: 601)
            let refused = try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": refresh])
            expectNativeError(refused, .expiredRefreshToken, code: NativeAuthErrorCode.expiredRefreshToken)
        }
    }
}

/// The audit log: security events with time, app, user, address and user agent, never a secret (issue 8, point 7).
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
            #expect(kinds == ["registration", "confirmation", "login_succeeded", "login_failed", "login_succeeded", "refresh", "logout"])
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
            #expect(try await gatehouse.env.store.auditEvents(appId: nil, userId: userId, afterSeq: nil, limit: 2).map(\.kind) == ["refresh", "logout"])
        }
    }

    /// Audit rows are written in groups under load (AuditWriter): every event of many racing requests is written
    /// exactly once, before its request returns, and the refreshes behind them all succeed.
    @Test func racingRefreshesEachWriteTheirOwnAuditRow() async throws {
        try await withGatehouse(testConfiguration()) { gatehouse, client in
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
                "refresh", "refresh_token_reused",
            ] {
                #expect(kinds.contains(expected), "\(expected) missing from \(kinds)")
            }
            let order = ["api_key_created", "api_key_disabled", "api_key_deleted", "reset_requested", "reset_completed"].compactMap { kinds.firstIndex(of: $0) }
            #expect(order == order.sorted())
        }
    }
}

/// Every route that sends mail, writes a row for an unauthenticated caller or checks a secret is counted (the
/// routes that were not, and the ones that answered a revealing app's lookups before counting them).
@Suite struct CostlyRouteLimitTests {
    static let address: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "203.0.113.99"]

    /// `resetpassword/v1.0/start` writes a flow and an audit row for any address: counted per client address.
    @Test func nativeResetStartsAreLimited() async throws {
        let config = limitedConfiguration([.flow: .init(perIP: .init(3, per: 60), perIdentifier: nil)], native: true)
        try await withGatehouse(config) { _, client in
            var statuses: [HTTPResponse.Status] = []
            for i in 0..<4 {
                let reply = try await client.native(
                    .resetPasswordStart, headers: Self.address, ["username": "nobody\(i)@example.com", "challenge_type": allChallengeTypes]
                )
                statuses.append(reply.status)
            }
            #expect(statuses == [.ok, .ok, .ok, .tooManyRequests])
        }
    }

    /// Native revoke and refresh grants look a presented token up: counted per address before the lookup, made-up
    /// tokens included.
    @Test func nativeRevokesAndRefreshesOfMadeUpTokensAreLimited() async throws {
        let config = limitedConfiguration([.refresh: .init(perIP: .init(4, per: 60), perIdentifier: nil)], native: true)
        try await withGatehouse(config) { _, client in
            var statuses: [HTTPResponse.Status] = []
            for i in 0..<3 { statuses.append(try await client.native(.revoke, headers: Self.address, ["token": "made-up-\(i)"]).status) }
            for i in 0..<2 {
                let reply = try await client.native(
                    .token, headers: Self.address, ["grant_type": "refresh_token", "refresh_token": "made-up-\(i)", "scope": "openid offline_access"]
                )
                statuses.append(reply.status)
            }
            #expect(statuses == [.ok, .ok, .ok, .badRequest, .tooManyRequests])
        }
    }

    /// A refused refresh counts once against its address, wherever it is refused: a replay that ended its session
    /// (refused after it was counted with its session) is not counted a second time.
    @Test func aRefusedRefreshCountsOnce() async throws {
        let clock = ManualClock()
        let config = limitedConfiguration([.refresh: .init(perIP: .init(3, per: 3600), perIdentifier: nil)], native: true)
        try await withGatehouse(config, clock: clock) { _, client in
            let first = try #require(try await client.nativeSignedUp("ray@example.com").refreshToken)
            func refresh(_ token: String) async throws -> Reply {
                try await client.native(.token, headers: Self.address, ["grant_type": "refresh_token", "refresh_token": token, "scope": "openid offline_access"])
            }
            #expect(try await refresh(first).status == .ok)
            clock.advance(by: 120)  // past the reuse window: presenting the spent token again is a replay
            #expect(try await refresh(first).status == .badRequest)
            #expect(try await refresh("made-up").status == .badRequest)
            #expect(try await refresh("made-up").status == .tooManyRequests)
        }
    }

    /// Opening a hosted link checks its token: counted per token id like `confirm` and `reset`.
    @Test func hostedLinkPagesAreLimitedPerToken() async throws {
        let config = limitedConfiguration([.code: .init(perIP: nil, perIdentifier: .init(2, per: 60))])
        try await withGatehouse(config) { _, client in
            let path = "/app/test-app/confirm?token=\(String(repeating: "ab", count: 32))&tokenId=\(String(repeating: "cd", count: 12))"
            var replies: [Reply] = []
            for _ in 0..<3 { replies.append(try await client.call(path, .get)) }
            #expect(replies.prefix(2).allSatisfy { $0.status != .tooManyRequests }, "\(replies.map(\.status))")
            // A page's refusal is a page: HTML, with when to try again.
            let refused = try #require(replies.last)
            #expect(refused.status == .tooManyRequests)
            #expect(refused.contentType?.hasPrefix("text/html") == true)
            #expect(refused.headers[.retryAfter] != nil)
        }
    }

    /// An app that reveals user existence answers `UserNotFound`, but only within the send limits: the lookups are
    /// counted like the mails they stand for.
    @Test func revealingLookupsAreCountedBeforeTheyAnswer() async throws {
        var config = limitedConfiguration([.email: .init(perIP: .init(3, per: 60), perIdentifier: nil)])
        config.apps[0].revealUserExistence = true
        try await withGatehouse(config) { _, client in
            var statuses: [HTTPResponse.Status] = []
            for i in 0..<4 {
                let body = try JSONEncoder().encode(EmailRequest(email: "who\(i)@example.com"))
                statuses.append(try await client.post(Path.local("reset/send"), body, from: "203.0.113.99").status)
            }
            #expect(statuses == [.notFound, .notFound, .notFound, .tooManyRequests])
        }
    }

    /// Each anonymous login makes a user: counted as a registration.
    @Test func anonymousLoginsCountAsRegistrations() async throws {
        let config = limitedConfiguration([.registration: .init(perIP: .init(2, per: 60), perIdentifier: nil)])
        try await withGatehouse(config) { _, client in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<3 {
                statuses.append(try await client.post(Path.app("test-app") + "/auth/providers/anon-user/login", Data("{}".utf8), from: "203.0.113.99").status)
            }
            #expect(statuses == [.ok, .ok, .tooManyRequests])
        }
    }
}
