import Foundation
import GatehouseDomain

/// One SMTP reply (RFC 5321 §4.2): a three-digit code and one or more lines of text (`250-…` lines continue,
/// `250 …` ends it).
struct SMTPReply: Sendable, Hashable, CustomStringConvertible {
    var code: Int
    /// The text of each line, after the code and separator.
    var lines: [String]

    /// `2xx`: done.
    var isPositiveCompletion: Bool { (200..<300).contains(code) }
    /// `3xx`: go on (354 after DATA, 334 during AUTH).
    var isPositiveIntermediate: Bool { (300..<400).contains(code) }
    /// `4xx`: try again later.
    var isTransientFailure: Bool { (400..<500).contains(code) }
    /// `5xx`: don't try again.
    var isPermanentFailure: Bool { (500..<600).contains(code) }

    /// The lines' text joined by spaces.
    var text: String { lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ") }

    /// `550 5.1.1 No such user`.
    var description: String { text.isEmpty ? "\(code)" : "\(code) \(text)" }

    /// The EHLO keywords and their parameters (every line but the first), keyed by upper-cased keyword:
    /// `AUTH PLAIN LOGIN` → `["AUTH": ["PLAIN", "LOGIN"]]`. The old `AUTH=PLAIN` form counts too.
    var extensions: [String: [String]] {
        var result: [String: [String]] = [:]
        for line in lines.dropFirst() {
            var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard !words.isEmpty else { continue }
            var keyword = words.removeFirst().uppercased()
            if keyword.hasPrefix("AUTH=") {
                words.insert(String(keyword.dropFirst(5)), at: 0)
                keyword = "AUTH"
            }
            result[keyword, default: []] += words
        }
        return result
    }
}

/// A protocol violation: a reply that is not SMTP.
struct SMTPProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    var description: String
}

/// Turns the bytes a server sends into ``SMTPReply`` values. Lines end in CRLF (a bare LF is accepted); replies
/// may arrive in any pieces, several at once.
struct SMTPReplyParser: Sendable {
    /// RFC 5321 allows 512 octets per reply line; servers write longer ones, but not this long.
    static let maxLineLength = 8192
    /// A reply of more lines than this is not a reply.
    static let maxLines = 1000

    private var buffer: [UInt8] = []
    private var scanned = 0
    private var code: Int?
    private var lines: [String] = []

    init() {}

    /// Whether bytes or a partial reply are waiting: after a STARTTLS `220`, that would be an injection attempt.
    var hasBufferedData: Bool { !buffer.isEmpty || !lines.isEmpty }

    mutating func feed(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete reply, or nil when more bytes are needed.
    mutating func next() throws(SMTPProtocolError) -> SMTPReply? {
        while let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
            var line = buffer[..<newline]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            let lineBytes = Array(line)
            buffer.removeSubrange(...newline)
            scanned = 0
            if let reply = try accept(lineBytes) { return reply }
        }
        scanned = buffer.count
        if buffer.count > Self.maxLineLength {
            throw SMTPProtocolError(description: "the server sent a reply line longer than \(Self.maxLineLength) bytes")
        }
        return nil
    }

    private mutating func accept(_ line: [UInt8]) throws(SMTPProtocolError) -> SMTPReply? {
        guard line.count >= 3, line[0..<3].allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let lineCode = Int(String(decoding: line[0..<3], as: UTF8.self)), (200...599).contains(lineCode)
        else {
            throw SMTPProtocolError(description: "the server sent a line that is not an SMTP reply: \"\(Self.printable(line.prefix(80)))\"")
        }
        let separator = line.count > 3 ? line[3] : UInt8(ascii: " ")
        guard separator == UInt8(ascii: " ") || separator == UInt8(ascii: "-") else {
            throw SMTPProtocolError(description: "the server sent a malformed reply line: \"\(Self.printable(line.prefix(80)))\"")
        }
        if let code, code != lineCode {
            throw SMTPProtocolError(description: "the server mixed reply codes \(code) and \(lineCode) in one reply")
        }
        code = lineCode
        lines.append(Self.printable(line.dropFirst(4)))
        guard lines.count <= Self.maxLines else {
            throw SMTPProtocolError(description: "the server sent a reply of more than \(Self.maxLines) lines")
        }
        guard separator == UInt8(ascii: " ") else { return nil }
        let reply = SMTPReply(code: lineCode, lines: lines)
        code = nil
        lines = []
        return reply
    }

    /// UTF-8 text with control characters replaced, fit for a log line or an error message.
    private static func printable(_ bytes: some Collection<UInt8>) -> String {
        String(String.UnicodeScalarView(String(decoding: bytes, as: UTF8.self).unicodeScalars.map {
            $0.properties.generalCategory == .control ? "?" : $0
        }))
    }
}
