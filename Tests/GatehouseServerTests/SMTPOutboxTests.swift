import Foundation
import GatehouseDomain
import GatehouseTestSupport
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct SMTPOutboxTests {
    @Test func aRegistrationEmailWaitsForTheServerAndArrivesExactlyOnce() async throws {
        let port = try freePort()
        let configuration = {
            var configuration = testConfiguration(mailbox: false)
            configuration.mail = MailSettings(smtpURL: "smtp://127.0.0.1:\(port)", starttls: .never, from: "Gatehouse <no-reply@gatehouse.test>", timeout: 10)
            return configuration
        }()
        let clock = ManualClock()
        let gatehouse = try await AuthServer.open(configuration: configuration, clock: clock.clock, logger: quietLogger)
        do {
            // Without the application's own delivery service: this test drives the outbox, and two services draining
            // it at once could send a message twice.
            try await WithoutServices(base: gatehouse.makeApplication()).test(.router) { client in
                let mailer = try SMTPMailer(settings: configuration.mail, logger: quietLogger)
                let service = OutboxDeliveryService(store: gatehouse.env.store, transport: mailer, clock: clock.clock, logger: quietLogger)
                #expect(try await client.register("grace@example.com").status == .created)

                // The SMTP server is down: a transient failure, retried after a backoff.
                #expect(try await service.deliverDue() == 0)
                let waiting = try #require(try await gatehouse.env.store.mailbox(recipient: "grace@example.com", limit: 1).first)
                #expect(waiting.status == .pending)
                #expect(waiting.attempts == 1)
                // Refused, as a rule; reset by a peer when another process of the run happens to hold the port for a
                // moment. Either is a transient failure that names the server.
                #expect(waiting.lastError?.contains("127.0.0.1") == true, "\(String(describing: waiting.lastError))")
                clock.advance(by: 11)
                #expect(try await service.deliverDue() == 0)  // still down
                #expect(try await gatehouse.env.store.mailbox(recipient: "grace@example.com", limit: 1).first?.attempts == 2)

                try await withSMTPServer(port: port) { server in
                    #expect(try await service.deliverDue() == 0)  // backing off, though the server is up now
                    #expect(try server.messages().isEmpty)
                    clock.advance(by: 21)
                    #expect(try await service.deliverDue() == 1)
                    #expect(try await service.deliverDue() == 0)
                    let mails = try server.messages()
                    #expect(mails.count == 1)
                    let mail = try #require(mails.first)
                    #expect(mail.rcptTos == ["grace@example.com"])
                    #expect(mail.headers["From"] == "Gatehouse <no-reply@gatehouse.test>")

                    let stored = try #require(try await gatehouse.env.store.mailbox(recipient: "grace@example.com", limit: 1).first)
                    #expect(stored.status == .delivered)
                    #expect(mail.headers["Subject"] == stored.subject)
                    #expect(mail.parts.first?.normalizedContent == stored.text)
                    #expect(mail.parts.last?.normalizedContent == stored.html)

                    // The emailed link confirms the account.
                    let text = try #require(mail.parts.first?.content)
                    let token = try #require(text.firstMatch(of: /[?&]token=([0-9a-f]+)/)?.output.1)
                    let tokenId = try #require(text.firstMatch(of: /[?&]tokenId=([0-9a-f]+)/)?.output.1)
                    let confirm = try await client.call(Path.local("confirm"), json: ConfirmRequest(token: String(token), tokenId: String(tokenId)))
                    #expect(confirm.status == .ok)

                    // Delivered means done: nothing is sent again, however much later.
                    clock.advance(by: 3600)
                    #expect(try await service.deliverDue() == 0)
                    #expect(try server.messages().count == 1)
                }
            }
            try await gatehouse.close()
        } catch {
            try? await gatehouse.close()
            throw error
        }
    }
}
