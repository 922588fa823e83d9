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
