import Foundation
import GatehouseDomain
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the SMTP server is and how to log in, parsed from `mail.smtp` (`smtp://user:pass@host:port` or
/// `smtps://…`).
struct SMTPEndpoint: Sendable, Hashable {
    struct Credentials: Sendable, Hashable {
        var user: String
        var password: String
    }

    var host: String
    var port: Int
    /// `smtps://`: TLS from the first byte (port 465 by default); else plain text first, STARTTLS per settings.
    var implicitTLS: Bool
    var credentials: Credentials?
}

extension SMTPEndpoint {
    /// Parses a URL; user and password are percent-decoded. Errors never repeat the URL (it may hold a password).
    init(parsing url: String) throws(ConfigurationError) {
        func fail(_ message: String) -> ConfigurationError { ConfigurationError(key: "mail.smtp", message: message) }
        let usage = "expected smtp://[user:password@]host[:port] or smtps://… (percent-encode special characters in the user and password)"
        guard let components = URLComponents(string: url.trimmingCharacters(in: .whitespaces)) else { throw fail(usage) }
        switch components.scheme?.lowercased() {
        case "smtp": implicitTLS = false
        case "smtps": implicitTLS = true
        default: throw fail(usage)
        }
        guard var host = components.host, !host.isEmpty else { throw fail("no host; \(usage)") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.host = host
        let port = components.port ?? (implicitTLS ? 465 : 587)
        guard (1...65535).contains(port) else { throw fail("the port must be 1…65535") }
        self.port = port
        guard components.percentEncodedPath.isEmpty || components.percentEncodedPath == "/" else {
            throw fail("unexpected path; \(usage)")
        }
        guard components.percentEncodedQuery == nil, components.percentEncodedFragment == nil else {
            throw fail("unexpected query or fragment; \(usage)")
        }
        if let encodedUser = components.percentEncodedUser {
            guard let user = encodedUser.removingPercentEncoding, !user.isEmpty else {
                throw fail("the user name is empty or badly percent-encoded")
            }
            guard let password = (components.percentEncodedPassword ?? "").removingPercentEncoding else {
                throw fail("the password is badly percent-encoded")
            }
            credentials = Credentials(user: user, password: password)
        } else {
            guard components.percentEncodedPassword == nil else { throw fail("a password without a user name") }
            credentials = nil
        }
    }

    /// `smtp://user@host:587`, without the password: for logs.
    var redacted: String {
        let user = credentials.map { "\($0.user)@" } ?? ""
        let host = host.contains(":") ? "[\(host)]" : host
        return "\(implicitTLS ? "smtps" : "smtp")://\(user)\(host):\(port)"
    }
}

/// One message as one SMTP transaction sends it.
struct SMTPEnvelope: Sendable, Hashable {
    /// `MAIL FROM` address.
    var sender: String
    /// `RCPT TO` address.
    var recipient: String
    /// The message (``MIMEMessage/rendered``): CRLF line endings, a final CRLF, not dot-stuffed.
    var data: String
}

/// Why a delivery failed.
enum SMTPClientError: Error, Sendable, CustomStringConvertible {
    /// The server answered a command with an unexpected reply (its 4xx or 5xx).
    case rejected(command: String, reply: SMTPReply)
    /// Could not talk to the server: connection, timeout, TLS, protocol, or a precondition such as STARTTLS.
    case unavailable(String)
    /// This message can never go through this server (an address it cannot carry).
    case undeliverable(String)

    var description: String {
        switch self {
        case .rejected(let command, let reply): "\(reply) (reply to \(command))"
        case .unavailable(let reason), .undeliverable(let reason): reason
        }
    }
}

/// An SMTP client (RFC 5321) on SwiftNIO that sends one message per connection: connect, greeting, EHLO (HELO when
/// EHLO is refused), STARTTLS or implicit TLS, AUTH PLAIN or LOGIN, MAIL FROM, RCPT TO, DATA, QUIT. Every wait
/// (connecting, each reply) is bounded by ``timeout``. No pipelining, no connection reuse: Gatehouse sends few,
/// small messages, and a fresh connection has no state to go stale.
struct SMTPClient: Sendable {
    var endpoint: SMTPEndpoint
    var starttls: MailSettings.StartTLS
    /// Verifies the server against the system's roots or `mail.caFile`, and its name against ``SMTPEndpoint/host``.
    var tlsContext: NIOSSLContext
    /// Seconds.
    var timeout: Int
    /// The name sent with EHLO; nil: this host's name when it is fully qualified, else an address literal.
    var localName: String?
    var eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton

    /// Sends one message. Returns the server's reply to the message data (`250 …`).
    func send(_ envelope: SMTPEnvelope) async throws(SMTPClientError) -> SMTPReply {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            let context = tlsContext
            let serverName = self.serverName
            let implicitTLS = endpoint.implicitTLS
            channel = try await ClientBootstrap(group: eventLoopGroup)
                .connectTimeout(.seconds(Int64(timeout)))
                .connect(host: endpoint.host, port: endpoint.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if implicitTLS {
                            try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: serverName))
                        }
                        return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch ChannelError.connectTimeout {
            throw .unavailable("could not connect to \(endpoint.host):\(endpoint.port) within \(timeout) s")
        } catch {
            throw .unavailable("could not connect to \(endpoint.host):\(endpoint.port): \(Self.describe(error))")
        }
        do {
            return try await channel.executeThenClose { inbound, outbound in
                var session = SMTPSession(client: self, channel: channel.channel, inbound: inbound.makeAsyncIterator(), outbound: outbound)
                return try await session.run(envelope)
            }
        } catch let error as SMTPClientError {
            throw error
        } catch {
            throw .unavailable("SMTP with \(endpoint.host):\(endpoint.port) failed: \(Self.describe(error))")
        }
    }

    /// The TLS server name: the host, unless it is an IP address (then the certificate must name that address).
    var serverName: String? {
        var v4 = in_addr()
        var v6 = in6_addr()
        let isAddress = endpoint.host.withCString { inet_pton(AF_INET, $0, &v4) == 1 || inet_pton(AF_INET6, $0, &v6) == 1 }
        return isAddress ? nil : endpoint.host
    }

    /// BoringSSL's reason codes (`CERTIFICATE_VERIFY_FAILED`) without its numbers and source paths.
    private static func tlsReason(_ error: BoringSSLError) -> String {
        let text = "\(error)"
        let reasons = text.matches(of: /OPENSSL_internal:([A-Z0-9_]+)/).map { String($0.output.1) }
        guard !reasons.isEmpty else { return text }
        var result = reasons.joined(separator: ", ")
        if reasons.contains("CERTIFICATE_VERIFY_FAILED") {
            result += " (the server's certificate does not chain to mail.caFile, or to the system's roots when it is not set)"
        }
        return result
    }

    /// This host's name when it is fully qualified (has a dot, is plain ASCII), looked up once.
    static let fullyQualifiedHostName: String? = {
        let name = ProcessInfo.processInfo.hostName
        let valid = name.contains(".") && !name.hasSuffix(".local") && !name.hasPrefix(".") && !name.hasSuffix(".")
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
        return valid ? name : nil
    }()

    /// A readable reason for a NIO or TLS error.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as NIOConnectionError:
            if let dns = error.dnsAError ?? error.dnsAAAAError { return "cannot resolve the host name (\(dns))" }
            if error.connectionErrors.count == 1 { return describe(error.connectionErrors[0].error) }
            let reasons = error.connectionErrors.map { "\($0.target.ipAddress ?? "?"): \(describe($0.error))" }
            return reasons.isEmpty ? "\(error)" : reasons.joined(separator: "; ")
        case let error as IOError:
            return String(cString: strerror(error.errnoCode)).lowercased()
        case NIOSSLError.handshakeFailed(let error):
            return "TLS handshake failed: \(tlsReason(error))"
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return "TLS handshake failed: the certificate is not for this host name (\(error))"
        case let error as NIOSSLError:
            return "TLS failed: \(error)"
        case let error as NIOSSLExtraError:
            return "TLS failed: \(error)"
        case let error as BoringSSLError:
            return "TLS failed: \(tlsReason(error))"
        case ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed, ChannelError.eof:
            return "the connection was closed"
        default:
            return String(describing: error)
        }
    }
}

/// One connection's conversation. Never logs or reports what it sends after AUTH or DATA (passwords, message
/// bodies with tokens in them).
private struct SMTPSession {
    let client: SMTPClient
    let channel: any Channel
    var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    var parser = SMTPReplyParser()
    var tls: Bool
    /// What the last EHLO offered.
    var extensions: [String: [String]] = [:]
    /// Set when the connection can no longer carry a QUIT.
    var broken = false

    init(
        client: SMTPClient,
        channel: any Channel,
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    ) {
        self.client = client
        self.channel = channel
        self.inbound = inbound
        self.outbound = outbound
        self.tls = client.endpoint.implicitTLS
    }

    private var host: String { client.endpoint.host }

    mutating func run(_ envelope: SMTPEnvelope) async throws -> SMTPReply {
        do {
            let reply = try await transaction(envelope)
            await quit()
            return reply
        } catch {
            if !broken { await quit() }
            throw error
        }
    }

    private mutating func transaction(_ envelope: SMTPEnvelope) async throws -> SMTPReply {
        try expect(try await exchange(nil, label: "the greeting"), 220, "the greeting")
        try await hello()

        if !tls {
            let offered = extensions["STARTTLS"] != nil
            switch client.starttls {
            case .never:
                break
            case .optional:
                if offered { try await startTLS() }
            case .required:
                guard offered else {
                    throw SMTPClientError.unavailable(
                        "\(host):\(client.endpoint.port) does not offer STARTTLS and mail.starttls is required: not sending in plain text "
                            + "(a wrong host or port? for implicit TLS on port 465 use smtps://)"
                    )
                }
                try await startTLS()
            }
        }

        if let credentials = client.endpoint.credentials { try await authenticate(credentials) }

        var parameters = ""
        if !envelope.sender.allSatisfy(\.isASCII) || !envelope.recipient.allSatisfy(\.isASCII) {
            guard extensions["SMTPUTF8"] != nil else {
                throw SMTPClientError.undeliverable("the address is not ASCII and \(host) does not offer SMTPUTF8")
            }
            parameters = " SMTPUTF8"
        }
        try expect(try await exchange("MAIL FROM:<\(envelope.sender)>\(parameters)", label: "MAIL FROM"), 250, "MAIL FROM")
        try expect(try await exchange("RCPT TO:<\(envelope.recipient)>", label: "RCPT TO"), 250...252, "RCPT TO")
        try expect(try await exchange("DATA", label: "DATA"), 354, "DATA")
        // The data ends in CRLF, so ".\r\n" completes the <CRLF>.<CRLF> terminator.
        let accepted = try await exchange(dotStuffed(envelope.data) + ".", label: "the message data")
        try expect(accepted, 250, "the message data")
        return accepted
    }

    /// EHLO, or HELO when the server refuses EHLO with a 5xx (an old server without extensions).
    private mutating func hello() async throws {
        let name = localName()
        let ehlo = try await exchange("EHLO \(name)", label: "EHLO")
        if ehlo.isPositiveCompletion {
            extensions = ehlo.extensions
            return
        }
        guard ehlo.isPermanentFailure else { throw SMTPClientError.rejected(command: "EHLO", reply: ehlo) }
        try expect(try await exchange("HELO \(name)", label: "HELO"), 250, "HELO")
        extensions = [:]
    }

    private mutating func startTLS() async throws {
        try expect(try await exchange("STARTTLS", label: "STARTTLS"), 220, "STARTTLS")
        // Anything the server sent after its 220 came before TLS: a man in the middle injecting replies.
        guard !parser.hasBufferedData else {
            broken = true
            throw SMTPClientError.unavailable("\(host) sent data after its STARTTLS reply, before TLS: refusing the connection")
        }
        let context = client.tlsContext
        let serverName = client.serverName
        let channel = self.channel
        do {
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(
                    NIOSSLClientHandler(context: context, serverHostname: serverName), position: .first
                )
            }.get()
        } catch {
            broken = true
            throw SMTPClientError.unavailable("could not start TLS with \(host): \(SMTPClient.describe(error))")
        }
        tls = true
        extensions = [:]
        // RFC 3207: forget what was learnt before TLS and ask again. The handshake happens as this EHLO is written.
        try await hello()
    }

    private mutating func authenticate(_ credentials: SMTPEndpoint.Credentials) async throws {
        guard tls || client.starttls == .never else {
            throw SMTPClientError.unavailable(
                "\(host) did not offer STARTTLS: refusing to send the SMTP password over an unencrypted connection"
                    + " (mail.starttls: never would allow it, for a relay on the same host)"
            )
        }
        let mechanisms = Set((extensions["AUTH"] ?? []).map { $0.uppercased() })
        func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
        if mechanisms.contains("PLAIN") {
            let response = base64("\u{0}\(credentials.user)\u{0}\(credentials.password)")
            var reply = try await exchange("AUTH PLAIN \(response)", label: "AUTH PLAIN")
            if reply.code == 334 { reply = try await exchange(response, label: "AUTH PLAIN") }
            try expect(reply, 235, "AUTH PLAIN")
        } else if mechanisms.contains("LOGIN") {
            try expect(try await exchange("AUTH LOGIN", label: "AUTH LOGIN"), 334, "AUTH LOGIN")
            try expect(try await exchange(base64(credentials.user), label: "AUTH LOGIN (user name)"), 334, "AUTH LOGIN")
            try expect(try await exchange(base64(credentials.password), label: "AUTH LOGIN (password)"), 235, "AUTH LOGIN")
        } else if mechanisms.isEmpty {
            throw SMTPClientError.unavailable("mail.smtp has a user and password, but \(host) does not offer AUTH")
        } else {
            throw SMTPClientError.unavailable(
                "\(host) offers AUTH \(mechanisms.sorted().joined(separator: " ")); Gatehouse supports PLAIN and LOGIN"
            )
        }
    }

    private mutating func quit() async {
        _ = try? await exchange("QUIT", label: "QUIT")
    }

    private func expect(_ reply: SMTPReply, _ code: Int, _ command: String) throws {
        try expect(reply, code...code, command)
    }

    private func expect(_ reply: SMTPReply, _ codes: ClosedRange<Int>, _ command: String) throws {
        guard codes.contains(reply.code) else { throw SMTPClientError.rejected(command: command, reply: reply) }
    }

    /// Sends `line` (nil: nothing, to read the greeting) and reads the reply, within the timeout. `label` names the
    /// step in errors; the line itself is never repeated (it may be a password).
    private mutating func exchange(_ line: String?, label: String) async throws -> SMTPReply {
        let expired = NIOLockedValueBox(false)
        let channel = self.channel
        let watchdog = channel.eventLoop.scheduleTask(in: .seconds(Int64(client.timeout))) {
            expired.withLockedValue { $0 = true }
            channel.close(promise: nil)
        }
        defer { watchdog.cancel() }
        do {
            if let line {
                do {
                    try await outbound.write(ByteBuffer(string: line + "\r\n"))
                } catch {
                    // The connection is gone; why (a TLS alert, a reset) waits at the end of the inbound stream.
                    broken = true
                    var reason = SMTPClient.describe(error)
                    do {
                        while try await inbound.next() != nil {}
                    } catch {
                        reason = SMTPClient.describe(error)
                    }
                    throw SMTPClientError.unavailable("could not send \(label) to \(host): \(reason)")
                }
            }
            return try await readReply(label)
        } catch {
            if expired.withLockedValue({ $0 }) {
                broken = true
                throw SMTPClientError.unavailable("\(host) did not answer \(label) within \(client.timeout) s")
            }
            throw error
        }
    }

    private mutating func readReply(_ label: String) async throws -> SMTPReply {
        while true {
            do {
                if let reply = try parser.next() { return reply }
            } catch {
                broken = true
                throw SMTPClientError.unavailable("\(host) answered \(label) with something else than SMTP: \(error)")
            }
            let bytes: ByteBuffer?
            do {
                bytes = try await inbound.next()
            } catch {
                broken = true
                throw SMTPClientError.unavailable("the connection to \(host) failed while waiting for the reply to \(label): \(SMTPClient.describe(error))")
            }
            guard let bytes else {
                broken = true
                throw SMTPClientError.unavailable("\(host) closed the connection while Gatehouse waited for the reply to \(label)")
            }
            parser.feed(bytes.readableBytesView)
        }
    }

    /// The EHLO name: the configured one, this host's name when fully qualified, else the connection's local address
    /// as an address literal (RFC 5321 §4.1.4).
    private func localName() -> String {
        if let name = client.localName ?? SMTPClient.fullyQualifiedHostName { return name }
        guard let address = channel.localAddress?.ipAddress else { return "localhost" }
        return address.contains(":") ? "[IPv6:\(address)]" : "[\(address)]"
    }
}
