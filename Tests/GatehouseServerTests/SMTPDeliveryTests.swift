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

@Suite struct SMTPDeliveryTests {
    static let link = "https://gatehouse.test/app/test-app/confirm?token=0123456789abcdef0123456789abcdef0123456789abcdef&tokenId=65f1e0a2b3c4d5e6f7a8b9c0"

    static let message = OutboxMessage(
        id: "mail-1", appId: "test-app", kind: "confirmation", recipient: "ada@example.com",
        subject: "Bestätigen Sie Ihr Konto ✓",
        text: [
            "Willkommen! Bestätigen Sie Ihr Konto über diesen Link:",
            link,
            ".",
            ".a line that starts with a dot",
            "..and one with two",
            "trailing spaces   ",
            "= signs =3D and a long line: " + String(repeating: "lorem ipsum ", count: 120),
            "",
            "Gatehouse",
        ].joined(separator: "\n"),
        html: "<!doctype html><html><body><p>Willkommen!</p><p><a href=\"\(link.replacingOccurrences(of: "&", with: "&amp;"))\">Konto bestätigen</a></p><p>"
            + String(repeating: "Ein sehr langer Absatz ohne Zeilenumbruch. ", count: 60) + "</p>\n.\n</body></html>",
        createdAt: Date(), nextAttemptAt: Date()
    )

    @Test func deliversTheMessageWithItsHeadersAndBothParts() async throws {
        try await withSMTPServer { server in
            let start = Date()
            try await makeMailer(server).deliver(Self.message)
            let mail = try #require(try server.messages().first)
            #expect(try server.messages().count == 1)
            #expect(mail.mailFrom == "no-reply@example.com")
            #expect(mail.rcptTos == ["ada@example.com"])
            #expect(mail.extendedSMTP)
            #expect(mail.heloName?.isEmpty == false)
            #expect(!mail.tls)

            #expect(mail.headers["From"] == "Gatehouse <no-reply@example.com>")
            #expect(mail.headers["To"] == "ada@example.com")
            #expect(mail.headers["Subject"] == "Bestätigen Sie Ihr Konto ✓")
            #expect(mail.headers["MIME-Version"] == "1.0")
            #expect(try #require(mail.headers["Message-ID"]).wholeMatch(of: /<[0-9a-f]{32}@example\.com>/) != nil)
            let date = try #require(mail.headers["Date"])
            #expect(date.wholeMatch(of: /(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} \+0000/) != nil)
            let sent = try #require(rfc5322DateFormatter().date(from: date))
            #expect(abs(sent.timeIntervalSince(start)) < 60)

            #expect(mail.contentType == "multipart/alternative")
            #expect(mail.parts.map(\.contentType) == ["text/plain", "text/html"])
            #expect(mail.parts.map(\.charset) == ["utf-8", "utf-8"])
            #expect(mail.parts.first?.normalizedContent == Self.message.text)
            #expect(mail.parts.last?.normalizedContent == Self.message.html)
            // The link, token and tokenId included, comes out as it went in.
            #expect(mail.parts.first?.content.contains(Self.link) == true)
            #expect(mail.parts.last?.content.contains(Self.link.replacingOccurrences(of: "&", with: "&amp;")) == true)

            #expect(mail.bareLineFeeds == 0)
            #expect(mail.longestLine <= 998)
            // Lines that start with "." went through dot-stuffing and came out as they were: the lone "." did not end
            // the data early (both parts arrived whole), and the server un-stuffed it back.
            #expect(mail.rawLines.contains("."))
            #expect(mail.rawLines.contains(".a line that starts with a dot"))
        }
    }

    @Test func fallsBackToHELOWhenEHLOIsRefused() async throws {
        try await withSMTPServer(["--no-ehlo"]) { server in
            try await makeMailer(server).deliver(Self.message)
            let mail = try #require(try server.messages().first)
            #expect(!mail.extendedSMTP)
            #expect(mail.parts.first?.normalizedContent == Self.message.text)
        }
    }

    @Test func startTLSWithTheCertificateTrustedThroughCAFile() async throws {
        let certificate = try await TestCertificate.make(in: try temporaryDirectory())
        defer { certificate.remove() }
        try await withSMTPServer(["--starttls"] + certificate.serverArguments) { server in
            // By address (the certificate names 127.0.0.1) and by name (localhost).
            try await makeMailer(server, starttls: .required, caFile: certificate.certificate).deliver(Self.message)
            try await makeMailer(server, host: "localhost", starttls: .optional, caFile: certificate.certificate).deliver(Self.message)
            let mails = try server.messages()
            #expect(mails.count == 2)
            #expect(mails.allSatisfy { $0.tls && $0.extendedSMTP })
            #expect(mails.last?.parts.first?.normalizedContent == Self.message.text)
        }
    }

    @Test func implicitTLSForSMTPS() async throws {
        let certificate = try await TestCertificate.make(in: try temporaryDirectory())
        defer { certificate.remove() }
        try await withSMTPServer(["--implicit-tls", "--auth", "gate:keeper"] + certificate.serverArguments) { server in
            try await makeMailer(server, scheme: "smtps", host: "localhost", userInfo: "gate:keeper", caFile: certificate.certificate).deliver(Self.message)
            let mail = try #require(try server.messages().first)
            #expect(mail.tls)
            #expect(mail.authLogin == "gate")
        }
    }

    @Test func untrustedOrMisnamedCertificatesAreTransientFailures() async throws {
        let certificate = try await TestCertificate.make(in: try temporaryDirectory())
        let other = try await TestCertificate.make(in: try temporaryDirectory(), names: "DNS:elsewhere.test")
        defer {
            certificate.remove()
            other.remove()
        }
        try await withSMTPServer(["--starttls"] + certificate.serverArguments) { server in
            // The system's roots do not know a self-signed certificate.
            let untrusted = await deliveryFailure(of: try makeMailer(server, starttls: .required), delivering: Self.message)
            #expect(untrusted?.isTransient == true)
            #expect(untrusted?.reason.contains("TLS") == true, "\(String(describing: untrusted))")
            // Trusting another certificate does not help either.
            let wrongCA = await deliveryFailure(of: try makeMailer(server, starttls: .optional, caFile: other.certificate), delivering: Self.message)
            #expect(wrongCA?.isTransient == true)
            #expect(try server.messages().isEmpty)
        }
        try await withSMTPServer(["--starttls"] + other.serverArguments) { server in
            // Trusted, but issued for another name.
            let misnamed = await deliveryFailure(of: try makeMailer(server, host: "localhost", starttls: .required, caFile: other.certificate), delivering: Self.message)
            #expect(misnamed?.isTransient == true)
            #expect(misnamed?.reason.contains("TLS") == true, "\(String(describing: misnamed))")
            #expect(try server.messages().isEmpty)
        }
    }

    @Test func startTLSRequiredButNotOfferedIsATransientFailure() async throws {
        try await withSMTPServer { server in
            let failure = await deliveryFailure(of: try makeMailer(server, starttls: .required), delivering: Self.message)
            #expect(failure?.isTransient == true)
            #expect(failure?.reason.contains("does not offer STARTTLS") == true, "\(String(describing: failure))")
            // Optional: plain text then.
            try await makeMailer(server, starttls: .optional).deliver(Self.message)
            #expect(try server.messages().map(\.tls) == [false])
        }
    }

    @Test func startTLSNeverIgnoresTheOffer() async throws {
        let certificate = try await TestCertificate.make(in: try temporaryDirectory())
        defer { certificate.remove() }
        try await withSMTPServer(["--starttls"] + certificate.serverArguments) { server in
            try await makeMailer(server, starttls: .never).deliver(Self.message)
            #expect(try server.messages().map(\.tls) == [false])
        }
    }

    @Test func authPlainIsPreferredAndLoginIsUsedWhenItIsTheOnlyOne() async throws {
        let certificate = try await TestCertificate.make(in: try temporaryDirectory())
        defer { certificate.remove() }
        let password = "p@ss:w/rd %ü"
        let userInfo = "gate%2Bkeeper:" + password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let tls = ["--starttls"] + certificate.serverArguments
        try await withSMTPServer(tls + ["--auth", "gate+keeper:\(password)"]) { server in
            try await makeMailer(server, userInfo: userInfo, starttls: .required, caFile: certificate.certificate).deliver(Self.message)
            let mail = try #require(try server.messages().first)
            #expect(mail.authMechanism == "PLAIN")
            #expect(mail.authLogin == "gate+keeper")
            #expect(mail.tls)
        }
        try await withSMTPServer(tls + ["--auth", "gate+keeper:\(password)", "--auth-mechanisms", "LOGIN"]) { server in
            try await makeMailer(server, userInfo: userInfo, starttls: .required, caFile: certificate.certificate).deliver(Self.message)
            let mail = try #require(try server.messages().first)
            #expect(mail.authMechanism == "LOGIN")
            #expect(mail.authLogin == "gate+keeper")
        }
    }

    @Test func thePasswordNeverTravelsInPlainTextUnlessStartTLSIsNever() async throws {
        try await withSMTPServer(["--auth", "gate:keeper"]) { server in
            let refused = await deliveryFailure(of: try makeMailer(server, userInfo: "gate:keeper", starttls: .optional), delivering: Self.message)
            #expect(refused?.isTransient == true)
            #expect(refused?.reason.contains("unencrypted") == true, "\(String(describing: refused))")
            #expect(try server.messages().isEmpty)

            try await makeMailer(server, userInfo: "gate:keeper", starttls: .never).deliver(Self.message)
            #expect(try server.messages().map(\.authMechanism) == ["PLAIN"])
        }
    }

    /// Wrong credentials are the operator's to fix: the message is retried, not failed, and the reply is kept.
    @Test func wrongCredentialsAreRetriedWithTheServersReply() async throws {
        try await withSMTPServer(["--auth", "gate:keeper"]) { server in
            let failure = await deliveryFailure(of: try makeMailer(server, userInfo: "gate:wrong", starttls: .never), delivering: Self.message)
            #expect(failure?.isTransient == true)
            #expect(failure?.reason.contains("535 5.7.8 Authentication credentials invalid") == true, "\(String(describing: failure))")
            #expect(failure?.reason.contains("wrong") == false)
        }
    }

    @Test func aTransientReplyIsRetriedAndThenDelivered() async throws {
        try await withSMTPServer(["--fail", "451", "--fail-count", "1", "--fail-at", "data"]) { server in
            let mailer = try makeMailer(server)
            let failure = await deliveryFailure(of: mailer, delivering: Self.message)
            #expect(failure?.isTransient == true)
            #expect(failure?.reason.hasPrefix("451 4.3.0 Temporary failure, try again later (test server)") == true, "\(String(describing: failure))")
            #expect(try server.messages().isEmpty)
            try await mailer.deliver(Self.message)
            #expect(try server.messages().count == 1)
        }
    }

    @Test func aPermanentReplyCarriesTheServersReply() async throws {
        try await withSMTPServer(["--fail", "550", "--fail-at", "rcpt"]) { server in
            let failure = await deliveryFailure(of: try makeMailer(server), delivering: Self.message)
            #expect(failure?.summary == "permanent: 550 5.1.1 Mailbox unavailable (test server)")
            #expect(try server.messages().isEmpty)
        }
    }

    @Test func aSilentServerTimesOut() async throws {
        try await withSMTPServer(["--silent"]) { server in
            let start = ContinuousClock.now
            let failure = await deliveryFailure(of: try makeMailer(server, timeout: 1), delivering: Self.message)
            #expect(failure?.summary == "transient: 127.0.0.1 did not answer the greeting within 1 s")
            #expect(ContinuousClock.now - start < .seconds(10))
        }
    }

    @Test func aRefusedConnectionIsTransient() async throws {
        let port = try freePort()
        let mailer = try SMTPMailer(settings: MailSettings(smtpURL: "smtp://127.0.0.1:\(port)", starttls: .never, from: "a@example.com"), logger: quietLogger)
        let failure = await deliveryFailure(of: mailer, delivering: Self.message)
        #expect(failure?.isTransient == true)
        #expect(failure?.reason.hasPrefix("could not connect to 127.0.0.1:\(port)") == true, "\(String(describing: failure))")
    }

    @Test func anAddressSMTPCannotCarryIsPermanent() async throws {
        var message = Self.message
        message.recipient = "eve@example.com>\r\nRCPT TO:<mallory@example.com"
        let mailer = try SMTPMailer(settings: MailSettings(smtpURL: "smtp://127.0.0.1:1"), logger: quietLogger)
        #expect(await deliveryFailure(of: mailer, delivering: message)?.isTransient == false)
    }
}

// MARK: - End to end through the outbox
