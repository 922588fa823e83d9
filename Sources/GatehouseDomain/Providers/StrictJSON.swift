import Foundation

/// Finds what makes a JSON text one that parsers read differently, in text Foundation's decoder has accepted. A
/// token's issuer and Gatehouse must read the same claims, so a token header or payload with any of these is refused
/// rather than read one way (native sign-up attributes are refused the same way):
/// - an object that names one key twice: JSON parsers differ on which value wins (most JOSE libraries keep the
///   last, Foundation may keep either);
/// - what RFC 8259 does not allow and Foundation's decoder lets through: a trailing comma (`{"sub":"a",}`), an
///   empty element (`[1,,2]`), a byte order mark before the text, UTF-16 or UTF-32 text.
package enum StrictJSON {
    /// What a scan found.
    package enum Finding: Hashable, Sendable {
        /// Some object has this key twice (unescaped).
        case duplicate(String)
        /// A string never ends: the text cannot be read as JSON at all.
        case unterminated
        /// Something RFC 8259 does not allow, in words ("a trailing comma").
        case notJSON(String)
    }

    /// True when the scan finds anything (``first(in:)``).
    package static func found(in json: Data) -> Bool { first(in: json) != nil }

    /// The first thing `json` should be refused for, or nil. Keys are compared after unescaping (`"s\u0075b"` is
    /// `"sub"`), each object's on their own. Meant for text that is otherwise valid JSON (it is decoded separately).
    package static func first(in json: Data) -> Finding? {
        let bytes = [UInt8](json)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return .notJSON("a byte order mark") }
        // UTF-16 and UTF-32, which the decoder also reads, have NULs or a BOM of 0xFE and 0xFF; none of these
        // bytes is in UTF-8 JSON text (a NUL in a string must be escaped).
        if bytes.contains(where: { $0 == 0x00 || $0 == 0xFE || $0 == 0xFF }) { return .notJSON("text that is not UTF-8") }
        var stack: [(isObject: Bool, keys: Set<String>, expectingKey: Bool)] = []
        // The last byte outside strings that is not white space: a comma must follow a value.
        var previous: UInt8 = 0
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"): stack.append((true, [], true))
            case UInt8(ascii: "["): stack.append((false, [], false))
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if previous == UInt8(ascii: ",") { return .notJSON("a trailing comma") }
                _ = stack.popLast()
            case UInt8(ascii: ","):
                if [UInt8(ascii: ","), UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ":")].contains(previous) {
                    return .notJSON("an empty element")
                }
                if stack.last?.isObject == true { stack[stack.count - 1].expectingKey = true }
            case UInt8(ascii: "\""):
                var end = index + 1
                while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
                    end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1
                }
                guard end < bytes.count else { return .unterminated }
                if let top = stack.last, top.isObject, top.expectingKey {
                    let raw = Data(bytes[index...end])
                    let key = (try? JSONDecoder().decode(String.self, from: raw)) ?? String(decoding: raw, as: UTF8.self)
                    if !stack[stack.count - 1].keys.insert(key).inserted { return .duplicate(key) }
                    stack[stack.count - 1].expectingKey = false
                }
                index = end
            default: break
            }
            if ![UInt8(ascii: " "), 0x09, 0x0A, 0x0D].contains(byte) { previous = byte }
            index += 1
        }
        return nil
    }
}
