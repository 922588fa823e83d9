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

/// `Tests/Tools/smtp_server.py` running under `GATEHOUSE_PYTHON`, on 127.0.0.1.
final class SMTPTestServer: @unchecked Sendable {
    let process: Process
    let directory: URL
    let mailDirectory: URL
    let port: Int
    private let input: Pipe

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

    private init(process: Process, directory: URL, port: Int, input: Pipe) {
        self.process = process
        self.directory = directory
        self.mailDirectory = directory.appendingPathComponent("mail")
        self.port = port
        self.input = input
    }

    /// Starts the server and waits (at most 30 s) until it listens.
    static func start(_ arguments: [String] = [], port: Int = 0) async throws -> SMTPTestServer {
        let directory = try temporaryDirectory()
        let output = directory.appendingPathComponent("stdout.txt")
        let errors = directory.appendingPathComponent("stderr.txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        let process = Process()
        let input = Pipe()
        do {
            process.executableURL = URL(fileURLWithPath: try python)
            process.arguments = ["-u", script, "--dir", directory.appendingPathComponent("mail").path, "--port", "\(port)"] + arguments
            process.standardOutput = try FileHandle(forWritingTo: output)
            process.standardError = try FileHandle(forWritingTo: errors)
            // The server exits when this pipe closes: when the test process ends, however it ends.
            process.standardInput = input
            try process.run()
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                let printed = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
                if let match = printed.firstMatch(of: /READY (\d+)/), let bound = Int(match.output.1) {
                    return SMTPTestServer(process: process, directory: directory, port: bound, input: input)
                }
                guard process.isRunning else {
                    let log = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
                    throw SMTPTestSetupError(description: "smtp_server.py exited with status \(process.terminationStatus):\n\(log)")
                }
                guard ContinuousClock.now < deadline else {
                    throw SMTPTestSetupError(description: "smtp_server.py did not start listening within 30 s")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        } catch {
            stop(process, input: input, directory: directory)
            throw error
        }
    }

    /// Ends the server, waits for it, and removes its folder.
    func stop() {
        Self.stop(process, input: input, directory: directory)
    }

    /// SIGKILL, not `terminate()`'s SIGTERM: a child started from a test's worker thread inherits its signal mask,
    /// which blocks SIGTERM (the script unblocks it, but nothing is left to chance here).
    private static func stop(_ process: Process, input: Pipe, directory: URL) {
        try? input.fileHandleForWriting.close()
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
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
        server.stop()
        return result
    } catch {
        server.stop()
        throw error
    }
}
