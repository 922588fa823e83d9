import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// Data that is only kept for a while (flows, tokens, ended sessions, counters, sent mail, audit events) goes once
/// it has aged out, so a server under steady use keeps steady tables.
@Suite struct RetentionTests {
    /// Short ages, so that a few simulated days reach the steady state.
    static func configuration() -> GatehouseConfiguration {
        var config = nativeConfiguration()
        config.retention = RetentionSettings(batchSize: 10, expired: 86_400, endedSessions: 2 * 86_400, sentMail: 2 * 86_400, auditEvents: 4 * 86_400)
        return config
    }

    /// One day of churn: people sign up, confirm, sign in, refresh, sign out, mistype passwords, and start resets
    /// they never finish, through both protocols.
    static func day(_ number: Int, _ client: some TestClientProtocol) async throws {
        for person in 0..<4 {
            let email = "day\(number)-\(person)@example.com"
            let login = try await client.signUp(email)
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .created)
            #expect(try await client.call(Path.session, .delete, bearer: login.refreshToken).status == .noContent)
            #expect(try await client.login(email, "mistyped").status == .unauthorized)
            let native = try await client.nativeSignedUp("native-\(email)")
            #expect(try await client.native(.revoke, ["token": try #require(native.refreshToken)]).status == .ok)
            #expect(try await client.native(.resetPasswordStart, ["username": "gone-\(email)", "challenge_type": allChallengeTypes]).status == .ok)
        }
    }

    @Test func tablesStayBoundedUnderALongSignUpAndSignInChurn() async throws {
        let clock = ManualClock()
        try await withGatehouse(Self.configuration(), clock: clock) { gatehouse, client in
            let store = try #require(gatehouse.env.store as? SQLStore)
            var sizes: [[RetentionTarget: Int]] = []
            var deleted: [RetentionTarget: Int] = [:]
            for number in 0..<12 {
                try await Self.day(number, client)
                // Mail is delivered in the background; pending mail is never purged, so each day ends delivered.
                try await waitFor("the outbox delivered") {
                    try await store.db.query("SELECT COUNT(*) AS n FROM outbox WHERE status = 'pending'", []).first?.int("n") == 0
                }
                clock.advance(by: 86_400)
                deleted.merge(try await RetentionService(env: gatehouse.env).run(), uniquingKeysWith: +)
                sizes.append(try await store.retainedTableSizes())
            }
            for target in RetentionTarget.allCases {
                let series = sizes.map { $0[target] ?? 0 }
                // Past the longest age (4 days) every day removes what an old day added: no growth after day 6.
                #expect(series[6...].max()! <= series[..<6].max()!, "\(target.rawValue) grows: \(series)")
                #expect(deleted[target, default: 0] > 0, "\(target.rawValue): nothing was ever deleted")
            }
            // What is deleted is what aged out: a session still alive and a recent audit event are kept.
            let live = try await client.signUp("still-here@example.com")
            clock.advance(by: 3 * 86_400)
            try await RetentionService(env: gatehouse.env).run()
            #expect(try await client.call(Path.session, .post, bearer: live.refreshToken).status == .created)
            let recent = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: live.userId, afterSeq: nil, limit: 10)
            #expect(!recent.isEmpty)
        }
    }

    /// Batches are small and each is one statement: two instances purging at once share the work, each row is
    /// deleted once, and nothing that should stay goes.
    @Test func twoConcurrentPurgesDeleteEachRowOnce() async throws {
        let clock = ManualClock()
        try await withGatehouse(Self.configuration(), clock: clock) { gatehouse, client in
            for number in 0..<3 { try await Self.day(number, client) }
            clock.advance(by: 10 * 86_400)
            let store = try #require(gatehouse.env.store as? SQLStore)
            let before = try await store.retainedTableSizes()
            async let first = RetentionService(env: gatehouse.env).run()
            async let second = RetentionService(env: gatehouse.env).run()
            let (a, b) = try await (first, second)
            let after = try await store.retainedTableSizes()
            for target in RetentionTarget.allCases {
                #expect((a[target] ?? 0) + (b[target] ?? 0) == before[target]! - after[target]!, "\(target.rawValue)")
            }
            #expect(after[.expiredFlows] == 0 && after[.auditEvents] == 0 && after[.endedSessions] == 0)
        }
    }
}
