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

// SMTP delivery: the MIME rendering and reply parsing as pure functions, then the client against a real SMTP server
// (Python's aiosmtpd, Tests/Tools/smtp_server.py) started per test, and the outbox end to end.

// MARK: - Rendering, parsing, settings (no server)

@Suite struct SMTPRenderingTests {
    static let date = Date(timeIntervalSince1970: 1_800_000_000)

    func render(subject: String = "Bestätigen Sie Ihr Konto ✓", text: String = "Hello", html: String = "<p>Hello</p>") throws -> String {
        MIMEMessage(
            from: try MailAddress(parsing: "Gatehouse <no-reply@example.com>"), to: "ada@example.com", subject: subject,
            text: text, html: html, date: Self.date, messageID: "0123abcd@example.com", boundary: "=_gatehouse_test"
        ).rendered
    }

    @Test func headersAndStructure() throws {
        let message = try render()
        let (head, body) = try #require(split(message))
        #expect(
            head == [
                "Date: Fri, 15 Jan 2027 08:00:00 +0000",
                "From: Gatehouse <no-reply@example.com>",
                "To: ada@example.com",
                "Subject: =?utf-8?B?QmVzdMOkdGlnZW4gU2llIElociBLb250byDinJM=?=",
                "Message-ID: <0123abcd@example.com>",
                "MIME-Version: 1.0",
                "Auto-Submitted: auto-generated",
                "Content-Type: multipart/alternative; boundary=\"=_gatehouse_test\"",
            ]
        )
        #expect(body.contains("--=_gatehouse_test\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nHello\r\n"))
        #expect(body.contains("--=_gatehouse_test\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>Hello</p>\r\n"))
        #expect(body.hasSuffix("\r\n--=_gatehouse_test--\r\n"))
        #expect(message.allSatisfy { $0.isASCII })
        #expect(!message.replacingOccurrences(of: "\r\n", with: "").contains("\n"))  // CRLF only
        #expect(!message.replacingOccurrences(of: "\r\n", with: "").contains("\r"))
    }

    @Test func randomMessageIDInTheFromDomainAndFreshBoundary() throws {
        let from = try MailAddress(parsing: "Gatehouse <no-reply@mail.example.com>")
        let one = MIMEMessage(from: from, to: "a@example.com", subject: "s", text: "t", html: "h")
        let two = MIMEMessage(from: from, to: "a@example.com", subject: "s", text: "t", html: "h")
        #expect(one.messageID.wholeMatch(of: /[0-9a-f]{32}@mail\.example\.com/) != nil)
        #expect(one.messageID != two.messageID)
        #expect(one.boundary.hasPrefix("=_") && one.boundary != two.boundary)
    }

    @Test func quotedPrintableRoundTripsWithShortLines() {
        let link = "https://gatehouse.test/app/test-app/confirm?token=0123456789abcdef0123456789abcdef0123456789abcdef&tokenId=0123456789abcdef"
        let text = [
            "Bestätigen Sie Ihr Konto ✓ 🇩🇪", link, ".", ".dot", "trailing space ", "trailing tab\t", "a=b",
            String(repeating: "é", count: 100), String(repeating: "x", count: 2000), "", "last",
        ].joined(separator: "\n")
        let encoded = MIME.quotedPrintable(text)
        #expect(encoded.allSatisfy { $0.isASCII })
        let lines = encoded.components(separatedBy: "\r\n")
        #expect(lines.allSatisfy { $0.utf8.count <= 76 })
        #expect(lines.allSatisfy { !$0.hasSuffix(" ") && !$0.hasSuffix("\t") })
        #expect(lines.contains("."))  // left for the SMTP layer to dot-stuff
        #expect(lines.contains("a=3Db"))
        #expect(lines.contains("trailing space=20"))
        #expect(decodeQuotedPrintable(encoded) == text)
        #expect(decodeQuotedPrintable(MIME.quotedPrintable("one\r\ntwo\rthree")) == "one\ntwo\nthree")
    }

    @Test func subjectIsPlainWhenASCIIAndEncodedWordsWhenNot() {
        #expect(MIME.unstructuredHeader("Subject", "Confirm your account") == "Subject: Confirm your account\r\n")

        let long = String(repeating: "Confirm your Gatehouse account ", count: 6).trimmingCharacters(in: .whitespaces)
        let folded = MIME.unstructuredHeader("Subject", long)
        #expect(folded.components(separatedBy: "\r\n").allSatisfy { $0.utf8.count <= 78 })
        #expect(folded.components(separatedBy: "\r\n").count > 2)
        #expect(unfold(folded) == "Subject: \(long)")

        let german = String(repeating: "Bestätigen Sie Ihr Konto ✓ ", count: 5) + "👩🏽‍💻"
        let encoded = MIME.unstructuredHeader("Subject", german)
        let lines = encoded.components(separatedBy: "\r\n").dropLast()
        #expect(lines.count > 1)
        #expect(lines.allSatisfy { $0.utf8.count <= 78 && $0.allSatisfy(\.isASCII) })
        #expect(decodeEncodedWords(String(unfold(encoded).dropFirst("Subject: ".count))) == german)

        // A line break in a subject cannot start a new header.
        #expect(MIME.unstructuredHeader("Subject", "Hi\r\nBcc: eve@example.com") == "Subject: Hi  Bcc: eve@example.com\r\n")
    }

    @Test func fromAddresses() throws {
        #expect(try MailAddress(parsing: "Gatehouse <no-reply@example.com>") == MailAddress(name: "Gatehouse", address: "no-reply@example.com"))
        #expect(try MailAddress(parsing: "no-reply@example.com") == MailAddress(name: nil, address: "no-reply@example.com"))
        #expect(try MailAddress(parsing: "<no-reply@localhost>") == MailAddress(name: nil, address: "no-reply@localhost"))
        let quoted = try MailAddress(parsing: "\"Example, Inc.\" <no-reply@example.com>")
        #expect(quoted.name == "Example, Inc.")
        #expect(quoted.headerValue == "\"Example, Inc.\" <no-reply@example.com>")
        let umlaut = try MailAddress(parsing: "Bücherei <no-reply@example.com>")
        #expect(umlaut.headerValue == "=?utf-8?B?QsO8Y2hlcmVp?= <no-reply@example.com>")
        for bad in ["Gatehouse", "Gatehouse <>", "Gatehouse <no-reply@example.com", "a b@example.com", "@example.com", "a@", "a@b..c", "<a@b.c>\r\nBcc: x@y.z"] {
            #expect(throws: MailAddress.ParseError.self, "\(bad)") { try MailAddress(parsing: bad) }
        }
    }

    @Test func dotStuffing() {
        #expect(dotStuffed(".first\r\nmiddle\r\n.\r\n..two\r\nend.\r\n") == "..first\r\nmiddle\r\n..\r\n...two\r\nend.\r\n")
        #expect(dotStuffed("no dots\r\n") == "no dots\r\n")
    }

    @Test func dateIsRFC5322InUTC() {
        #expect(MIME.rfc5322Date(Self.date) == "Fri, 15 Jan 2027 08:00:00 +0000")
        #expect(MIME.rfc5322Date(Date(timeIntervalSince1970: 951_782_400)) == "Tue, 29 Feb 2000 00:00:00 +0000")
    }

    @Test func multiLineRepliesArriveInAnyPieces() throws {
        let bytes = Array("220 smtp.example.com ESMTP ready\r\n250-smtp.example.com\r\n250-SIZE 1000\r\n250-AUTH=LOGIN\r\n250-AUTH PLAIN LOGIN\r\n250 STARTTLS\n354 go\r\n".utf8)
        var parser = SMTPReplyParser()
        var replies: [SMTPReply] = []
        for byte in bytes {
            parser.feed([byte])
            while let reply = try parser.next() { replies.append(reply) }
        }
        #expect(replies.map(\.code) == [220, 250, 354])
        #expect(replies[1].lines == ["smtp.example.com", "SIZE 1000", "AUTH=LOGIN", "AUTH PLAIN LOGIN", "STARTTLS"])
        #expect(replies[1].extensions["AUTH"].map(Set.init) == ["PLAIN", "LOGIN"])
        #expect(replies[1].extensions["STARTTLS"] == [])
        #expect(replies[1].extensions["SIZE"] == ["1000"])
        #expect(replies[0].description == "220 smtp.example.com ESMTP ready")
        #expect(!parser.hasBufferedData)

        var whole = SMTPReplyParser()
        whole.feed(bytes)
        #expect(try whole.next()?.code == 220)
        #expect(try whole.next()?.code == 250)
        #expect(try whole.next()?.code == 354)
        #expect(try whole.next() == nil)

        var partial = SMTPReplyParser()
        partial.feed(Array("250-first\r\n250 sec".utf8))
        #expect(try partial.next() == nil)
        #expect(partial.hasBufferedData)
    }

    @Test func malformedRepliesAreProtocolErrors() {
        for text in ["hello\r\n", "250-a\r\n550 b\r\n", "25\r\n", "2500 x\r\n", "999 x\r\n"] {
            #expect(throws: SMTPProtocolError.self, "\(text)") {
                var parser = SMTPReplyParser()
                parser.feed(Array(text.utf8))
                while try parser.next() != nil {}
            }
        }
    }

    @Test func smtpURLs() throws {
        let plain = try SMTPEndpoint(parsing: "smtp://mail.example.com")
        #expect(plain == SMTPEndpoint(host: "mail.example.com", port: 587, implicitTLS: false, credentials: nil))
        let implicit = try SMTPEndpoint(parsing: "SMTPS://mail.example.com")
        #expect(implicit.port == 465 && implicit.implicitTLS)
        let encoded = try SMTPEndpoint(parsing: "smtp://us%40er:p%3Ass%2F%40w%20rd@[::1]:2525")
        #expect(encoded.credentials == .init(user: "us@er", password: "p:ss/@w rd"))
        #expect(encoded.host == "::1" && encoded.port == 2525)
        #expect(encoded.redacted == "smtp://us@er@[::1]:2525")

        for bad in ["http://user:s3cret@mail.example.com", "smtp://user:s3cret@", "smtp://user:s3cret@mail.example.com/path", "smtp://user:s3cret@mail.example.com:99999", "user:s3cret"] {
            do {
                _ = try SMTPEndpoint(parsing: bad)
                Issue.record("\(bad) was accepted")
            } catch {
                #expect(error.key == "mail.smtp")
                #expect(!error.description.contains("s3cret"))
            }
        }
    }

    @Test func mailerChecksItsSettingsAtStart() async throws {
        func failure(_ settings: MailSettings) -> ConfigurationError? {
            do {
                _ = try SMTPMailer(settings: settings, logger: quietLogger)
                return nil
            } catch {
                return error as? ConfigurationError
            }
        }
        #expect(failure(MailSettings(smtpURL: "smtp://user:s3cret@mail.example.com")) == nil)
        #expect(failure(MailSettings(smtpURL: "smtps://user:s3cret@mail.example.com", starttls: .never)) == nil)
        #expect(failure(MailSettings(smtpURL: "ftp://user:s3cret@mail.example.com"))?.key == "mail.smtp")
        #expect(failure(MailSettings(smtpURL: "ftp://user:s3cret@mail.example.com"))?.description.contains("s3cret") == false)
        #expect(failure(MailSettings(smtpURL: "smtp://mail.example.com", from: "Gatehouse"))?.key == "mail.from")
        #expect(failure(MailSettings(smtpURL: "smtp://mail.example.com", timeout: 0))?.key == "mail.timeout")
        #expect(failure(MailSettings(smtpURL: "smtp://mail.example.com", caFile: "/nonexistent/ca.pem"))?.key == "mail.caFile")
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let notPEM = directory.appendingPathComponent("ca.pem")
        try Data("not a certificate".utf8).write(to: notPEM)
        #expect(failure(MailSettings(smtpURL: "smtp://mail.example.com", caFile: notPEM.path))?.key == "mail.caFile")
        let certificate = try await TestCertificate.make(in: directory)
        #expect(failure(MailSettings(smtpURL: "smtp://mail.example.com", caFile: certificate.certificate)) == nil)
    }

    /// Header lines until the blank line, and the rest.
    private func split(_ message: String) -> (head: [String], body: String)? {
        guard let range = message.range(of: "\r\n\r\n") else { return nil }
        return (message[..<range.lowerBound].components(separatedBy: "\r\n"), String(message[range.upperBound...]))
    }

    /// The header without its final CRLF, continuation lines joined.
    private func unfold(_ header: String) -> String {
        #expect(header.hasSuffix("\r\n"))
        return String(header.dropLast()).replacingOccurrences(of: "\r\n ", with: " ")  // "\r\n" is one Character
    }

    private func decodeEncodedWords(_ value: String) -> String {
        var bytes: [UInt8] = []
        for word in value.split(separator: " ") {
            #expect(word.hasPrefix("=?utf-8?B?") && word.hasSuffix("?=") && word.count <= 75)
            bytes += Data(base64Encoded: String(word.dropFirst(10).dropLast(2))) ?? Data()
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Quoted-printable decoding (RFC 2045) with CRLF hard breaks read back as `\n`.
func decodeQuotedPrintable(_ encoded: String) -> String {
    var bytes: [UInt8] = []
    let lines = encoded.components(separatedBy: "\r\n")
    for (index, line) in lines.enumerated() {
        var characters = Array(line.utf8)
        let soft = characters.last == UInt8(ascii: "=")
        if soft { characters.removeLast() }
        var position = 0
        while position < characters.count {
            if characters[position] == UInt8(ascii: "="), position + 2 < characters.count,
                let byte = UInt8(String(decoding: characters[position + 1...position + 2], as: UTF8.self), radix: 16)
            {
                bytes.append(byte)
                position += 3
            } else {
                bytes.append(characters[position])
                position += 1
            }
        }
        if !soft, index < lines.count - 1 { bytes.append(UInt8(ascii: "\n")) }
    }
    return String(decoding: bytes, as: UTF8.self)
}

// MARK: - Against a real SMTP server

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

/// Native auth codes travel the same outbox to a real SMTP server.
@Suite struct SMTPNativeAuthTests {
    @Test func aSignUpCodeArrivesByEmailAndCompletesTheSignUp() async throws {
        try await withSMTPServer { server in
            var configuration = nativeConfiguration()
            configuration.dev.mailbox = false
            configuration.mail = MailSettings(smtpURL: "smtp://127.0.0.1:\(server.port)", starttls: .never, from: "Gatehouse <no-reply@gatehouse.test>", timeout: 10)
            let clock = ManualClock()
            let mail = configuration.mail
            let gatehouse = try await AuthServer.open(configuration: configuration, clock: clock.clock, logger: quietLogger)
            do {
                try await WithoutServices(base: gatehouse.makeApplication()).test(.router) { client in
                    let mailer = try SMTPMailer(settings: mail, logger: quietLogger)
                    let service = OutboxDeliveryService(store: gatehouse.env.store, transport: mailer, clock: clock.clock, logger: quietLogger)
                    let ct1 = try #require(
                        try await client.nativeStep(.signUpStart, ["username": "kim@example.com", "challenge_type": allChallengeTypes]).continuationToken
                    )
                    let ct2 = try #require(
                        try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken
                    )
                    #expect(try await service.deliverDue() == 1)
                    let mail = try #require(try server.messages().first)
                    #expect(mail.rcptTos == ["kim@example.com"])
                    let text = try #require(mail.parts.first?.content)
                    let code = String(try #require(text.firstMatch(of: /(?m)^\s+(\d{8})\s*$/)?.output.1))
                    #expect(mail.headers["Subject"]?.hasSuffix(code) == true)
                    let done = try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
                    #expect(done.status == .ok, "\(done.text)")
                }
                try await gatehouse.close()
            } catch {
                try? await gatehouse.close()
                throw error
            }
        }
    }
}

/// An application minus its background services.
struct WithoutServices<Base: ApplicationProtocol>: ApplicationProtocol {
    let base: Base
    var responder: Base.Responder { get async throws { try await base.responder } }
    var configuration: ApplicationConfiguration { base.configuration }
    var logger: Logger { base.logger }
    var services: [any Service] { [] }
}

// MARK: - Helpers

/// A mailer for the test server: `smtp://[userInfo@]host:port`.
func makeMailer(
    _ server: SMTPTestServer,
    scheme: String = "smtp",
    host: String = "127.0.0.1",
    userInfo: String? = nil,
    starttls: MailSettings.StartTLS = .never,
    caFile: String? = nil,
    timeout: Int = 15
) throws -> SMTPMailer {
    let url = "\(scheme)://\(userInfo.map { "\($0)@" } ?? "")\(host):\(server.port)"
    return try SMTPMailer(
        settings: MailSettings(smtpURL: url, starttls: starttls, from: "Gatehouse <no-reply@example.com>", timeout: timeout, caFile: caFile),
        logger: quietLogger
    )
}

extension MailDeliveryError {
    /// `transient: reason` or `permanent: reason`.
    var summary: String { "\(isTransient ? "transient" : "permanent"): \(reason)" }
    var isTransient: Bool { if case .transient = self { true } else { false } }
    var reason: String {
        switch self {
        case .transient(let reason), .permanent(let reason): reason
        }
    }
}

/// The ``MailDeliveryError`` a delivery throws; nil (and a recorded issue) when it succeeds or throws anything else.
func deliveryFailure(of mailer: @autoclosure () throws -> SMTPMailer, delivering message: OutboxMessage) async -> MailDeliveryError? {
    do {
        try await mailer().deliver(message)
        Issue.record("the delivery succeeded")
        return nil
    } catch let error as MailDeliveryError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// A port nothing listens on (for now).
func freePort() throws -> Int {
    let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
    defer { try? channel.close().wait() }
    return try #require(channel.localAddress?.port)
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-smtp-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func rfc5322DateFormatter() -> DateFormatter {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
    return formatter
}

struct SMTPTestSetupError: Error, CustomStringConvertible {
    var description: String
}

/// A self-signed certificate and its key, made with the `openssl` command line tool.
struct TestCertificate {
    var directory: URL
    /// PEM paths.
    var certificate: String
    var key: String

    /// Makes one with openssl (``ChildProcess``: no thread blocked while it runs).
    static func make(in directory: URL, names: String = "DNS:localhost,IP:127.0.0.1") async throws -> TestCertificate {
        let certificate = directory.appendingPathComponent("cert-\(UUID().uuidString).pem").path
        let key = directory.appendingPathComponent("key-\(UUID().uuidString).pem").path
        let result = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=Gatehouse test", "-addext", "subjectAltName=\(names)",
        ], within: .seconds(60))
        guard result.status == 0 else { throw SMTPTestSetupError(description: "openssl failed: \(result.stderr)") }
        return TestCertificate(directory: directory, certificate: certificate, key: key)
    }

    var serverArguments: [String] { ["--cert", certificate, "--key", key] }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// One message as the test server received it (see Tests/Tools/smtp_server.py).
struct ReceivedMail: Decodable {
    struct Part: Decodable {
        var contentType: String
        var charset: String?
        var transferEncoding: String?
        /// Decoded by Python's `email` package.
        var content: String
        /// With CRLF line breaks as `\n`, as Gatehouse composes text.
        var normalizedContent: String { content.replacingOccurrences(of: "\r\n", with: "\n") }
    }

    var mailFrom: String
    var mailOptions: [String]
    var rcptTos: [String]
    var heloName: String?
    var extendedSMTP: Bool
    var tls: Bool
    var tlsVersion: String?
    var authMechanism: String?
    var authLogin: String?
    var headers: [String: String]
    var contentType: String
    var parts: [Part]
    var rawLines: [String]
    var bareLineFeeds: Int
    var longestLine: Int
}

/// `Tests/Tools/smtp_server.py` running under `GATEHOUSE_PYTHON`, on 127.0.0.1.
final class SMTPTestServer: @unchecked Sendable {
    let process: Process
    let directory: URL
    let mailDirectory: URL
    let port: Int
    private let input: Pipe

    static var python: String {
        get throws {
            guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"], !python.isEmpty else {
                throw SMTPTestSetupError(
                    description: """
                        GATEHOUSE_PYTHON is not set. The SMTP tests run a real SMTP server (aiosmtpd) from \
                        Tests/Tools/smtp_server.py and need a Python that has it:
                            python3 -m venv .build-venv && .build-venv/bin/pip install aiosmtpd
                            GATEHOUSE_PYTHON=$PWD/.build-venv/bin/python swift test
                        (the project's test script does this for you)
                        """
                )
            }
            return python
        }
    }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tools/smtp_server.py").path
    }

    private init(process: Process, directory: URL, port: Int, input: Pipe) {
        self.process = process
        self.directory = directory
        self.mailDirectory = directory.appendingPathComponent("mail")
        self.port = port
        self.input = input
    }

    /// Starts the server and waits (at most 30 s) until it listens.
    static func start(_ arguments: [String] = [], port: Int = 0) async throws -> SMTPTestServer {
        let directory = try temporaryDirectory()
        let output = directory.appendingPathComponent("stdout.txt")
        let errors = directory.appendingPathComponent("stderr.txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        let process = Process()
        let input = Pipe()
        do {
            process.executableURL = URL(fileURLWithPath: try python)
            process.arguments = ["-u", script, "--dir", directory.appendingPathComponent("mail").path, "--port", "\(port)"] + arguments
            process.standardOutput = try FileHandle(forWritingTo: output)
            process.standardError = try FileHandle(forWritingTo: errors)
            // The server exits when this pipe closes: when the test process ends, however it ends.
            process.standardInput = input
            try process.run()
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                let printed = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
                if let match = printed.firstMatch(of: /READY (\d+)/), let bound = Int(match.output.1) {
                    return SMTPTestServer(process: process, directory: directory, port: bound, input: input)
                }
                guard process.isRunning else {
                    let log = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
                    throw SMTPTestSetupError(description: "smtp_server.py exited with status \(process.terminationStatus):\n\(log)")
                }
                guard ContinuousClock.now < deadline else {
                    throw SMTPTestSetupError(description: "smtp_server.py did not start listening within 30 s")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        } catch {
            stop(process, input: input, directory: directory)
            throw error
        }
    }

    /// Ends the server, waits for it, and removes its folder.
    func stop() {
        Self.stop(process, input: input, directory: directory)
    }

    /// SIGKILL, not `terminate()`'s SIGTERM: a child started from a test's worker thread inherits its signal mask,
    /// which blocks SIGTERM (the script unblocks it, but nothing is left to chance here).
    private static func stop(_ process: Process, input: Pipe, directory: URL) {
        try? input.fileHandleForWriting.close()
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Every message received so far, in order.
    func messages() throws -> [ReceivedMail] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: mailDirectory.path)) ?? []
        return try names.filter { $0.hasSuffix(".json") }.sorted().map { name in
            try JSONDecoder().decode(ReceivedMail.self, from: Data(contentsOf: mailDirectory.appendingPathComponent(name)))
        }
    }
}

/// Runs `body` with a fresh SMTP server, and stops the server afterwards, whatever happens.
func withSMTPServer<T>(_ arguments: [String] = [], port: Int = 0, _ body: (SMTPTestServer) async throws -> T) async throws -> T {
    let server = try await SMTPTestServer.start(arguments, port: port)
    do {
        let result = try await body(server)
        server.stop()
        return result
    } catch {
        server.stop()
        throw error
    }
}
