import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

@Suite struct OutboxDeliveryTests {
    final class Transport: MailTransport, @unchecked Sendable {
        let lock = NSLock()
        var delivered: [String] = []
        var failures: [MailDeliveryError] = []
        func deliver(_ message: OutboxMessage) async throws {
            try lock.withLock {
                if !failures.isEmpty { throw failures.removeFirst() }
                delivered.append(message.recipient)
            }
        }
    }

    /// A Gatehouse without the dev mailbox (its own delivery service would race the test's) and a delivery service
    /// over a scripted transport, on `clock`.
    func withOutbox(
        clock: ManualClock,
        _ body: @Sendable (AuthServer, any TestClientProtocol, Transport, OutboxDeliveryService) async throws -> Void
    ) async throws {
        try await withGatehouse(testConfiguration(mailbox: false), clock: clock) { gatehouse, client in
            let transport = Transport()
            let service = OutboxDeliveryService(store: gatehouse.env.store, transport: transport, clock: clock.clock, logger: quietLogger)
            try await body(gatehouse, client, transport, service)
        }
    }

    @Test func deliversOnceRetriesTransientFailuresAndStopsOnPermanentOnes() async throws {
        let clock = ManualClock()
        try await withOutbox(clock: clock) { gatehouse, client, transport, service in
            _ = try await client.register("one@example.com")
            #expect(try await service.deliverDue() == 1)
            #expect(try await service.deliverDue() == 0)  // never sent twice
            #expect(transport.delivered == ["one@example.com"])

            transport.failures = [.transient("421 try later")]
            _ = try await client.register("two@example.com")
            #expect(try await service.deliverDue() == 0)
            #expect(try await service.deliverDue() == 0)  // backing off
            clock.advance(by: 11)
            #expect(try await service.deliverDue() == 1)
            #expect(transport.delivered == ["one@example.com", "two@example.com"])

            transport.failures = [.permanent("550 no such mailbox")]
            _ = try await client.register("three@example.com")
            #expect(try await service.deliverDue() == 0)
            clock.advance(by: 3600)
            #expect(try await service.deliverDue() == 0)
            let failed = try #require(try await gatehouse.env.store.mailbox(recipient: "three@example.com", limit: 1).first)
            #expect(failed.status == .failed)
            #expect(failed.lastError == "550 no such mailbox")
        }
    }

    /// An SMTP outage longer than the backoff: retries wait at most 15 minutes each and go on for a day; then the
    /// message is kept as failed, listed for the operator, and sent when retried. Nothing is dropped.
    @Test func mailPastItsRetryBudgetIsKeptListedAndCanBeRetried() async throws {
        let clock = ManualClock()
        try await withOutbox(clock: clock) { gatehouse, client, transport, service in
            _ = try await client.register("outage@example.com")
            transport.failures = Array(repeating: .transient("421 try later"), count: 1000)
            var attempts = 0
            var waits: [TimeInterval] = []
            var last = clock.now
            // Move to each due time in turn, as the poller would, for a day and a bit.
            for _ in 0..<400 {
                let pending = try #require(try await gatehouse.env.store.mailbox(recipient: "outage@example.com", limit: 1).first)
                guard pending.status == .pending else { break }
                if pending.nextAttemptAt > clock.now { clock.advance(by: pending.nextAttemptAt.timeIntervalSince(clock.now)) }
                waits.append(clock.now.timeIntervalSince(last))
                last = clock.now
                _ = try await service.deliverDue()
                attempts += 1
            }
            #expect(waits.dropFirst().allSatisfy { $0 <= 900 }, "\(waits)")
            #expect(attempts > 90, "a day of retries at most 15 minutes apart: \(attempts)")
            let failed = try await gatehouse.failedMail()
            #expect(failed.map(\.recipient) == ["outage@example.com"])
            #expect(failed.first?.lastError == "421 try later")
            // The operator retries once the mail server is back.
            transport.failures = []
            #expect(try await gatehouse.retryFailedMail(ids: failed.map(\.id)) == 1)
            #expect(try await service.deliverDue() == 1)
            #expect(transport.delivered == ["outage@example.com"])
            #expect(try await gatehouse.failedMail().isEmpty)
        }
    }

    /// Two senders (as two instances would) drain one outbox together: every message goes out exactly once. On
    /// PostgreSQL they claim rows with FOR UPDATE SKIP LOCKED on separate connections.
    @Test func twoSendersDeliverEachMessageExactlyOnce() async throws {
        let clock = ManualClock()
        try await withGatehouse(testConfiguration(mailbox: false), clock: clock) { gatehouse, _ in
            for i in 0..<40 {
                try await gatehouse.env.store.enqueue(OutboxMessage(
                    id: Secrets.objectID(), appId: "test-app", kind: "confirmation", recipient: "user\(i)@example.com",
                    subject: "s", text: "t", html: "h", createdAt: clock.now, nextAttemptAt: clock.now
                ))
            }
            let transport = Transport()
            let senders = (0..<2).map { _ in
                OutboxDeliveryService(store: gatehouse.env.store, transport: transport, clock: clock.clock, logger: quietLogger)
            }
            let delivered = try await withThrowingTaskGroup(of: Int.self) { group in
                for sender in senders {
                    group.addTask {
                        var total = 0
                        for _ in 0..<5 { total += try await sender.deliverDue() }
                        return total
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(delivered == 40)
            #expect(transport.delivered.count == 40)
            #expect(Set(transport.delivered).count == 40)
        }
    }

    /// A claim left by a sender that died is taken over once its lease runs out.
    @Test func anAbandonedClaimIsTakenOverAfterItsLease() async throws {
        let clock = ManualClock()
        try await withGatehouse(testConfiguration(mailbox: false), clock: clock) { gatehouse, client in
            _ = try await client.register("lease@example.com")
            let claimed = try await gatehouse.env.store.claimDueMail(now: clock.now, leaseUntil: clock.now.addingTimeInterval(300), limit: 10)
            #expect(claimed.count == 1)
            let transport = Transport()
            let sender = OutboxDeliveryService(store: gatehouse.env.store, transport: transport, clock: clock.clock, logger: quietLogger)
            #expect(try await sender.deliverDue() == 0)  // still claimed by the "dead" sender
            clock.advance(by: 301)
            #expect(try await sender.deliverDue() == 1)
            #expect(transport.delivered == ["lease@example.com"])
        }
    }
}
