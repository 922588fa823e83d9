import Foundation

/// Loopback: what only this machine can reach. The dev mailbox serves loopback binds only, and outbound calls
/// (webhooks, key sets, token endpoints) may use plain `http://` to loopback hosts only.
package enum Loopback {
    /// True for `localhost`, any `127.x.x.x` and `::1` (with or without brackets).
    package static func contains(host: String) -> Bool {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { part in UInt8(part) != nil }
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
        let url = server.publicURL ?? "http://\(server.host)"
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "http", let host = components.host,
            !Loopback.contains(host: host)
        else { return nil }
        return "the public address is plain http (http://\(host)): tokens name an http issuer, emailed links are http, and the "
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
