import Foundation
import GatehouseDomain
import Logging
import NIOSSL

/// Delivers outbox messages to an SMTP server (`mail.smtp`): one connection per message (see ``SMTPClient``).
///
/// A refused login (5xx to AUTH) is retried rather than failed: the credentials are the operator's to fix, and the
/// messages waiting behind them should go out once they are.
///
/// Failures map onto the outbox's retry rules: a 5xx reply is ``MailDeliveryError/permanent(_:)`` with the server's
/// reply (`550 5.1.1 No such user`); everything else (connection refused, timeouts, TLS failures, 4xx replies, a
/// server that does not offer STARTTLS when it is required) is ``MailDeliveryError/transient(_:)`` and retried.
/// Logs name the message (id, kind, app), the outcome and the reply code, never the content: it holds tokens.
final class SMTPMailer: MailTransport {
    let settings: MailSettings
    let logger: Logger
    let endpoint: SMTPEndpoint
    let from: MailAddress
    private let client: SMTPClient

    /// Checks the settings (URL, `from`, CA file) so that a mistake stops the server at start. Errors are
    /// ``ConfigurationError``s naming the key, and never contain the password.
    init(settings: MailSettings, logger: Logger) throws {
        guard let url = settings.smtpURL else {
            throw ConfigurationError(key: "mail.smtp", message: "no SMTP server is configured")
        }
        let endpoint = try SMTPEndpoint(parsing: url)
        do {
            from = try MailAddress(parsing: settings.from)
        } catch {
            throw ConfigurationError(key: "mail.from", message: "\(error.description), like Gatehouse <no-reply@example.com>")
        }
        guard (1...600).contains(settings.timeout) else {
            throw ConfigurationError(key: "mail.timeout", message: "expected 1…600 seconds, found \(settings.timeout)")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = settings.caFile {
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(caFile)
            } catch {
                throw ConfigurationError(key: "mail.caFile", message: "cannot read PEM certificates from \(caFile): \(error)")
            }
            guard !certificates.isEmpty else {
                throw ConfigurationError(key: "mail.caFile", message: "\(caFile) holds no PEM certificate")
            }
            // Only these: a private relay's CA should not widen, nor be widened by, the public web PKI.
            tls.trustRoots = .certificates(certificates)
        }
        let tlsContext: NIOSSLContext
        do {
            tlsContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw ConfigurationError(key: settings.caFile == nil ? "mail.smtp" : "mail.caFile", message: "cannot set up TLS: \(error)")
        }
        self.settings = settings
        self.logger = logger
        self.endpoint = endpoint
        self.client = SMTPClient(endpoint: endpoint, starttls: settings.starttls, tlsContext: tlsContext, timeout: settings.timeout)
        if endpoint.credentials != nil, !endpoint.implicitTLS, settings.starttls == .never {
            logger.warning(
                "mail.starttls is never: the SMTP password travels in plain text",
                metadata: ["smtp": "\(endpoint.redacted)"]
            )
        }
    }

    func deliver(_ message: OutboxMessage) async throws {
        var metadata: Logger.Metadata = [
            "mail": "\(message.id)", "kind": "\(message.kind)", "app": "\(message.appId)", "smtp": "\(endpoint.redacted)",
        ]
        guard MailAddress.isValidMailbox(message.recipient) else {
            metadata["outcome"] = "failed"
            logger.error("SMTP delivery impossible: the recipient address cannot be used in SMTP", metadata: metadata)
            throw MailDeliveryError.permanent("the recipient address cannot be used in SMTP")
        }
        let mime = MIMEMessage(from: from, to: message.recipient, subject: message.subject, text: message.text, html: message.html)
        metadata["messageId"] = "\(mime.messageID)"
        let envelope = SMTPEnvelope(sender: from.address, recipient: message.recipient, data: mime.rendered)
        do {
            let reply = try await client.send(envelope)
            metadata["outcome"] = "sent"
            metadata["smtpCode"] = "\(reply.code)"
            logger.info("mail sent over SMTP", metadata: metadata)
        } catch {
            let failure: MailDeliveryError
            switch error {
            case .rejected(let command, let reply) where reply.isPermanentFailure && !command.hasPrefix("AUTH"):
                failure = .permanent(reply.description)
                metadata["smtpCode"] = "\(reply.code)"
            case .rejected(_, let reply):
                failure = .transient(error.description)
                metadata["smtpCode"] = "\(reply.code)"
            case .unavailable(let reason):
                failure = .transient(reason)
            case .undeliverable(let reason):
                failure = .permanent(reason)
            }
            if case .permanent = failure {
                metadata["outcome"] = "failed"
                logger.error("SMTP delivery failed", metadata: metadata.merging(["reason": "\(error)"]) { $1 })
            } else {
                metadata["outcome"] = "retry"
                logger.warning("SMTP delivery failed, will retry", metadata: metadata.merging(["reason": "\(error)"]) { $1 })
            }
            throw failure
        }
    }

    /// Nothing to close: every message has its own connection.
    func shutdown() async {}
}
