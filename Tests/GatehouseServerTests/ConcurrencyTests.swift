import Foundation
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// One-time tokens are redeemed by one atomic conditional update: of many racing requests exactly one wins.
@Suite struct ConcurrencyTests {
    @Test func twentyConcurrentConfirmsSucceedExactlyOnce() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("race@example.com")
            let link = try await client.latestLink("race@example.com")
            let request = ConfirmRequest(token: link.token, tokenId: link.tokenId)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await client.call(Path.local("confirm"), json: request).status }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.count == 20)
            // The others are refused: as used tokens, or (past ten tries of one token) by the rate limit on checks.
            #expect(statuses.filter { $0 == .ok }.count == 1)
            #expect(statuses.filter { $0 == .badRequest || $0 == .tooManyRequests }.count == 19)
            #expect(try await client.login("race@example.com").status == .ok)
        }
    }

    @Test func concurrentResetsWithOneTokenSetOnePassword() async throws {
        // Nine wrong passwords in a row would start login delays (LoginBackoffTests covers those).
        var config = testConfiguration()
        config.apps[0].loginBackoff.enabled = false
        try await withGatehouse(config) { _, client in
            _ = try await client.signUp("race2@example.com")
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "race2@example.com"))
            let link = try await client.latestLink("race2@example.com")
            let results = try await withThrowingTaskGroup(of: (Int, HTTPResponse.Status).self) { group in
                for i in 0..<10 {
                    group.addTask {
                        let body = ResetPasswordRequest(password: "new password \(i)", token: link.token, tokenId: link.tokenId)
                        return (i, try await client.call(Path.local("reset"), json: body).status)
                    }
                }
                return try await group.reduce(into: [(Int, HTTPResponse.Status)]()) { $0.append($1) }
            }
            let winners = results.filter { $0.1 == .ok }
            #expect(winners.count == 1)
            let winner = try #require(winners.first?.0)
            #expect(try await client.login("race2@example.com", "new password \(winner)").status == .ok)
            for i in 0..<10 where i != winner {
                #expect(try await client.login("race2@example.com", "new password \(i)").status == .unauthorized)
            }
        }
    }

    @Test func concurrentRegistrationsOfOneEmailCreateOneAccount() async throws {
        try await withGatehouse { gatehouse, client in
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await client.register("twin@example.com").status }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            // One account; the others are refused as taken, or (racing past the first check) by the send limit
            // of 5 confirmation emails per address. None of them leaves a second account or email.
            #expect(statuses.filter { $0 == .created }.count == 1)
            #expect(statuses.filter { $0 == .conflict || $0 == .tooManyRequests }.count == 9)
            #expect(try await gatehouse.env.store.mailbox(recipient: "twin@example.com", limit: 20).count == 1)
        }
    }
}
