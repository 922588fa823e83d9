import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct ConfirmationTests {
    @Test func aValidTokenConfirmsOnce() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("erin@example.com")
            let link = try await client.latestLink("erin@example.com")
            let confirm = ConfirmRequest(token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("confirm"), json: confirm).status == .ok)
            #expect(try await client.login("erin@example.com").status == .ok)

            let again = try await client.call(Path.local("confirm"), json: confirm)
            #expect(again.status == .badRequest)
            #expect(again.error?.errorCode == .badRequest)
            #expect(again.error?.error == "invalid token data")
        }
    }

    @Test func wrongUnknownAndMalformedTokensAreInvalidTokenData() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("frank@example.com")
            let link = try await client.latestLink("frank@example.com")
            let bad = [
                ConfirmRequest(token: String(repeating: "0", count: 64), tokenId: link.tokenId),
                ConfirmRequest(token: link.token, tokenId: "000000000000000000000000"),
                ConfirmRequest(token: link.token, tokenId: "not-an-id"),
                ConfirmRequest(token: "", tokenId: ""),
            ]
            for request in bad {
                let reply = try await client.call(Path.local("confirm"), json: request)
                #expect(reply.status == .badRequest)
                #expect(reply.error?.error == "invalid token data")
            }
            // None of that burned the real token.
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
        }
    }

    @Test func anExpiredTokenIsRefused() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            _ = try await client.register("gina@example.com")
            let link = try await client.latestLink("gina@example.com")
            clock.advance(by: 1801)  // tokenTTL is 1800 s
            let reply = try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId))
            #expect(reply.error?.error == "invalid token data")
            #expect(try await client.login("gina@example.com").status == .unauthorized)
        }
    }

    @Test func aResentTokenSupersedesTheOlderOne() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("hank@example.com")
            let first = try await client.latestLink("hank@example.com")
            #expect(try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "HANK@example.com")).status == .ok)
            let second = try await client.latestLink("hank@example.com")
            #expect(first.tokenId != second.tokenId)
            #expect(try await client.mailbox("hank@example.com").count == 2)

            let old = try await client.call(Path.local("confirm"), json: ConfirmRequest(token: first.token, tokenId: first.tokenId))
            #expect(old.error?.error == "invalid token data")
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: second.token, tokenId: second.tokenId)).status == .ok)
        }
    }

    @Test func resendRevealsNothingByDefault() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("ivy@example.com")
            _ = try await client.register("jack@example.com")

            let confirmed = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "ivy@example.com"))
            let pending = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "jack@example.com"))
            let unknown = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "nobody@example.com"))
            for reply in [confirmed, pending, unknown] {
                #expect(reply.status == .ok)
                #expect(reply.body == pending.body)
            }
            // No email to an unknown address; the confirmed one is told it is already confirmed.
            #expect(try await client.mailbox("nobody@example.com").isEmpty)
            let ivy = try await client.mailbox("ivy@example.com")
            #expect(ivy.first?.subject.contains("already confirmed") == true)
            #expect(ivy.first?.link == nil)
            #expect(try await client.mailbox("jack@example.com").count == 2)
        }
    }

    @Test func resendRevealsWhenTheAppAsks() async throws {
        try await withGatehouse(testConfiguration(reveal: true)) { _, client in
            _ = try await client.signUp("kim@example.com")
            let confirmed = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "kim@example.com"))
            #expect(confirmed.status == .conflict)
            #expect(confirmed.error?.errorCode == .userAlreadyConfirmed)
            let unknown = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "nobody@example.com"))
            #expect(unknown.status == .notFound)
            #expect(unknown.error?.errorCode == .userNotFound)
        }
    }

    /// An unknown address runs the same statements as a pending one (the token and email inserts are rolled back
    /// instead of committed), so the work, hence the timing, is the same, and nothing is left behind.
    @Test func unknownAddressesDoTheSameWorkAndLeaveNothing() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.register("leo@example.com")
            let recording = RecordingDatabase((gatehouse.env.store as! SQLStore).db)
            var env = gatehouse.env
            env.store = SQLStore(db: recording)
            let service = EmailPasswordService(env: env)

            for send in [service.resendConfirmation, service.sendPasswordReset] {
                // The audit log's reset_requested is written for both (it tells nothing either); set apart here.
                let isAudit = { (statement: String) in statement.hasPrefix("INSERT INTO audit_events") }
                try await send("test-app", "leo@example.com")
                let knownAll = recording.drain()
                try await send("test-app", "nobody@example.com")
                let unknownAll = recording.drain()
                #expect(knownAll.filter(isAudit).count == unknownAll.filter(isAudit).count)
                let known = knownAll.filter { !isAudit($0) }
                let unknown = unknownAll.filter { !isAudit($0) }
                #expect(known.count > 3)
                #expect(known.dropLast() == unknown.dropLast())
                #expect(known.last == "COMMIT")
                #expect(unknown.last == "ROLLBACK")
            }
            #expect(try await gatehouse.env.store.mailbox(recipient: "nobody@example.com", limit: 10).isEmpty)
        }
    }
}
