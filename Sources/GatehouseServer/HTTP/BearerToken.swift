import HTTPTypes

/// The bearer token of a request's `Authorization` header (RFC 6750), as the Client API and `/metrics` read it.
enum BearerToken: Equatable {
    case token(String)
    /// No `Authorization` header.
    case missing
    /// Not `Bearer <token>`, or more than one `Authorization` header (whose values would otherwise be joined).
    case malformed

    /// Read on the value's UTF-8: every authenticated request parses one, and splitting a 600-byte token into
    /// characters cost more than the rest of finding it.
    init(_ headers: HTTPFields) {
        var value: String?
        for field in headers where field.name == .authorization {
            guard value == nil else {
                self = .malformed
                return
            }
            value = field.value
        }
        guard let value else {
            self = .missing
            return
        }
        self = Self.parse(value).map(Self.token) ?? .malformed
    }

    /// The token of an `Authorization` value `Bearer <token>` (the scheme in any case, spaces and tabs around the
    /// token ignored), or nil.
    static func parse(_ value: String) -> String? {
        let bytes = value.utf8
        let isBlank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let schemeStart = bytes.firstIndex(where: { $0 != UInt8(ascii: " ") }),
            let schemeEnd = bytes[schemeStart...].firstIndex(of: UInt8(ascii: " ")),
            bytes[schemeStart..<schemeEnd].elementsEqual("bearer".utf8, by: { $0 | 0x20 == $1 }),
            let tokenStart = bytes[schemeEnd...].firstIndex(where: { !isBlank($0) }),
            let tokenLast = bytes.lastIndex(where: { !isBlank($0) })
        else { return nil }
        return String(Substring(bytes[tokenStart...tokenLast]))
    }
}
