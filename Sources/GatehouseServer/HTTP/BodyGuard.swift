import GatehouseDomain
/// Checks every request body gets before it is decoded, beyond the 64 KiB cap: JSON nested deeper than
/// ``maxDepth``, and NUL characters (raw, or as `\u0000` in a JSON string). Invalid UTF-8 and lone surrogates are
/// refused by the decoders themselves, and numbers out of range in the fields a route reads (members it does not read
/// are ignored, whatever they hold, as unknown members are); each is a 400 in the API's envelope.
enum BodyGuard {
    /// No Gatehouse request needs more (custom function payloads and device info included).
    static let maxDepth = 32

    /// What is wrong with a JSON body, or nil.
    static func jsonProblem(_ bytes: some Sequence<UInt8>) -> String? {
        var depth = 0
        var inString = false
        var escaped = false
        // After `\u` inside a string: the hex digits seen so far, to spot `\u0000`.
        var unicodeDigits: [UInt8]?
        for byte in bytes {
            if byte == 0 { return "request body contains a NUL character" }
            if inString {
                if var digits = unicodeDigits {
                    digits.append(byte)
                    if digits.count == 4 {
                        if digits == Array("0000".utf8) { return "request body contains a NUL character" }
                        unicodeDigits = nil
                    } else {
                        unicodeDigits = digits
                    }
                } else if escaped {
                    escaped = false
                    if byte == UInt8(ascii: "u") { unicodeDigits = [] }
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > maxDepth { return "request body nests deeper than \(maxDepth) levels" }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                depth -= 1
            default:
                break
            }
        }
        return nil
    }

    /// Whether a decoded form field or other text holds a NUL character.
    static func containsNUL(_ text: String) -> Bool { text.utf8.contains(0) }
}
