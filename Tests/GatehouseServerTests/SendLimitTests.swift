import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct SendLimitTests {
    @Test func theSixthEmailInTenMinutesIsRefusedAndNothingIsQueued() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            _ = try await client.register("limit@example.com")  // 1
            for _ in 0..<4 {  // 2…5
                #expect(try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "limit@example.com")).status == .ok)
            }
            let refused = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "limit@example.com"))
            #expect(refused.status == .tooManyRequests)
            #expect(refused.error?.errorCode == .tooManyRequests)
            #expect(Int(refused.headers[.retryAfter] ?? "") == 600)
            #expect(try await client.mailbox("limit@example.com").count == 5)
            // Other kinds have their own budget.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "limit@example.com")).status == .ok)
            // The window slides.
            clock.advance(by: 601)
            #expect(try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "limit@example.com")).status == .ok)
        }
    }

    /// The limit counts requests for unknown addresses too, so hitting it reveals nothing.
    @Test func unknownAddressesHitTheLimitToo() async throws {
        try await withGatehouse { _, client in
            for _ in 0..<5 {
                #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "ghost@example.com")).status == .ok)
            }
            let refused = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "ghost@example.com"))
            #expect(refused.status == .tooManyRequests)
        }
    }

    @Test func theLimitIsConfigurable() async throws {
        var config = testConfiguration()
        config.apps[0].emailLimit = 1
        try await withGatehouse(config) { gatehouse, client in
            _ = try await client.register("one@example.com")
            #expect(try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "one@example.com")).status == .tooManyRequests)
            // A refused registration leaves no account behind.
            #expect(try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "two@example.com")).status == .ok)
            let register = try await client.register("two@example.com")
            #expect(register.status == .tooManyRequests)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "two@example.com") == nil)
        }
    }

    /// A per-client count above the default total (a load test's `count: 1000`) is not capped by the total: a total
    /// below the count counts as the count.
    @Test func aCountAboveTheTotalIsNotCappedByIt() async throws {
        var config = testConfiguration()
        config.apps[0].emailLimit = 30
        #expect(config.apps[0].emailLimitTotal < 30)
        try await withGatehouse(config) { _, client in
            for attempt in 0..<30 {
                let status = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "many@example.com")).status
                #expect(status == .ok, "attempt \(attempt)")
            }
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "many@example.com")).status == .tooManyRequests)
        }
        let loaded = try ConfigurationLoader(environment: [:]).parse(yaml: "apps: [{id: a, emailLimit: {count: 1000, window: 1}}]")
        try ConfigurationLoader.validate(loaded)
        #expect(loaded.apps[0].emailLimit == 1000)
    }
}
