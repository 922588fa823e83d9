import Foundation
import GatehouseDomain

/// A mailbox as written in a `From` header: an optional display name and an address, parsed from the `mail.from`
/// setting (`Gatehouse <no-reply@example.com>`, `"Example, Inc." <no-reply@example.com>` or `no-reply@example.com`).
struct MailAddress: Sendable, Hashable {
    /// The display name, unquoted; nil when there is none.
    var name: String?
    var address: String

    struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        var description: String
    }

    init(name: String?, address: String) {
        self.name = name
        self.address = address
    }

    init(parsing text: String) throws(ParseError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let open = trimmed.lastIndex(of: "<") {
            guard trimmed.hasSuffix(">") else {
                throw ParseError(description: "expected an address like Name <no-reply@example.com>")
            }
            let inner = String(trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)])
            var name = trimmed[..<open].trimmingCharacters(in: .whitespaces)
            if name.count >= 2, name.hasPrefix("\""), name.hasSuffix("\"") {
                name = String(name.dropFirst().dropLast())
                    .replacingOccurrences(of: "\\\"", with: "\"")
                    .replacingOccurrences(of: "\\\\", with: "\\")
            }
            self.name = name.isEmpty ? nil : name
            self.address = inner.trimmingCharacters(in: .whitespaces)
        } else {
            self.name = nil
            self.address = trimmed
        }
        if let name, name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw ParseError(description: "the display name contains control characters")
        }
        guard Self.isValidMailbox(address) else {
            throw ParseError(description: "\"\(address)\" is not an address like no-reply@example.com")
        }
    }

    /// The part after the `@`.
    var domain: String {
        guard let at = address.lastIndex(of: "@") else { return address }
        return String(address[address.index(after: at)...])
    }

    /// Whether the address needs the SMTPUTF8 extension (RFC 6531) to travel in an envelope.
    var needsSMTPUTF8: Bool { !address.allSatisfy(\.isASCII) }

    /// The header value: `Name <address>`, the name quoted or RFC 2047-encoded as needed.
    var headerValue: String {
        guard let name, !name.isEmpty else { return address }
        return "\(MIME.phrase(name)) <\(address)>"
    }

    /// What an SMTP envelope (`MAIL FROM:<…>`, `RCPT TO:<…>`) may carry: one `@` with a non-empty local part and a
    /// domain of labels, no spaces, controls or characters that would break out of `<…>` or a header.
    static func isValidMailbox(_ address: String) -> Bool {
        guard address.utf8.count <= 254, let at = address.lastIndex(of: "@") else { return false }
        let local = address[..<at]
        let domain = address[address.index(after: at)...]
        guard !local.isEmpty, local.utf8.count <= 64, !domain.isEmpty else { return false }
        let forbidden: Set<Character> = ["<", ">", "(", ")", "[", "]", ",", ";", ":", "\\", "\"", "@"]
        guard !address.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        else { return false }
        guard !local.contains(where: { forbidden.contains($0) }) else { return false }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63
                && label.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || !$0.isASCII }
        }
    }
}

/// One email as it is handed to an SMTP server (RFC 5322 + MIME): `multipart/alternative` with a plain text and an
/// HTML part, both UTF-8 in quoted-printable, CRLF line endings, no line longer than 78 characters except where a
/// header holds an unbreakable word. Pure: the date, Message-ID and boundary come in, so the output is testable.
struct MIMEMessage: Sendable, Hashable {
    var from: MailAddress
    /// The recipient's address, as the envelope carries it.
    var to: String
    var subject: String
    var text: String
    var html: String
    var date: Date
    /// Without angle brackets: `random@example.com`.
    var messageID: String
    /// Must not occur in the encoded parts: one starting with `=_` cannot, quoted-printable never writes `=_`.
    var boundary: String

    /// A message with a fresh random Message-ID (in the `from` domain) and boundary.
    init(from: MailAddress, to: String, subject: String, text: String, html: String, date: Date = Date()) {
        self.init(
            from: from, to: to, subject: subject, text: text, html: html, date: date,
            messageID: "\(MIME.randomHex(bytes: 16))@\(MIME.messageIDDomain(from.domain))",
            boundary: "=_gatehouse_\(MIME.randomHex(bytes: 12))"
        )
    }

    init(from: MailAddress, to: String, subject: String, text: String, html: String, date: Date, messageID: String, boundary: String) {
        self.from = from
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
        self.date = date
        self.messageID = messageID
        self.boundary = boundary
    }

    /// The message, headers and body, with CRLF line endings and a final CRLF. Not yet dot-stuffed.
    var rendered: String {
        var out = ""
        func header(_ name: String, _ value: String) { out += "\(name): \(value)\r\n" }
        header("Date", MIME.rfc5322Date(date))
        header("From", from.headerValue)
        header("To", to)
        out += MIME.unstructuredHeader("Subject", subject)
        header("Message-ID", "<\(messageID)>")
        header("MIME-Version", "1.0")
        // RFC 3834: tells auto-responders (vacation replies) not to answer.
        header("Auto-Submitted", "auto-generated")
        header("Content-Type", "multipart/alternative; boundary=\"\(boundary)\"")
        out += "\r\n"
        out += "This is a multi-part message in MIME format.\r\n"
        for (type, content) in [("text/plain", text), ("text/html", html)] {
            out += "\r\n--\(boundary)\r\n"
            header("Content-Type", "\(type); charset=utf-8")
            header("Content-Transfer-Encoding", "quoted-printable")
            out += "\r\n"
            out += MIME.quotedPrintable(content)
        }
        out += "\r\n--\(boundary)--\r\n"
        return out
    }
}

/// Encoders for MIME messages.
enum MIME {
    /// Quoted-printable (RFC 2045 §6.7) of UTF-8 text. Line breaks (`\n`, `\r\n` or `\r`) become CRLF; encoded lines
    /// are at most 76 characters, with soft breaks (`=` at the end) in long ones. A leading `.` is left as it is:
    /// dot-stuffing is the SMTP layer's job. No trailing CRLF.
    static func quotedPrintable(_ text: String) -> String {
        let lines = text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .split(separator: "\n", omittingEmptySubsequences: false)
        var out = ""
        out.reserveCapacity(text.utf8.count * 11 / 10)
        for (index, line) in lines.enumerated() {
            if index > 0 { out += "\r\n" }
            let bytes = Array(line.utf8)
            var width = 0
            for (position, byte) in bytes.enumerated() {
                let isLast = position == bytes.count - 1
                let token: String
                switch byte {
                case 0x20, 0x09:
                    // Whitespace at the end of a line would be stripped in transit.
                    token = isLast ? hexEscape(byte) : String(UnicodeScalar(byte))
                case 33...60, 62...126:
                    token = String(UnicodeScalar(byte))
                default:
                    token = hexEscape(byte)
                }
                // 76 per line; a soft break needs one of them for its `=`.
                let limit = isLast ? 76 : 75
                if width + token.utf8.count > limit {
                    out += "=\r\n"
                    width = 0
                }
                out += token
                width += token.utf8.count
            }
        }
        return out
    }

    private static func hexEscape(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return "=\(digits[Int(byte >> 4)])\(digits[Int(byte & 0x0F)])"
    }

    /// An unstructured header (`Subject`) as one or more lines ending in CRLF: plain and folded at spaces when it is
    /// printable ASCII, else RFC 2047 `=?utf-8?B?…?=` words, one per line, each whole characters.
    static func unstructuredHeader(_ name: String, _ value: String) -> String {
        // A header cannot hold a line break; a subject never needs one.
        let value = String(
            String.UnicodeScalarView(
                value.unicodeScalars.map { $0.properties.generalCategory == .control || $0 == "\u{2028}" || $0 == "\u{2029}" ? " " : $0 }
            )
        )
        let printableASCII = value.unicodeScalars.allSatisfy { (0x20...0x7E).contains($0.value) }
        let words = value.split(separator: " ", omittingEmptySubsequences: false)
        if printableASCII, !value.contains("=?"), words.allSatisfy({ $0.utf8.count <= 900 }), value.first != " " {
            return fold("\(name): ", words: words.map(String.init))
        }
        return "\(name): " + encodedWords(value).joined(separator: "\r\n ") + "\r\n"
    }

    /// `words` after `start`, separated by single spaces, folded before a space when a line would pass 78.
    private static func fold(_ start: String, words: [String]) -> String {
        var out = start
        var width = start.utf8.count
        for (index, word) in words.enumerated() {
            if index == 0 {
                out += word
                width += word.utf8.count
            } else if width + 1 + word.utf8.count > 78, width > start.utf8.count {
                out += "\r\n \(word)"
                width = 1 + word.utf8.count
            } else {
                out += " \(word)"
                width += 1 + word.utf8.count
            }
        }
        return out + "\r\n"
    }

    /// RFC 2047 B-encoded words of at most 75 characters (42 bytes of UTF-8 each), never splitting a character:
    /// a grapheme cluster when it fits, else a Unicode scalar.
    static func encodedWords(_ value: String) -> [String] {
        let maxBytes = 42
        var chunks: [[UInt8]] = []
        var current: [UInt8] = []
        func append(_ bytes: [UInt8]) {
            if current.count + bytes.count > maxBytes, !current.isEmpty {
                chunks.append(current)
                current = []
            }
            current += bytes
        }
        for character in value {
            let bytes = Array(String(character).utf8)
            if bytes.count <= maxBytes {
                append(bytes)
            } else {
                for scalar in character.unicodeScalars { append(Array(String(scalar).utf8)) }
            }
        }
        if !current.isEmpty || chunks.isEmpty { chunks.append(current) }
        return chunks.map { "=?utf-8?B?\(Data($0).base64EncodedString())?=" }
    }

    /// A display name for `From`: as it is when it is made of RFC 5322 atoms, quoted when it holds specials, encoded
    /// when it is not ASCII.
    static func phrase(_ name: String) -> String {
        let atext = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~ ")
        if name.allSatisfy({ atext.contains($0) }), !name.contains("=?"), !name.hasPrefix(" "), !name.hasSuffix(" ") {
            return name
        }
        if name.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) {
            return "\"" + name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return encodedWords(name).joined(separator: " ")
    }

    /// `Tue, 04 Nov 2025 09:05:00 +0000` (RFC 5322 §3.3), in UTC.
    static func rfc5322Date(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int?) -> String { String(format: "%02d", value ?? 0) }
        return "\(days[(c.weekday ?? 1) - 1]), \(two(c.day)) \(months[(c.month ?? 1) - 1]) \(c.year ?? 1970) "
            + "\(two(c.hour)):\(two(c.minute)):\(two(c.second)) +0000"
    }

    static func randomHex(bytes: Int) -> String {
        Secrets.hex(Secrets.randomBytes(bytes))
    }

    /// The right-hand side of a Message-ID: the From domain when it is plain ASCII (an internationalised domain
    /// would need IDNA, which Foundation lacks), else `gatehouse.invalid`.
    static func messageIDDomain(_ domain: String) -> String {
        domain.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }) && !domain.isEmpty
            ? domain : "gatehouse.invalid"
    }
}

/// SMTP transparency (RFC 5321 §4.5.2): lines starting with `.` get another `.`. `data` has CRLF line endings.
func dotStuffed(_ data: String) -> String {
    var out = data.hasPrefix(".") ? "." : ""
    out += data.replacingOccurrences(of: "\r\n.", with: "\r\n..")
    return out
}
