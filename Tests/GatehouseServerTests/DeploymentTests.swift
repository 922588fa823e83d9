import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the deployment guide tells an operator to do, done to a real `gatehouse serve`: an online backup of its SQLite
/// database and a restore, and JSON logs for a collector.
extension CLITests {
    /// Starts `gatehouse serve` in `folder`: the process and its base URL.
    func startServer(in folder: URL, _ extra: [String] = []) async throws -> (ChildProcess, String) {
        let server = try ChildProcess(
            Self.binary, ["serve", "--config", "gatehouse.yaml", "--port", "0"] + extra, environment: Self.environment, directory: folder
        )
        let banner = try await server.waitForOutput("database:")
        let base = try #require(banner.firstMatch(of: /listening on (http:\/\/127\.0\.0\.1:\d+)/)?.output.1, "\(banner)")
        return (server, String(base))
    }

    /// POSTs JSON to a server the test started; the status.
    func post(_ url: String, _ body: [String: String]) async throws -> Int {
        try await Self.postJSON(url, body).status
    }

    /// POSTs JSON to a server the test started; the status and the answer's JSON object.
    static func postJSON(_ url: String, _ body: [String: String]) async throws -> (status: Int, body: [String: Any]) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }

    @Test func anOnlineBackupOfSQLiteRestoresTheAccountsItHeld() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try writeConfiguration(in: folder, app: "deploy-app", confirmation: "auto")
        let (server, base) = try await startServer(in: folder)
        defer { server.signal(SIGKILL) }
        let local = "\(base)/api/client/v2.0/app/deploy-app/auth/providers/local-userpass"
        #expect(try await post("\(local)/register", ["email": "before@example.com", "password": "kept in the backup"]) == 201)

        // The guide's backup: SQLite's online backup API while the server runs (`sqlite3 … ".backup …"`, here
        // through Python's sqlite3 module, which calls the same API).
        let python = try #require(ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"], "run the tests with scripts/test.sh")
        let backup = try await FaultSuiteTests.spawn(
            [python, "-c", "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))",
             folder.appendingPathComponent("gatehouse.sqlite").path, folder.appendingPathComponent("backup.sqlite").path],
            within: .seconds(60)
        )
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(try await post("\(local)/register", ["email": "after@example.com", "password": "not in the backup"]) == 201)
        server.signal(SIGTERM)
        #expect(try await server.waitForExit(within: .seconds(20)) == 0)
        await server.stop()

        // Restore: the server stopped, the copy put in place of the database and its WAL files.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(at: folder.appendingPathComponent("gatehouse.sqlite\(suffix)")) }
        try FileManager.default.copyItem(at: folder.appendingPathComponent("backup.sqlite"), to: folder.appendingPathComponent("gatehouse.sqlite"))
        let (restored, restoredBase) = try await startServer(in: folder)
        defer { restored.signal(SIGKILL) }
        let login = "\(restoredBase)/api/client/v2.0/app/deploy-app/auth/providers/local-userpass/login"
        #expect(try await post(login, ["username": "before@example.com", "password": "kept in the backup"]) == 200)
        #expect(try await post(login, ["username": "after@example.com", "password": "not in the backup"]) == 401)
        restored.signal(SIGTERM)
        #expect(try await restored.waitForExit(within: .seconds(20)) == 0)
        await restored.stop()
    }

    @Test func serveWritesJSONLogLinesWhenAskedAndRefusesAnUnknownFormat() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try writeConfiguration(in: folder, app: "deploy-app", confirmation: "auto")
        let (server, base) = try await startServer(in: folder, ["--log-format", "json"])
        defer { server.signal(SIGKILL) }
        var request = URLRequest(url: URL(string: "\(base)/healthz")!)
        request.setValue("lb-check-42", forHTTPHeaderField: "X-Request-Id")
        let (_, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Request-Id") == "lb-check-42")
        server.signal(SIGTERM)
        #expect(try await server.waitForExit(within: .seconds(20)) == 0)
        let lines = server.standardError.split(separator: "\n").filter { !$0.isEmpty }
        #expect(!lines.isEmpty)
        let objects = lines.map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
        #expect(objects.allSatisfy { $0 != nil }, "every line is a JSON object: \(lines)")
        #expect(objects.contains { $0?["message"] == "request" && $0?["route"] == "/healthz" && $0?["request_id"] == "lb-check-42" }, "\(lines)")
        await server.stop()

        let refused = try await run(["serve", "--config", "gatehouse.yaml", "--log-format", "xml"], in: folder)
        #expect(refused.status == 78 && refused.stderr.contains("--log-format"))
    }
}
