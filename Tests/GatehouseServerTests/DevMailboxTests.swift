import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

@Suite struct DevMailboxTests {
    @Test func mailboxListsMessagesNewestFirstAsJSON() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("mail@example.com")
            _ = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "mail@example.com"))
            let reply = try await client.call("/_dev/mailbox?to=MAIL@example.com", .get)
            #expect(reply.contentType == "application/json")
            let raw = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [[String: Any]])
            #expect(raw.count == 2)
            #expect(Set(raw[0].keys) == ["id", "to", "subject", "text", "html", "createdAt"])
            let entries = try reply.decode([MailboxEntry].self)
            let first = try #require(entries[0].link), second = try #require(entries[1].link)
            #expect(first.tokenId != second.tokenId)
            // Newest first: the second entry's (older, superseded) token fails, the first entry's works.
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: second.token, tokenId: second.tokenId)).status == .badRequest)
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: first.token, tokenId: first.tokenId)).status == .ok)
            #expect(entries[0].html.contains("<a href="))
            #expect(try await client.mailbox("other@example.com").isEmpty)
        }
    }

    @Test func mailboxHasAnHTMLView() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("html@example.com")
            let reply = try await client.call("/_dev/mailbox", .get)
            #expect(reply.status == .ok)
            #expect(reply.contentType?.hasPrefix("text/html") == true)
            #expect(reply.text.contains("Confirm your test-app account"))
            #expect(reply.text.contains("html@example.com"))
        }
    }

    @Test func mailboxIsAbsentUnlessEnabled() async throws {
        try await withGatehouse(testConfiguration(mailbox: false)) { _, client in
            for path in ["/_dev/mailbox", "/_dev/mailbox?to=a@example.com"] {
                let reply = try await client.call(path, .get)
                #expect(reply.status == .notFound)
                #expect(reply.error?.errorCode == .notFound)
            }
        }
    }
}
