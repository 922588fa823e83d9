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

/// Growing delays after repeated wrong passwords.
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

    /// A native sign-in refused for a login delay checked no password: the flow keeps the attempt it counted, so
    /// however often the client sends the password while it waits, the right one is taken on the same flow after it.
    @Test func aDelayedNativeSignInKeepsItsFlowsAttempts() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 1, baseDelay: 30, maxDelay: 60, native: true)
        try await withGatehouse(config, clock: clock) { _, client in
            let ct2 = try await secondFlowAfterAWrongPassword(client, "bea@example.com")
            // More refusals than the flow has attempts (code.maxAttempts, 5 by default).
            for _ in 0..<6 {
                let delayed = try await client.native(.token, ["continuation_token": ct2, "grant_type": "password", "password": "correct horse"])
                expectNativeError(delayed, .slowDown, code: NativeAuthErrorCode.loginDelayed, status: .tooManyRequests)
            }
            clock.advance(by: 31)
            let signedIn = try await client.native(.token, ["continuation_token": ct2, "grant_type": "password", "password": "correct horse"])
            #expect(signedIn.status == .ok, "\(signedIn.text)")
            #expect(try !signedIn.decode(NativeAuthTokenResponse.self).accessToken.isEmpty)
        }
    }

    /// When a delay ends, racing password grants on one native flow (one continuation token) get one check between
    /// them: the others are refused unchecked (a delay again, or the flow's attempts, all taken by racers at once), and
    /// every refused one gives its attempt back. So the flow ends with one attempt spent for the one password checked,
    /// and the owner's password is taken on it once the next delay ends.
    @Test func racingNativeGrantsOnOneFlowGetOneCheck() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 1, baseDelay: 10, maxDelay: 60, native: true)
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            let ct2 = try await secondFlowAfterAWrongPassword(client, "bea@example.com")
            clock.advance(by: 10)
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for i in 0..<8 {
                    group.addTask { try await client.native(.token, ["continuation_token": ct2, "grant_type": "password", "password": "guess \(i)"]) }
                }
                return try await group.reduce(into: [Reply]()) { $0.append($1) }
            }
            let codes = replies.map { $0.nativeError?.errorCodes.first }
            #expect(codes.filter { $0 == NativeAuthErrorCode.invalidCredentials }.count == 1, "\(codes)")
            // Every other one was refused before its password was looked at: delayed again, or told the flow's attempts
            // were taken (by racers that then gave theirs back).
            let unchecked = replies.filter { $0.nativeError?.errorCodes.first != NativeAuthErrorCode.invalidCredentials }
            #expect(
                unchecked.allSatisfy {
                    ($0.status == .tooManyRequests && $0.nativeError?.errorCodes.first == NativeAuthErrorCode.loginDelayed)
                        || ($0.status == .badRequest && $0.nativeError?.errorCodes.first == NativeAuthErrorCode.tooManyAttempts)
                },
                "\(unchecked.map(\.text))"
            )
            #expect(try await gatehouse.env.store.flow(id: try #require(OpaqueToken(ct2)).id)?.attempts == 1)

            clock.advance(by: 60)
            let signedIn = try await client.native(.token, ["continuation_token": ct2, "grant_type": "password", "password": "correct horse"])
            #expect(signedIn.status == .ok, "\(signedIn.text)")
        }
    }

    /// The same for a refusal by the login rate limit: it is answered before the password is checked, so it spends
    /// none of the flow's attempts either.
    @Test func aRateLimitedNativeSignInKeepsItsFlowsAttempts() async throws {
        let clock = ManualClock()
        let config = limitedConfiguration([.login: .init(perIP: .init(1, per: 60), perIdentifier: nil)], native: true)
        try await withGatehouse(config, clock: clock) { _, client in
            let from: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "198.51.100.30"]
            let ct2 = try await secondFlowAfterAWrongPassword(client, "bo@example.com", from: from)
            // More refusals than the flow has attempts (code.maxAttempts, 5 by default).
            for _ in 0..<6 {
                let limited = try await client.native(.token, headers: from, ["continuation_token": ct2, "grant_type": "password", "password": "correct horse"])
                expectNativeError(limited, .slowDown, code: NativeAuthErrorCode.rateLimited, status: .tooManyRequests)
            }
            clock.advance(by: 61)
            let signedIn = try await client.native(.token, headers: from, ["continuation_token": ct2, "grant_type": "password", "password": "correct horse"])
            #expect(signedIn.status == .ok, "\(signedIn.text)")
            #expect(try !signedIn.decode(NativeAuthTokenResponse.self).accessToken.isEmpty)
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

    /// A Client API login ends its counts in the write of its session; a native password sign-in ends them as it
    /// proves the password. Either way the next wrong passwords start a new run: here a run of one Client API failure
    /// is ended by a native sign-in, and two more failures are both answered (without the end, the second would be
    /// delayed).
    @Test func aRightPasswordEndsTheRunWhicheverProtocolAsks() async throws {
        let config = backoffConfiguration(freeFailures: 2, baseDelay: 60, maxDelay: 900, native: true)
        try await withGatehouse(config) { _, client in
            _ = try await client.signUp("noor@example.com")
            #expect(try await client.login("noor@example.com", "wrong").status == .unauthorized)
            #expect(try await PreRegistrationTests.passwordSignIn(client, "noor@example.com", "correct horse").status == .ok)
            for _ in 0..<2 { #expect(try await client.login("noor@example.com", "wrong").status == .unauthorized) }
            #expect(try await client.login("noor@example.com", "wrong").status == .tooManyRequests)
        }
    }

    /// An attacker guessing a victim's password from an address, who logs in to their own account from the same
    /// address with either protocol, ends only their own account's counts: the victim's stay, and the next guess waits.
    @Test func anAttackersOwnLoginFromTheSameAddressEndsNoneOfTheVictimsCounts() async throws {
        let config = backoffConfiguration(freeFailures: 2, baseDelay: 60, maxDelay: 900, native: true, addresses: true)
        try await withGatehouse(config) { _, client in
            _ = try await client.signUp("vera@example.com")
            _ = try await client.signUp("mallory@example.com")
            for _ in 0..<2 { #expect(try await client.login("vera@example.com", "guess", from: "203.0.113.50").status == .unauthorized) }
            #expect(try await client.login("mallory@example.com", from: "203.0.113.50").status == .ok)
            let attacker: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "203.0.113.50"]
            let ct1 = try #require(
                try await client.native(.signInInitiate, headers: attacker, ["username": "mallory@example.com", "challenge_type": allChallengeTypes]).step?.continuationToken
            )
            let ct2 = try #require(
                try await client.native(.signInChallenge, headers: attacker, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).step?.continuationToken
            )
            let signedIn = try await client.native(.token, headers: attacker, ["continuation_token": ct2, "grant_type": "password", "password": "correct horse"])
            #expect(signedIn.status == .ok)
            #expect(try await client.login("vera@example.com", "guess", from: "203.0.113.50").status == .tooManyRequests)
            // The victim, from elsewhere, is not slowed.
            #expect(try await client.login("vera@example.com", from: "198.51.100.12").status == .ok)
        }
    }

    /// A right password of a disabled user is refused (`UserDisabled`) and ends no count: the attempt stays counted,
    /// as the run before it.
    @Test func aDisabledUsersRightPasswordEndsNoCount() async throws {
        let clock = ManualClock()
        let config = backoffConfiguration(freeFailures: 2, baseDelay: 60, maxDelay: 900)
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            let login = try await client.signUp("dara@example.com")
            #expect(try await client.login("dara@example.com", "wrong").status == .unauthorized)
            try await gatehouse.setUserDisabled(appId: "test-app", userId: login.userId, disabled: true)
            #expect(try await client.login("dara@example.com").status == .unauthorized)
            try await gatehouse.setUserDisabled(appId: "test-app", userId: login.userId, disabled: false)
            // Two attempts counted (a wrong password and the disabled user's right one): the next waits.
            #expect(try await client.login("dara@example.com").status == .tooManyRequests)
            clock.advance(by: 60)
            #expect(try await client.login("dara@example.com").status == .ok)
            // Ended by that login, written with its session: two free failures again.
            for _ in 0..<2 { #expect(try await client.login("dara@example.com", "wrong").status == .unauthorized) }
            #expect(try await client.login("dara@example.com", "wrong").status == .tooManyRequests)
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

/// Signs `email` up (from no client address: its sign-up counts against none), sends one wrong password on a native
/// sign-in from `from`'s address (checked: a wrong password), and starts a second sign-in: its password step's
/// continuation token.
func secondFlowAfterAWrongPassword(_ client: any TestClientProtocol, _ email: String, from: HTTPFields = [:]) async throws -> String {
    _ = try await client.signUp(email)
    let wrong = try await client.native(.token, headers: from, ["continuation_token": try await nativePasswordStep(client, email), "grant_type": "password", "password": "wrong horse"])
    expectNativeError(wrong, .invalidGrant, code: NativeAuthErrorCode.invalidCredentials)
    return try await nativePasswordStep(client, email)
}

/// A native sign-in for `email` started and challenged: the continuation token its password grant takes.
func nativePasswordStep(_ client: any TestClientProtocol, _ email: String) async throws -> String {
    let ct1 = try #require(try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": allChallengeTypes]).continuationToken)
    return try #require(try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
}
