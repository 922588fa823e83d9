import Foundation

/// JSON text written by hand, for the answers and tokens every request makes: byte for byte what Foundation's
/// `JSONEncoder` writes with `.sortedKeys` and `.withoutEscapingSlashes` (`TokenClaimsJSONTests` and
/// `JSONTextTests` compare the two over random values), at a fraction of its cost: the encoder boxes every value,
/// casts it dynamically and sorts through `String`'s comparison, which was a tenth of a refresh's instructions and
/// of a profile read's (`Benchmarks/PROFILING.md`).
package enum JSONText {
    /// Appends `string` as a JSON string: `"` and `\` escaped with a backslash, the control characters with their
    /// short forms or `\u00XX`, everything else as its UTF-8.
    package static func appendString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { bytes in
            // Most strings (ids, tokens, addresses) need no escape: copied at once.
            if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                out.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
                case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
                case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0..<0x20:
                    out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0xF)])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends an integer.
    package static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        out.append(contentsOf: String(value).utf8)
    }

    /// Appends any JSON value; an object's keys in the order `JSONEncoder`'s `.sortedKeys` puts them.
    package static func appendValue(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): appendInt(i, to: &out)
        case .double(let d):
            // Foundation's shortest round-tripping form (and its refusal of NaN and infinities): taken from it.
            let encoded: Data? = try? JSONEncoder().encode(d)
            if let encoded { out.append(contentsOf: encoded) } else { out.append(contentsOf: "null".utf8) }
        case .string(let s): appendString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (index, element) in a.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                appendValue(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o): appendObject(o, to: &out)
        }
    }

    /// Appends an object, its keys sorted as `JSONEncoder`'s `.sortedKeys` sorts them.
    package static func appendObject(_ object: [String: JSONValue], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (index, key) in sortedKeys(object.keys).enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendValue(object[key]!, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// `.sortedKeys`' order: by UTF-8 bytes.
    static func sortedKeys(_ keys: some Collection<String>) -> [String] {
        keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}

extension ProfileResponse {
    /// The answer of `GET auth/profile` as JSON (``JSONText``), the bytes `JSONEncoder` writes.
    package func json() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(contentsOf: #"{"data":"#.utf8)
        JSONText.appendObject(data, to: &out)
        out.append(contentsOf: #","domain_id":"#.utf8)
        JSONText.appendString(domainId, to: &out)
        out.append(contentsOf: #","identities":["#.utf8)
        for (index, identity) in identities.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"id":"#.utf8)
            JSONText.appendString(identity.id, to: &out)
            out.append(contentsOf: #","provider_id":"#.utf8)
            JSONText.appendString(identity.providerId, to: &out)
            out.append(contentsOf: #","provider_type":"#.utf8)
            JSONText.appendString(identity.providerType, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #"],"type":"#.utf8)
        JSONText.appendString(type, to: &out)
        out.append(contentsOf: #","user_id":"#.utf8)
        JSONText.appendString(userId, to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }
}

extension LoginResponse {
    /// The answer of a Client API login as JSON (``JSONText``), the bytes `JSONEncoder` writes.
    package func json() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(accessToken.utf8.count + refreshToken.utf8.count + 128)
        out.append(contentsOf: #"{"access_token":"#.utf8)
        JSONText.appendString(accessToken, to: &out)
        out.append(contentsOf: #","device_id":"#.utf8)
        JSONText.appendString(deviceId, to: &out)
        out.append(contentsOf: #","refresh_token":"#.utf8)
        JSONText.appendString(refreshToken, to: &out)
        out.append(contentsOf: #","user_id":"#.utf8)
        JSONText.appendString(userId, to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }
}
