import Foundation
import GatehouseDomain
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

    /// Where the app reveals user existence: one account; the others are refused as taken, or (racing past the
    /// first check) by the send limit of 5 confirmation emails per address, and none leaves a second account or email.
    @Test func concurrentRegistrationsOfOneEmailCreateOneAccount() async throws {
        try await withGatehouse(testConfiguration(reveal: true)) { gatehouse, client in
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await client.register("twin@example.com").status }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .created }.count == 1)
            #expect(statuses.filter { $0 == .conflict || $0 == .tooManyRequests }.count == 9)
            #expect(try await gatehouse.env.store.mailbox(recipient: "twin@example.com", limit: 20).count == 1)
        }
    }

    /// Otherwise a registration over a pending one replaces it: racing registrations leave one account, at most the
    /// send limit's 5 emails, and only the newest link works. It confirms the one password whose registration sent it
    /// when that registration alone named the address; once one replaced another (contested), it confirms none.
    @Test func concurrentRegistrationsOfOneEmailLeaveOneAccountAndOneWorkingLink() async throws {
        // The test tries all ten passwords from one address to find the one that works: without login delays, which
        // would (rightly) hold back the right password when it comes after five wrong ones.
        var configuration = testConfiguration()
        configuration.apps[0].loginBackoff.enabled = false
        try await withGatehouse(configuration) { gatehouse, client in
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<10 {
                    group.addTask { try await client.register("twin@example.com", "password number \(index)").status }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == .created || $0 == .tooManyRequests })
            #expect(statuses.contains(.created))
            let mails = try await client.mailbox("twin@example.com")
            #expect((1...5).contains(mails.count))
            for stale in mails.dropFirst() {
                let link = try #require(stale.link)
                #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .badRequest)
            }
            let newest = try #require(mails.first?.link)
            let contested = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "twin@example.com")?.contestedAt != nil
            #expect(contested == (mails.count > 1))
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: newest.token, tokenId: newest.tokenId)).status == .ok)
            var working = 0
            for index in 0..<10 where try await client.login("twin@example.com", "password number \(index)").status == .ok { working += 1 }
            #expect(working == (contested ? 0 : 1))
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "twin@example.com"))
            #expect(try await gatehouse.env.store.identities(userId: account.userId).count == 1)
        }
    }
}
