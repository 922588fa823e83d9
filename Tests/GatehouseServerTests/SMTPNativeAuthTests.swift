import Foundation
import GatehouseDomain
import GatehouseTestSupport
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Native auth codes travel the same outbox to a real SMTP server.
@Suite struct SMTPNativeAuthTests {
    @Test func aSignUpCodeArrivesByEmailAndCompletesTheSignUp() async throws {
        try await withSMTPServer { server in
            var configuration = nativeConfiguration()
            configuration.dev.mailbox = false
            configuration.mail = MailSettings(smtpURL: "smtp://127.0.0.1:\(server.port)", starttls: .never, from: "Gatehouse <no-reply@gatehouse.test>", timeout: 10)
            let clock = ManualClock()
            let mail = configuration.mail
            let gatehouse = try await AuthServer.open(configuration: configuration, clock: clock.clock, logger: quietLogger)
            do {
                try await WithoutServices(base: gatehouse.makeApplication()).test(.router) { client in
                    let mailer = try SMTPMailer(settings: mail, logger: quietLogger)
                    let service = OutboxDeliveryService(store: gatehouse.env.store, transport: mailer, clock: clock.clock, logger: quietLogger)
                    let ct1 = try #require(
                        try await client.nativeStep(.signUpStart, ["username": "kim@example.com", "challenge_type": allChallengeTypes]).continuationToken
                    )
                    let ct2 = try #require(
                        try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken
                    )
                    #expect(try await service.deliverDue() == 1)
                    let mail = try #require(try server.messages().first)
                    #expect(mail.rcptTos == ["kim@example.com"])
                    let text = try #require(mail.parts.first?.content)
                    let code = String(try #require(text.firstMatch(of: /(?m)^\s+(\d{8})\s*$/)?.output.1))
                    #expect(mail.headers["Subject"]?.hasSuffix(code) == true)
                    let done = try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
                    #expect(done.status == .ok, "\(done.text)")
                }
                try await gatehouse.close()
            } catch {
                try? await gatehouse.close()
                throw error
            }
        }
    }
}

/// An application minus its background services.
struct WithoutServices<Base: ApplicationProtocol>: ApplicationProtocol {
    let base: Base
    var responder: Base.Responder { get async throws { try await base.responder } }
    var configuration: ApplicationConfiguration { base.configuration }
    var logger: Logger { base.logger }
    var services: [any Service] { [] }
}

// MARK: - Helpers

/// A mailer for the test server: `smtp://[userInfo@]host:port`.
func makeMailer(
    _ server: SMTPTestServer,
    scheme: String = "smtp",
    host: String = "127.0.0.1",
    userInfo: String? = nil,
    starttls: MailSettings.StartTLS = .never,
    caFile: String? = nil,
    timeout: Int = 15
) throws -> SMTPMailer {
    let url = "\(scheme)://\(userInfo.map { "\($0)@" } ?? "")\(host):\(server.port)"
    return try SMTPMailer(
        settings: MailSettings(smtpURL: url, starttls: starttls, from: "Gatehouse <no-reply@example.com>", timeout: timeout, caFile: caFile),
        logger: quietLogger
    )
}

extension MailDeliveryError {
    /// `transient: reason` or `permanent: reason`.
    var summary: String { "\(isTransient ? "transient" : "permanent"): \(reason)" }
    var isTransient: Bool { if case .transient = self { true } else { false } }
    var reason: String {
        switch self {
        case .transient(let reason), .permanent(let reason): reason
        }
    }
}

/// The ``MailDeliveryError`` a delivery throws; nil (and a recorded issue) when it succeeds or throws anything else.
func deliveryFailure(of mailer: @autoclosure () throws -> SMTPMailer, delivering message: OutboxMessage) async -> MailDeliveryError? {
    do {
        try await mailer().deliver(message)
        Issue.record("the delivery succeeded")
        return nil
    } catch let error as MailDeliveryError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// Starts a Python tool from Tests/Tools that prints `READY <port>` once it listens, and waits (at most 30 s) for
/// that line. Its stdin stays open until it is stopped: the tools exit when it closes, so none outlives the run.
func startListeningTool(_ script: String, _ arguments: [String]) async throws -> (ChildProcess, port: Int) {
    let child = try ChildProcess(URL(fileURLWithPath: try SMTPTestServer.python), ["-u", script] + arguments, holdingInputOpen: true)
    do {
        let printed = try await child.waitForOutput(/READY (\d+)/, within: .seconds(30))
        guard let port = Int(printed) else { throw SMTPTestSetupError(description: "\(script) printed READY \(printed)") }
        return (child, port)
    } catch {
        await child.stop()
        throw error
    }
}

/// A port nothing listens on (for now).
func freePort() throws -> Int {
    let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
    defer { try? channel.close().wait() }
    return try #require(channel.localAddress?.port)
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-smtp-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func rfc5322DateFormatter() -> DateFormatter {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
    return formatter
}

struct SMTPTestSetupError: Error, CustomStringConvertible {
    var description: String
}

/// A self-signed certificate and its key, made with the `openssl` command line tool.
struct TestCertificate {
    var directory: URL
    /// PEM paths.
    var certificate: String
    var key: String

    /// Makes one with openssl (``ChildProcess``: no thread blocked while it runs).
    static func make(in directory: URL, names: String = "DNS:localhost,IP:127.0.0.1") async throws -> TestCertificate {
        let certificate = directory.appendingPathComponent("cert-\(UUID().uuidString).pem").path
        let key = directory.appendingPathComponent("key-\(UUID().uuidString).pem").path
        let result = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=Gatehouse test", "-addext", "subjectAltName=\(names)",
        ], within: .seconds(60))
        guard result.status == 0 else { throw SMTPTestSetupError(description: "openssl failed: \(result.stderr)") }
        return TestCertificate(directory: directory, certificate: certificate, key: key)
    }

    var serverArguments: [String] { ["--cert", certificate, "--key", key] }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// One message as the test server received it (see Tests/Tools/smtp_server.py).
struct ReceivedMail: Decodable {
    struct Part: Decodable {
        var contentType: String
        var charset: String?
        var transferEncoding: String?
        /// Decoded by Python's `email` package.
        var content: String
        /// With CRLF line breaks as `\n`, as Gatehouse composes text.
        var normalizedContent: String { content.replacingOccurrences(of: "\r\n", with: "\n") }
    }

    var mailFrom: String
    var mailOptions: [String]
    var rcptTos: [String]
    var heloName: String?
    var extendedSMTP: Bool
    var tls: Bool
    var tlsVersion: String?
    var authMechanism: String?
    var authLogin: String?
    var headers: [String: String]
    var contentType: String
    var parts: [Part]
    var rawLines: [String]
    var bareLineFeeds: Int
    var longestLine: Int
}

/// `Tests/Tools/smtp_server.py` running under `GATEHOUSE_PYTHON`, on 127.0.0.1 (a ``ChildProcess``: its waits
/// suspend, never block a thread).
final class SMTPTestServer: Sendable {
    let child: ChildProcess
    let directory: URL
    let mailDirectory: URL
    let port: Int

    static var python: String {
        get throws {
            guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"], !python.isEmpty else {
                throw SMTPTestSetupError(
                    description: """
                        GATEHOUSE_PYTHON is not set. The SMTP tests run a real SMTP server (aiosmtpd) from \
                        Tests/Tools/smtp_server.py and need a Python that has it:
                            python3 -m venv .build-venv && .build-venv/bin/pip install aiosmtpd
                            GATEHOUSE_PYTHON=$PWD/.build-venv/bin/python swift test
                        (the project's test script does this for you)
                        """
                )
            }
            return python
        }
    }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tools/smtp_server.py").path
    }

    private init(child: ChildProcess, directory: URL, port: Int) {
        self.child = child
        self.directory = directory
        self.mailDirectory = directory.appendingPathComponent("mail")
        self.port = port
    }

    /// Starts the server and waits (at most 30 s) until it listens.
    static func start(_ arguments: [String] = [], port: Int = 0) async throws -> SMTPTestServer {
        let directory = try temporaryDirectory()
        do {
            let (child, bound) = try await startListeningTool(script, ["--dir", directory.appendingPathComponent("mail").path, "--port", "\(port)"] + arguments)
            return SMTPTestServer(child: child, directory: directory, port: bound)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Ends the server (SIGKILL: a child started from a test's worker thread inherits its signal mask, which blocks
    /// SIGTERM), waits for it, and removes its folder.
    func stop() async {
        await child.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Every message received so far, in order.
    func messages() throws -> [ReceivedMail] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: mailDirectory.path)) ?? []
        return try names.filter { $0.hasSuffix(".json") }.sorted().map { name in
            try JSONDecoder().decode(ReceivedMail.self, from: Data(contentsOf: mailDirectory.appendingPathComponent(name)))
        }
    }
}

/// Runs `body` with a fresh SMTP server, and stops the server afterwards, whatever happens.
func withSMTPServer<T>(_ arguments: [String] = [], port: Int = 0, _ body: (SMTPTestServer) async throws -> T) async throws -> T {
    let server = try await SMTPTestServer.start(arguments, port: port)
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}
