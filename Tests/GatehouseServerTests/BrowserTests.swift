import Foundation
import GatehouseArgon2
import GatehouseDomain
import GatehouseTestSupport
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// A real browser (headless Chromium, driven by Selenium) opens the links from delivered emails and uses the
/// hosted pages. Screenshots land in `.build-screenshots/` at the package root.
///
/// Needs `GATEHOUSE_PYTHON` (a Python with selenium) and Chromium with its driver; `bash scripts/test.sh` installs
/// and sets both. `GATEHOUSE_SKIP_BROWSER=1` skips these tests explicitly.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["GATEHOUSE_SKIP_BROWSER"] != "1"))
struct BrowserTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let screenshots = root.appendingPathComponent(".build-screenshots")

    struct Outcome: Decodable {
        var ok: Bool
        var error: String?
        var screenshots: [String]
    }

    /// Runs Tests/Tools/browser.py and returns its verdict. The browser talks to the in-process server, so the wait
    /// suspends (``ChildProcess``) rather than holding a thread that server needs.
    func browse(_ arguments: [String]) async throws -> Outcome {
        guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"] else {
            Issue.record("GATEHOUSE_PYTHON is not set: run the browser tests with `bash scripts/test.sh`, which installs Chromium and Selenium")
            return Outcome(ok: false, error: "no python", screenshots: [])
        }
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: python), [Self.root.appendingPathComponent("Tests/Tools/browser.py").path] + arguments,
            within: .seconds(180)
        )
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        guard let outcome = try? JSONDecoder().decode(Outcome.self, from: Data(line.utf8)) else {
            Issue.record("browser.py printed no verdict (exit \(result.status)): \(line)\n\(result.stderr)")
            return Outcome(ok: false, error: line, screenshots: [])
        }
        return outcome
    }

    func withLiveGatehouse(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        var configuration = testConfiguration()
        configuration.server.publicURL = nil  // links point at the real port
        let gatehouse = try await AuthServer.open(configuration: configuration, logger: quietLogger)
        do {
            try await gatehouse.makeApplication().test(.live) { client in try await body(client) }
            try await gatehouse.close()
        } catch {
            try? await gatehouse.close()
            throw error
        }
    }

    /// The full link of the newest email to `address`.
    func emailedLink(_ client: some TestClientProtocol, _ address: String) async throws -> String {
        let text = try #require(try await client.mailbox(address).first?.text)
        return String(try #require(text.firstMatch(of: /http:\/\/127\.0\.0\.1:\d+\/app\/[^\s]+/)?.output))
    }

    @Test func aPersonConfirmsTheirEmailInTheBrowser() async throws {
        try await withLiveGatehouse { client in
            #expect(try await client.register("browser@example.com").status == .created)
            let link = try await emailedLink(client, "browser@example.com")
            #expect(link.contains("/app/test-app/confirm?token="))
            let outcome = try await browse(["confirm", link, Self.screenshots.path])
            #expect(outcome.ok, "\(outcome.error ?? "")")
            #expect(outcome.screenshots.count == 2)
            #expect(try await client.login("browser@example.com").status == .ok)
        }
    }

    @Test func aPersonResetsTheirPasswordInTheBrowser() async throws {
        try await withLiveGatehouse { client in
            _ = try await client.signUp("browser-reset@example.com", "the old password")
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "browser-reset@example.com"))
            let link = try await emailedLink(client, "browser-reset@example.com")
            #expect(link.contains("/app/test-app/reset?token="))
            let outcome = try await browse(["reset", link, "a new password from the browser", Self.screenshots.path])
            #expect(outcome.ok, "\(outcome.error ?? "")")
            #expect(outcome.screenshots.count == 3)
            #expect(try await client.login("browser-reset@example.com", "the old password").status == .unauthorized)
            #expect(try await client.login("browser-reset@example.com", "a new password from the browser").status == .ok)
        }
    }
}
