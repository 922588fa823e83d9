import Foundation

/// Who is asking: the client's address and user agent, for rate limits and the audit log.
///
/// The façade reads it from the request and hands it to the domain with the environment it builds the request's
/// services from (``AuthEnvironment/serving(_:)``): an argument, never ambient state. Outside a request (the command
/// line, tests calling services directly) both are nil.
package struct RequestOrigin: Sendable, Hashable {
    /// The client's IP address: the connection's peer, or the address a trusted proxy reports (`server.clientIPHeader`).
    /// Written to the audit log as it is.
    package var ip: String?
    /// The `User-Agent` header, cut to 256 characters.
    package var userAgent: String?
    /// What limits and login delays count this client as: an IPv4 address on its own, an IPv6 address by its network
    /// (``ClientNetwork``: the first `server.ipv6PrefixLength` bits, /64 by default, since one subscriber or one
    /// host usually holds a whole /64 and can pick any address in it). Nil outside a request.
    package var network: String?

    /// - Parameter ipv6PrefixLength: the bits of an IPv6 address that name one client (`server.ipv6PrefixLength`).
    package init(ip: String? = nil, userAgent: String? = nil, ipv6PrefixLength: Int = ClientNetwork.defaultIPv6PrefixLength) {
        self.ip = ip
        self.userAgent = userAgent
        network = ip.map { ClientNetwork.key(for: $0, ipv6PrefixLength: ipv6PrefixLength) }
    }
}

/// The key a client address is counted by: IPv4 addresses one by one, IPv6 addresses by their network prefix.
///
/// A host on IPv6 is usually given a /64 (RFC 6177; many providers give /56 or /48 to a subscriber) and may use any
/// of its 2^64 addresses, so counting IPv6 addresses one by one would let one client spread its requests over as
/// many counters as it likes. Every spelling of one address is one key: an IPv4-mapped IPv6 address
/// (`::ffff:192.0.2.1`) is its IPv4 address, brackets and a port (`[2001:db8::1]:443`, `192.0.2.1:5555`) and a zone
/// (`%eth0`) are dropped, IPv4 octets are read as decimal (`010.1.1.1` is `10.1.1.1`). Anything that does not parse
/// as an address (a proxy header's odd value) is counted as one client, `unparsed`, so that odd values cannot mint
/// counters.
package enum ClientNetwork {
    /// `server.ipv6PrefixLength`'s default.
    package static let defaultIPv6PrefixLength = 64
    /// The key of every value that is not an address.
    package static let unparsed = "unparsed"

    /// The counting key of `address`: `192.0.2.1`, or `2001:db8:1:2:0:0:0:0/64` for any address of that /64.
    package static func key(for address: String, ipv6PrefixLength: Int = defaultIPv6PrefixLength) -> String {
        dottedIPv4Key(address) ?? parsedKey(for: address, ipv6PrefixLength: ipv6PrefixLength)
    }

    /// The key of a plain dotted IPv4 address, read over its bytes: a connection's peer is always one, so most
    /// requests' key is found here, without the general reading's substrings and arrays (a tenth of a health check's
    /// instructions). Nil for anything else (a port, brackets, IPv6, an octet over 255), which ``parsedKey(for:ipv6PrefixLength:)``
    /// reads; an address whose octets have leading zeros is spelled as that reading spells it.
    package static func dottedIPv4Key(_ address: String) -> String? {
        // The octets read so far, packed eight bits each (no array: this runs for every request).
        var packed: UInt32 = 0, octets = 0
        var value = 0, digits = 0, canonical = true
        for byte in address.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, octets < 3 else { return nil }
                packed = packed << 8 | UInt32(value)
                octets += 1
                (value, digits) = (0, 0)
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                if digits > 0, value == 0 { canonical = false }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                guard digits <= 3, value <= 255 else { return nil }
            } else {
                return nil
            }
        }
        guard octets == 3, digits > 0 else { return nil }
        // A canonical spelling is its own key.
        if canonical { return address }
        packed = packed << 8 | UInt32(value)
        return dotted([24, 16, 8, 0].map { UInt8(truncatingIfNeeded: packed >> $0) })
    }

    /// `192.0.2.1`: the four octets in decimal.
    private static func dotted(_ octets: [UInt8]) -> String { octets.map(String.init).joined(separator: ".") }

    /// ``key(for:ipv6PrefixLength:)`` for every spelling the type's documentation lists.
    package static func parsedKey(for address: String, ipv6PrefixLength: Int = defaultIPv6PrefixLength) -> String {
        var text = Substring(address)
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            // `[v6]` or `[v6]:port`.
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            // `v4:port`.
            text = text[..<colon]
        }
        // A zone (`fe80::1%eth0`) names the interface, not the client.
        text = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false).first ?? text
        if !text.contains(":") { return ipv4(text).map(dotted) ?? unparsed }
        guard var groups = ipv6Groups(String(text)) else { return unparsed }
        if groups[0..<5].allSatisfy({ $0 == 0 }), groups[5] == 0xffff {
            return "\(groups[6] >> 8).\(groups[6] & 0xff).\(groups[7] >> 8).\(groups[7] & 0xff)"
        }
        let prefix = min(max(ipv6PrefixLength, 0), 128)
        for index in 0..<8 {
            let kept = min(max(prefix - index * 16, 0), 16)
            groups[index] &= kept == 0 ? 0 : UInt16(truncatingIfNeeded: 0xffff << (16 - kept))
        }
        return groups.map { String($0, radix: 16) }.joined(separator: ":") + "/\(prefix)"
    }

    /// The four octets of a dotted IPv4 address (each 1 to 3 decimal digits, at most 255); nil when it is not one.
    package static func ipv4(_ text: Substring) -> [UInt8]? {
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for octet in octets {
            guard (1...3).contains(octet.count), octet.allSatisfy({ $0.isASCII && $0.isNumber }), let value = UInt8(octet) else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    /// The eight 16-bit groups of an IPv6 address in text form (RFC 4291 section 2.2: `::` once, a dotted IPv4 tail);
    /// nil when it is not one.
    package static func ipv6Groups(_ text: String) -> [UInt16]? {
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func parse(_ part: String, allowIPv4Tail: Bool) -> [UInt16]? {
            guard !part.isEmpty else { return [] }
            var groups: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if allowIPv4Tail, index == pieces.count - 1, piece.contains(".") {
                    guard let bytes = ipv4(piece)?.map(UInt16.init) else { return nil }
                    groups += [bytes[0] << 8 | bytes[1], bytes[2] << 8 | bytes[3]]
                } else {
                    guard (1...4).contains(piece.count), piece.allSatisfy(\.isHexDigit), let value = UInt16(piece, radix: 16) else { return nil }
                    groups.append(value)
                }
            }
            return groups
        }
        if halves.count == 1 {
            guard let groups = parse(halves[0], allowIPv4Tail: true), groups.count == 8 else { return nil }
            return groups
        }
        guard let head = parse(halves[0], allowIPv4Tail: false), let tail = parse(halves[1], allowIPv4Tail: true),
            head.count + tail.count <= 7
        else { return nil }
        return head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
    }
}
