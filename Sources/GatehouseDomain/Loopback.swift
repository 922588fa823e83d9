import Foundation

/// Loopback: what only this machine can reach. The dev mailbox serves loopback binds only, and outbound calls
/// (webhooks, key sets, token endpoints) may use plain `http://` to loopback hosts only.
package enum Loopback {
    /// True for `localhost`, any `127.x.x.x` and `::1` in any of its spellings (with or without brackets), and an
    /// IPv4-mapped IPv6 address of `127.x.x.x` (`::ffff:127.0.0.1`, how a dual-stack socket names an IPv4 peer).
    package static func contains(host: String) -> Bool {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" { return true }
        if host.contains(":") {
            // A zone (`::1%lo`) names the interface, not another address.
            guard let groups = ipv6Groups(zoned: host) else { return false }
            if groups == [0, 0, 0, 0, 0, 0, 0, 1] { return true }
            return groups[0..<5].allSatisfy { $0 == 0 } && groups[5] == 0xffff && groups[6] >> 8 == 127
        }
        return ClientNetwork.ipv4(host[...])?.first == 127
    }

    /// `host` as a URL's authority names it: an IPv6 address in brackets (RFC 3986), its zone's `%` written `%25`
    /// (RFC 6874); any other host as it is.
    package static func urlHost(_ host: String) -> String {
        guard host.contains(":"), !host.hasPrefix("[") else { return host }
        return "[\(host.replacingOccurrences(of: "%", with: "%25"))]"
    }

    /// Whether `host` is an address or a host name to listen on: a host name or IPv4 address, or an IPv6 address
    /// without brackets (those belong in URLs), with an optional zone (`fe80::1%eth0`) — never with a port.
    package static func isListeningHost(_ host: String) -> Bool {
        guard !host.isEmpty, !host.contains(where: { "[]/ \t\n".contains($0) }) else { return false }
        return !host.contains(":") || ipv6Groups(zoned: host) != nil
    }

    /// The groups of an IPv6 address with an optional zone (`fe80::1%eth0`: letters, digits, `.`, `_`, `-`); nil for
    /// anything else.
    private static func ipv6Groups(zoned text: String) -> [UInt16]? {
        let parts = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else { return nil }
        }
        return ClientNetwork.ipv6Groups(String(parts[0]))
    }

    /// Why `url` may not be called, or nil: an outbound URL must be `https://`, or `http://` to a loopback host.
    /// Plain HTTP elsewhere would let anyone on the network path forge an identity provider's keys or a webhook's
    /// answer.
    package static func outboundProblem(_ url: String) -> String? {
        // The message names scheme and host only: a path or query may carry a token, and this reaches logs.
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { return "expected an https URL" }
        switch scheme {
        case "https": return nil
        case "http" where contains(host: host): return nil
        case "http": return "must be https (plain http is allowed for loopback hosts only), found http://\(host)"
        default: return "expected an https URL, found a \(scheme): URL"
        }
    }
}

extension GatehouseConfiguration {
    /// What a server whose public address is plain http on a host others reach gives up, said at start-up; nil for
    /// https or a loopback host. Not refused: a TLS proxy may sit in front, misconfigured or not yet. Without a
    /// `server.publicURL` the address is the bind's.
    package var plainHTTPExposure: String? {
        let host: String
        if let url = server.publicURL {
            guard let components = URLComponents(string: url), components.scheme?.lowercased() == "http", let named = components.host
            else { return nil }
            host = named
        } else {
            host = server.host
        }
        guard !Loopback.contains(host: host) else { return nil }
        return "the public address is plain http (http://\(Loopback.urlHost(host))): tokens name an http issuer, emailed links are http, and the "
            + "hosted pages cannot use a __Host- cookie, so anyone on the network path can read links and plant cookies. "
            + "Terminate TLS in front of Gatehouse and set server.publicURL to its https address"
    }

    /// The dev mailbox shows every confirmation and reset link it holds to whoever can connect, so it serves
    /// loopback binds only: with the mailbox on and any other bind this is the error the server refuses to start
    /// with, else nil.
    package var devMailboxExposure: ConfigurationError? {
        guard dev.mailbox, !Loopback.contains(host: server.host) else { return nil }
        return ConfigurationError(
            key: "dev.mailbox",
            message: """
                the dev mailbox is on and the server would listen on \(server.host), not loopback: anyone who can connect \
                could read every confirmation and reset link at /_dev/mailbox. Listen on 127.0.0.1 (--host 127.0.0.1), or \
                turn the mailbox off with a configuration file that sets `dev: { mailbox: false }` and `mail.smtp`
                """
        )
    }
}
