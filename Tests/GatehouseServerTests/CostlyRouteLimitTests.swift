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
