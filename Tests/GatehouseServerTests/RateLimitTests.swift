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

/// Rate limits per client address and per identifier, kept in the database.
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

    @Test func loginsPerIdentifierAreLimitedPerClientSoNoOneUsesUpTheOwnersAllowance() async throws {
        let clock = ManualClock()
        let config = limitedConfiguration([.login: .init(perIP: nil, perIdentifier: .init(2, per: 300))])
        try await withGatehouse(config, clock: clock) { _, client in
            _ = try await client.register("sam@example.com")
            for _ in 0..<2 {
                let status = try await client.login("SAM@example.com", "wrong", from: "192.0.2.1").status
                #expect(status == .unauthorized)
            }
            // The same address however it is spelled, known or not: the answer reveals nothing about the account.
            let refused = try await client.login("sam@EXAMPLE.com", from: "192.0.2.1")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "300")
            for _ in 0..<2 { _ = try await client.login("nobody@example.com", "wrong", from: "192.0.2.1") }
            #expect(try await client.login("nobody@example.com", "wrong", from: "192.0.2.1").status == .tooManyRequests)
            // Another client's count of the same username is its own: the limit cannot be used up against the owner.
            #expect(try await client.login("sam@example.com", "wrong", from: "192.0.2.2").status == .unauthorized)
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
    /// across them (at most a share more: a tenth of the limit, at least one, per further instance).
    @Test func instancesSharingADatabaseShareTheCounts() async throws {
        let clock = ManualClock()
        var config = limitedConfiguration([.login: .init(perIP: nil, perIdentifier: .init(3, per: 60))])
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(FileManager.default.temporaryDirectory.appendingPathComponent("limits-\(UUID()).sqlite").path))
        config.database.url = url
        let shared = config
        try await withGatehouse(shared, clock: clock) { _, first in
            try await withGatehouse(shared, clock: clock) { _, second in
                var statuses: [HTTPResponse.Status] = []
                for client in [first, second, first, second, first, second, first, second] {
                    statuses.append(try await client.login("wes@example.com", "wrong", from: "192.0.2.40").status)
                }
                let checked = statuses.filter { $0 == .unauthorized }.count
                #expect(checked >= 3 && checked <= 3 + 1, "\(statuses)")
                #expect(statuses.dropFirst(checked).allSatisfy { $0 == .tooManyRequests }, "\(statuses)")
            }
        }
        await drop()
    }

    /// Someone guessing one account's password from one address, alternating two instances and both protocols: the
    /// account's count for that client is one, and the instances together let through at most their share more
    /// (a tenth of the limit, at least one, per further instance: here 4 + 1). (Guesses from many addresses are the
    /// login delays' to slow: `LoginBackoffTests`.)
    @Test func guessesAcrossInstancesAndProtocolsFromOneClientShareOneCount() async throws {
        var config = limitedConfiguration([.login: .init(perIP: nil, perIdentifier: .init(4, per: 60))], native: true)
        config.apps[0].loginBackoff.enabled = false
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(FileManager.default.temporaryDirectory.appendingPathComponent("guesses-\(UUID()).sqlite").path))
        config.database.url = url
        let shared = config
        try await withGatehouse(shared) { _, first in
            // The victim's account, made without a login (a login would count against the same limit).
            #expect(try await first.register("vic@example.com").status == .created)
            let link = try await first.latestLink("vic@example.com")
            #expect(try await first.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
            try await withGatehouse(shared) { _, second in
                var refused: [Bool] = []
                for attempt in 0..<10 {
                    let address: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "203.0.113.1"]
                    let client = attempt.isMultiple(of: 2) ? first : second
                    if attempt % 4 < 2 {
                        let body = try JSONEncoder().encode(EmailPasswordLoginRequest(username: "vic@example.com", password: "guess \(attempt)"))
                        let status = try await client.post(Path.local("login"), body, from: "203.0.113.1").status
                        #expect(status == .unauthorized || status == .tooManyRequests)
                        refused.append(status == .tooManyRequests)
                    } else {
                        let fields = ["username": "vic@example.com", "challenge_type": allChallengeTypes]
                        let ct1 = try #require(try await client.native(.signInInitiate, headers: address, fields).step?.continuationToken)
                        let ct2 = try #require(
                            try await client.native(.signInChallenge, headers: address, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).step?.continuationToken
                        )
                        let reply = try await client.native(.token, headers: address, ["continuation_token": ct2, "grant_type": "password", "password": "guess \(attempt)"])
                        #expect(reply.status == .badRequest || reply.status == .tooManyRequests, "\(reply.text)")
                        refused.append(reply.status == .tooManyRequests)
                    }
                }
                let checked = refused.prefix { !$0 }.count
                #expect(checked >= 4 && checked <= 5, "\(refused)")
                // Once refused, every later guess is, whichever instance, protocol or address.
                #expect(refused.dropFirst(checked).allSatisfy { $0 }, "\(refused)")
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
