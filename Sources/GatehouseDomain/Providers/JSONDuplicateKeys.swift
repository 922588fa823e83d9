import Foundation

/// Finds an object that names one key twice in a JSON text. A token's issuer and Gatehouse must read the same
/// claims; JSON parsers differ on duplicates (most JOSE libraries keep the last, Foundation may keep either), so a
/// token header or payload with a duplicate key is refused rather than read one way. Native sign-up attributes are
/// refused the same way.
package enum JSONDuplicateKeys {
    /// What a scan found.
    package enum Finding: Hashable, Sendable {
        /// Some object has this key twice (unescaped).
        case duplicate(String)
        /// A string never ends: the text cannot be read as JSON at all.
        case unterminated
    }

    /// True when some object in `json` has a key twice, compared after unescaping (`"s\u0075b"` is `"sub"`).
    /// Meant for text that is otherwise valid JSON (it is decoded separately); unterminated strings count as found.
    package static func found(in json: Data) -> Bool { first(in: json) != nil }

    /// The first key some object in `json` has twice, compared after unescaping, or `.unterminated`; nil when
    /// there is neither. Keys of nested objects count too: each object has its own set.
    package static func first(in json: Data) -> Finding? {
        let bytes = [UInt8](json)
        var stack: [(isObject: Bool, keys: Set<String>, expectingKey: Bool)] = []
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "{"): stack.append((true, [], true))
            case UInt8(ascii: "["): stack.append((false, [], false))
            case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = stack.popLast()
            case UInt8(ascii: ","): if stack.last?.isObject == true { stack[stack.count - 1].expectingKey = true }
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
            index += 1
        }
        return nil
    }
}
