import Foundation

/// Bytes of a file read in chunks, one at a time: the readers of other systems' export files walk them without
/// holding the file in memory (a million users is a file of hundreds of megabytes).
final class ByteInput {
    private let read: () throws -> [UInt8]?
    private var buffer: [UInt8] = []
    private var position = 0
    /// Bytes consumed so far (for progress).
    private(set) var consumed = 0

    /// `read` gives the next chunk, or nil (or an empty chunk) at the end.
    init(read: @escaping () throws -> [UInt8]?) {
        self.read = read
    }

    convenience init(_ handle: FileHandle, chunkSize: Int = 1 << 16) {
        self.init { try handle.read(upToCount: chunkSize).map(Array.init) }
    }

    convenience init(_ bytes: [UInt8]) {
        var sent = false
        self.init {
            defer { sent = true }
            return sent ? nil : bytes
        }
    }

    /// The next byte without consuming it; nil at the end.
    func peek() throws -> UInt8? {
        if position == buffer.count {
            guard let chunk = try read(), !chunk.isEmpty else { return nil }
            buffer = chunk
            position = 0
        }
        return buffer[position]
    }

    /// The next byte; nil at the end.
    func next() throws -> UInt8? {
        guard let byte = try peek() else { return nil }
        position += 1
        consumed += 1
        return byte
    }

    /// Consumes whitespace (and a UTF-8 byte-order mark) and returns the next byte without consuming it.
    func peekAfterWhitespace() throws -> UInt8? {
        while let byte = try peek() {
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF: _ = try next()
            default: return byte
            }
        }
        return nil
    }
}

/// Why an export file could not be read on (the import stops there; what was imported before stays).
struct ExportFileError: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// The elements of one JSON array of a document read in chunks — the document itself when it is an array, or the
/// array under a key of its top-level object (`users` in Firebase's and Keycloak's exports) — each as the bytes of
/// one element. Other keys' values are skipped without being kept.
struct JSONArrayElements {
    private let input: ByteInput
    private let key: String?
    private var state = State.before
    /// An element larger than this is refused: a user record is a few kilobytes.
    static let maxElementSize = 1 << 20

    private enum State { case before, first, inside, done }

    init(_ input: ByteInput, key: String?) {
        self.input = input
        self.key = key
    }

    /// The next element's bytes, or nil after the array's last one.
    mutating func next() throws -> [UInt8]? {
        switch state {
        case .done:
            return nil
        case .before:
            try findArray()
            state = .first
            return try next()
        case .first, .inside:
            guard let byte = try input.peekAfterWhitespace() else { throw ExportFileError("the file ends inside the array of users: it is truncated") }
            if byte == UInt8(ascii: "]") {
                _ = try input.next()
                state = .done
                return nil
            }
            if state == .inside {
                guard byte == UInt8(ascii: ",") else { throw ExportFileError("expected , or ] between users, found \(Self.show(byte))") }
                _ = try input.next()
                _ = try input.peekAfterWhitespace()
            }
            state = .inside
            return try value(keeping: true)
        }
    }

    private mutating func findArray() throws {
        guard let key else {
            guard try input.peekAfterWhitespace() == UInt8(ascii: "[") else { throw ExportFileError("expected a JSON array of users") }
            _ = try input.next()
            return
        }
        guard try input.peekAfterWhitespace() == UInt8(ascii: "{") else { throw ExportFileError("expected a JSON object with a \"\(key)\" array") }
        _ = try input.next()
        var first = true
        while true {
            guard let byte = try input.peekAfterWhitespace() else { throw ExportFileError("the file ends before a \"\(key)\" array") }
            if byte == UInt8(ascii: "}") { throw ExportFileError("the file has no \"\(key)\" array") }
            if !first {
                guard byte == UInt8(ascii: ",") else { throw ExportFileError("expected , between the document's keys, found \(Self.show(byte))") }
                _ = try input.next()
                _ = try input.peekAfterWhitespace()
            }
            first = false
            guard try input.peek() == UInt8(ascii: "\"") else { throw ExportFileError("expected a key in the document's object") }
            let name = try value(keeping: true)
            guard try input.peekAfterWhitespace() == UInt8(ascii: ":") else { throw ExportFileError("expected : after a key") }
            _ = try input.next()
            if name.elementsEqual("\"\(key)\"".utf8), try input.peekAfterWhitespace() == UInt8(ascii: "[") {
                _ = try input.next()
                return
            }
            _ = try input.peekAfterWhitespace()
            _ = try value(keeping: false)
        }
    }

    /// Reads one JSON value, checking only what delimits it (the element is parsed properly afterwards); its bytes
    /// when `keeping`, else nothing.
    private func value(keeping: Bool) throws -> [UInt8] {
        var element: [UInt8] = []
        var depth = 0
        var inString = false
        var escaped = false
        var started = false
        while let byte = try input.peek() {
            if !inString, started, depth == 0 {
                // A scalar (number, true, false, null) ends at a delimiter.
                switch byte {
                case UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"), UInt8(ascii: ":"), 0x20, 0x09, 0x0A, 0x0D: return element
                default: break
                }
            }
            _ = try input.next()
            if keeping {
                element.append(byte)
                guard element.count <= Self.maxElementSize else { throw ExportFileError("a user record is larger than 1 MiB") }
            }
            started = true
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { return element }
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                guard depth >= 0 else { throw ExportFileError("unbalanced \(Self.show(byte))") }
                if depth == 0 { return element }
            default: break
            }
        }
        if started, !inString, depth == 0 { return element }
        throw ExportFileError("the file ends inside a value: it is truncated")
    }

    private static func show(_ byte: UInt8) -> String { (32..<127).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte \(byte)" }
}

/// Lines of text read in chunks (JSON lines: one record per line); blank lines are skipped.
struct TextLines {
    private let input: ByteInput
    static let maxLineSize = 1 << 20

    init(_ input: ByteInput) { self.input = input }

    mutating func next() throws -> [UInt8]? {
        while true {
            var line: [UInt8] = []
            var sawByte = false
            while let byte = try input.next() {
                sawByte = true
                if byte == 0x0A { break }
                line.append(byte)
                guard line.count <= Self.maxLineSize else { throw ExportFileError("a line is longer than 1 MiB") }
            }
            if line.last == 0x0D { line.removeLast() }
            if !sawByte { return nil }
            if line.contains(where: { ![0x20, 0x09, 0xEF, 0xBB, 0xBF].contains($0) }) { return line }
        }
    }
}

/// Records of an RFC 4180 CSV file read in chunks: fields separated by commas, records by CRLF or LF, a quoted
/// field may hold commas, newlines and `""` for a quote. Blank lines are skipped.
struct CSVRecords {
    private let input: ByteInput
    static let maxRecordSize = 1 << 20

    init(_ input: ByteInput) { self.input = input }

    mutating func next() throws -> [String]? {
        while true {
            guard try input.peek() != nil else { return nil }
            var fields: [String] = []
            var field: [UInt8] = []
            var size = 0
            var quoted = false
            var wasQuoted = false
            func endField() {
                fields.append(String(decoding: field, as: UTF8.self))
                field.removeAll(keepingCapacity: true)
                wasQuoted = false
            }
            reading: while let byte = try input.next() {
                size += 1
                guard size <= Self.maxRecordSize else { throw ExportFileError("a CSV record is longer than 1 MiB") }
                if quoted {
                    if byte == UInt8(ascii: "\"") {
                        if try input.peek() == UInt8(ascii: "\"") {
                            _ = try input.next()
                            field.append(byte)
                        } else {
                            quoted = false
                        }
                    } else {
                        field.append(byte)
                    }
                    continue
                }
                let beforeNewline = byte == 0x0D ? try input.peek() == 0x0A : false
                switch byte {
                case UInt8(ascii: ","): endField()
                case 0x0A: break reading
                case 0x0D where beforeNewline: continue
                case UInt8(ascii: "\"") where field.isEmpty && !wasQuoted:
                    quoted = true
                    wasQuoted = true
                default:
                    field.append(byte)
                }
            }
            if quoted { throw ExportFileError("the file ends inside a quoted CSV field: it is truncated") }
            endField()
            if fields.count == 1, fields[0].trimmingCharacters(in: .whitespaces).isEmpty { continue }
            return fields
        }
    }
}
