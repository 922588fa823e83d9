import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `gatehouse` executable, run as a user would.
@Suite(.serialized) struct CLITests {
    /// `gatehouse` sits beside the test bundle in the build folder.
    static var binary: URL {
        let bundleFolder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [bundleFolder, Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()] {
            let url = candidate.appendingPathComponent("gatehouse")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return bundleFolder.appendingPathComponent("gatehouse")
    }

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `gatehouse` to completion in `folder` (``ChildProcess``: files for its output, a deadline, no thread
    /// blocked while it runs).
    func run(_ arguments: [String], in folder: URL, environment: [String: String] = [:], input: Data? = nil) async throws -> Run {
        let result = try await ChildProcess.run(
            Self.binary, arguments, environment: Self.environment.merging(environment) { $1 }, directory: folder, input: input
        )
        return Run(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }

    /// The test process's environment without its `GATEHOUSE_` variables: the binary sees only what a test gives it.
    static var environment: [String: String] { ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GATEHOUSE_") } }

    func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test func aBadConfigurationExitsBeforeListeningAndNamesTheKey() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try "server: { port: 9999 }\napps:\n  - id: a\n    accessTokenTTL: soon\n".write(to: folder.appendingPathComponent("bad.yaml"), atomically: true, encoding: .utf8)
        let result = try await run(["serve", "--config", "bad.yaml"], in: folder)
        #expect(result.status == 78)
        #expect(result.stderr.contains("apps[0].accessTokenTTL"), "\(result.stderr)")
        #expect(!result.stdout.contains("listening"))

        let badFlag = try await run(["serve", "--port", "http"], in: folder)
        #expect(badFlag.status == 78)
        #expect(badFlag.stderr.contains("--port"))

        let badEnv = try await run(["serve"], in: folder, environment: ["GATEHOUSE_DATABASE_URL": "mongodb://x"])
        #expect(badEnv.status == 78)
        #expect(badEnv.stderr.contains("GATEHOUSE_DATABASE_URL"))
        // Nothing was created for a configuration that never started.
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(".gatehouse").path))
    }

    @Test func migrateAppliesOnceThenReportsUpToDate() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try await run(["migrate"], in: folder)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("applied migrations 1"))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(".gatehouse/gatehouse.sqlite").path))
        let second = try await run(["migrate"], in: folder)
        #expect(second.stdout.contains("up to date"))
    }

    /// `users set-data` writes custom data that the user's next access token carries.
    @Test func usersSetDataReachesTheNextAccessToken() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (config, login) = try await cliAppWithUser(in: folder)
        let set = try await run(["users", "set-data", "--config", "gatehouse.yaml", "--app", "cli-app", "--user", login.userId, #"{"plan":"pro"}"#], in: folder)
        #expect(set.status == 0, "\(set.stderr)")
        let refused = try await run(["users", "set-data", "--config", "gatehouse.yaml", "--app", "cli-app", "--user", login.userId, "[1]"], in: folder)
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("JSON object"))

        try await withGatehouse(config) { _, client in
            let access = try await client.call(Path.session, bearer: login.refreshToken).decode(SessionResponse.self).accessToken
            let userData = try #require(try jwtPayload(access)["user_data"] as? [String: Any])
            #expect(userData["plan"] as? String == "pro")
        }
    }

    /// `apikeys create/list/disable/enable/delete`: the key is printed once and logs in as its server user.
    @Test func apikeysCommandsManageServerKeys() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("db.sqlite").path))
        let yaml = """
            database: { url: "\(url.commandLineValue)" }
            apps:
              - id: cli-app
                providers: { api-key: { enabled: true } }
                passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
              - id: no-keys
                passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
            """
        try yaml.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
        let config = try ConfigurationLoader(environment: [:]).load(file: folder.appendingPathComponent("gatehouse.yaml").path)

        let created = try await run(["apikeys", "create", "--config", "gatehouse.yaml", "--app", "cli-app", "--name", "backend"], in: folder)
        #expect(created.status == 0, "\(created.stderr)")
        let id = String(try #require(created.stdout.firstMatch(of: /(?m)^id:\s+([0-9a-f]{24})$/)?.output.1, "\(created.stdout)"))
        let key = String(try #require(created.stdout.firstMatch(of: /(?m)^key:\s+([0-9a-f]{64})$/)?.output.1, "\(created.stdout)"))
        let userId = String(try #require(created.stdout.firstMatch(of: /(?m)^user id:\s+([0-9a-f]{24})$/)?.output.1))
        #expect(created.stderr.contains("cannot be shown again"))

        let listed = try await run(["apikeys", "list", "--config", "gatehouse.yaml", "--app", "cli-app"], in: folder)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains(id) && listed.stdout.contains("enabled") && listed.stdout.contains("backend"))
        #expect(!listed.stdout.contains(key))
        let duplicate = try await run(["apikeys", "create", "--config", "gatehouse.yaml", "--app", "cli-app", "--name", "backend"], in: folder)
        #expect(duplicate.status == 65)
        #expect(duplicate.stderr.contains("already has a server API key"), "\(duplicate.stderr)")
        let unknownApp = try await run(["apikeys", "list", "--config", "gatehouse.yaml", "--app", "nope"], in: folder)
        #expect(unknownApp.status == 65)
        #expect(unknownApp.stderr.contains("no app with id nope"))
        // An app with the provider off gets its key, with a warning that it cannot log in yet.
        let off = try await run(["apikeys", "create", "--config", "gatehouse.yaml", "--app", "no-keys", "--name", "early"], in: folder)
        #expect(off.status == 0)
        #expect(off.stderr.contains("providers.api-key off"), "\(off.stderr)")

        try await withGatehouse(config) { _, client in
            let login = try await client.loginWithKey(key, app: "cli-app")
            #expect(login.status == .ok, "\(login.text)")
            #expect(try login.decode(LoginResponse.self).userId == userId)
        }

        #expect(try await run(["apikeys", "disable", "--config", "gatehouse.yaml", "--app", "cli-app", "--id", id], in: folder).status == 0)
        #expect(try await run(["apikeys", "list", "--config", "gatehouse.yaml", "--app", "cli-app"], in: folder).stdout.contains("disabled"))
        try await withGatehouse(config) { _, client in
            let refused = try await client.loginWithKey(key, app: "cli-app")
            #expect(refused.status == .unauthorized)
        }
        #expect(try await run(["apikeys", "enable", "--config", "gatehouse.yaml", "--app", "cli-app", "--id", id], in: folder).status == 0)

        let deleted = try await run(["apikeys", "delete", "--config", "gatehouse.yaml", "--app", "cli-app", "--id", id], in: folder)
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stdout.contains("deleted"))
        let again = try await run(["apikeys", "delete", "--config", "gatehouse.yaml", "--app", "cli-app", "--id", id], in: folder)
        #expect(again.status == 65)
        #expect(again.stderr.contains("no server API key \(id)"))
        #expect(try await run(["apikeys", "list", "--config", "gatehouse.yaml", "--app", "cli-app"], in: folder).stdout.isEmpty)
        try await withGatehouse(config) { _, client in
            let refused = try await client.loginWithKey(key, app: "cli-app")
            #expect(refused.status == .unauthorized)
        }
        await drop()
    }

    /// SQLite → the suite's database (PostgreSQL on its run) through the two commands, by file and by pipe.
    @Test func exportAndImportMoveADeploymentAndRefuseAConflict() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let yaml = """
            apps:
              - id: cli-app
                providers: { local-userpass: { confirmation: auto } }
                passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
            """
        try yaml.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
        var config = try ConfigurationLoader(environment: [:]).load(file: folder.appendingPathComponent("gatehouse.yaml").path)
        config.database.url = .sqliteFile(folder.appendingPathComponent("source.sqlite").path)
        let login = try await withGatehouseResult(config) { _, client in
            #expect(try await client.register("cli@example.com", "before the move", app: "cli-app").status == .created)
            return try await client.login("cli@example.com", "before the move", app: "cli-app").decode(LoginResponse.self)
        }

        let exported = try await run(["export", "--config", "gatehouse.yaml", "--database", "sqlite:source.sqlite", "--sessions", "-o", "dump.jsonl"], in: folder)
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(exported.stderr.contains("exported 1 users, 1 identities, 1 email/password accounts, 1 sessions, 1 signing keys"), "\(exported.stderr)")
        let dump = folder.appendingPathComponent("dump.jsonl").path
        let permissions = try FileManager.default.attributesOfItem(atPath: dump)[.posixPermissions] as? Int
        #expect(permissions == 0o600)

        let (target, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("target.sqlite").path))
        let imported = try await run(["import", "--config", "gatehouse.yaml", "--database", target.commandLineValue, "dump.jsonl"], in: folder)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("imported 1 users"), "\(imported.stderr)")
        let again = try await run(["import", "--config", "gatehouse.yaml", "--database", target.commandLineValue, "dump.jsonl"], in: folder)
        #expect(again.status == 65)
        #expect(again.stderr.contains("line 3: user \(login.userId) is already in the target"), "\(again.stderr)")

        config.database.url = target
        try await withGatehouse(config) { _, client in
            let relogin = try await client.login("cli@example.com", "before the move", app: "cli-app")
            #expect(relogin.status == .ok)
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .created)
        }
        await drop()

        // By pipe: export to standard output, import from standard input; a cut-off pipe is refused.
        let piped = try await run(["export", "--config", "gatehouse.yaml", "--database", "sqlite:source.sqlite"], in: folder)
        #expect(piped.status == 0)
        #expect(piped.stdout.split(separator: "\n").count == 3)
        let cut = try await run(["import", "--config", "gatehouse.yaml", "--database", "sqlite:cut.sqlite"], in: folder, input: Data(piped.stdout.utf8.dropLast(30)))
        #expect(cut.status == 65)
        #expect(cut.stderr.contains("nothing was written"), "\(cut.stderr)")
        let whole = try await run(["import", "--config", "gatehouse.yaml", "--database", "sqlite:piped.sqlite", "-"], in: folder, input: Data(piped.stdout.utf8))
        #expect(whole.status == 0, "\(whole.stderr)")
        #expect(whole.stderr.contains("imported 1 users, 1 identities, 1 email/password accounts, 0 sessions, 0 signing keys"), "\(whole.stderr)")
    }

    @Test func usersLogoutDisableAndEnable() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (config, login) = try await cliAppWithUser(in: folder)
        let user = ["--config", "gatehouse.yaml", "--app", "cli-app", "--user", login.userId]
        let logout = try await run(["users", "logout"] + user, in: folder)
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(logout.stdout.contains("ended 1 sessions"))
        #expect(try await run(["users", "disable"] + user, in: folder).status == 0)
        try await withGatehouse(config) { _, client in
            let refused = try await client.login("cli@example.com", app: "cli-app")
            #expect(refused.error?.errorCode == .userDisabled)
        }
        #expect(try await run(["users", "enable"] + user, in: folder).status == 0)
        try await withGatehouse(config) { _, client in
            let accepted = try await client.login("cli@example.com", app: "cli-app")
            #expect(accepted.status == .ok)
        }
        let unknown = try await run(["users", "disable", "--config", "gatehouse.yaml", "--app", "cli-app", "--user", "000000000000000000000000"], in: folder)
        #expect(unknown.status == 65)
        #expect(unknown.stderr.contains("no user"))

        // Everything above is in the audit log, oldest first; --user and --lines narrow it.
        let audit = try await run(["audit", "tail", "--config", "gatehouse.yaml", "--app", "cli-app"], in: folder)
        #expect(audit.status == 0, "\(audit.stderr)")
        let kinds = audit.stdout.split(separator: "\n").map { $0.components(separatedBy: "  ")[2] }
        #expect(kinds == ["registration", "login_succeeded", "logout_everywhere", "user_disabled", "login_failed", "user_enabled", "login_succeeded"])
        let mine = try await run(["audit", "tail", "--config", "gatehouse.yaml", "--user", login.userId, "-n", "2"], in: folder)
        #expect(mine.stdout.split(separator: "\n").count == 2)
        #expect(mine.stdout.split(separator: "\n").first?.contains("user_enabled  user=\(login.userId)") == true)
    }

    @Test func keysRotateListAndRetire() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(try await run(["migrate"], in: folder).status == 0)
        // The first key is made at the first start; rotate on an empty database makes one too.
        let first = try await run(["keys", "rotate"], in: folder)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try await run(["keys", "rotate"], in: folder)
        let kids = [first, second].compactMap { $0.stdout.firstMatch(of: /new signing key (\S+);/).map { String($0.output.1) } }
        #expect(kids.count == 2)
        let list = try await run(["keys", "list"], in: folder)
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix(kids[0]) == true && lines.first?.hasSuffix("verifying") == true)
        #expect(lines.last?.hasPrefix(kids[1]) == true && lines.last?.hasSuffix("signing") == true)
        #expect(try await run(["keys", "retire", kids[0]], in: folder).status == 0)
        let last = try await run(["keys", "retire", kids[1]], in: folder)
        #expect(last.status == 65)
        #expect(last.stderr.contains("last active key"))
        #expect(try await run(["keys", "list"], in: folder).stdout.contains("retired"))
        let audit = try await run(["audit", "tail", "--app", "*"], in: folder).stdout.split(separator: "\n")
        #expect(audit.map { $0.components(separatedBy: "  ")[2] } == ["signing_key_rotated", "signing_key_rotated", "signing_key_retired"])
        #expect(audit.last?.hasSuffix("kid=\(kids[0])") == true)
    }

    /// With no configuration: SQLite under `.gatehouse/`, the dev app and mailbox, and a clean exit on SIGTERM
    /// and on SIGINT.
    @Test(arguments: [SIGTERM, SIGINT])
    func serveStartsWithDefaultsAndStopsGracefully(signal: Int32) async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let server = try ChildProcess(Self.binary, ["serve", "--port", "0"], environment: Self.environment, directory: folder)
        defer { server.signal(SIGKILL) }
        let banner = try await server.waitForOutput("dev mailbox:")
        let base = try #require(banner.firstMatch(of: /listening on (http:\/\/127\.0\.0\.1:\d+)/)?.output.1, "\(banner)")
        #expect(banner.contains("app id:       gatehouse-dev"))
        #expect(banner.contains("dev mailbox:  \(base)/_dev/mailbox"))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(".gatehouse/gatehouse.sqlite").path))

        let (data, response) = try await URLSession.shared.data(from: URL(string: "\(base)/api/client/v2.0/app/gatehouse-dev/location")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("\"hostname\":\"\(base)\""))

        server.signal(signal)
        let status = try await server.waitForExit(within: .seconds(20))
        #expect(server.process.terminationReason == .exit)
        #expect(status == 0)
        await server.stop()
    }

    /// With its database unreachable, `serve` says so, listens with `/readyz` not ready, and still stops on SIGTERM.
    @Test func serveWaitsForAnUnreachableDatabaseAndStillStopsOnSIGTERM() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let closedPort = try freePort()
        let server = try ChildProcess(
            Self.binary,
            ["serve", "--port", "0", "--database", "postgres://gatehouse:secret-pw@127.0.0.1:\(closedPort)/gatehouse?sslmode=disable&connect_timeout=1"],
            environment: Self.environment, directory: folder
        )
        defer { server.signal(SIGKILL) }
        let banner = try await server.waitForOutput("dev mailbox:")
        let base = try #require(banner.firstMatch(of: /listening on (http:\/\/127\.0\.0\.1:\d+)/)?.output.1, "\(banner)")
        let (data, response) = try await URLSession.shared.data(from: URL(string: "\(base)/readyz")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 503)
        #expect(String(decoding: data, as: UTF8.self).contains("starting"))

        server.signal(SIGTERM)
        #expect(try await server.waitForExit(within: .seconds(20)) == 0)
        let stderr = server.standardError
        #expect(stderr.contains("is unreachable; listening anyway and retrying"), "\(stderr)")
        #expect(!stderr.contains("secret-pw"))
        await server.stop()
    }
}

/// Writes `gatehouse.yaml` in `folder` (SQLite there, app `cli-app` with auto-confirmed email/password accounts and a
/// cheap hash) and registers and logs in `cli@example.com` through an in-process server on it.
private func cliAppWithUser(in folder: URL) async throws -> (GatehouseConfiguration, LoginResponse) {
    let yaml = """
        database: { url: "sqlite:\(folder.path)/db.sqlite" }
        apps:
          - id: cli-app
            providers: { local-userpass: { confirmation: auto } }
            passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
        """
    try yaml.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
    let config = try ConfigurationLoader(environment: [:]).load(file: folder.appendingPathComponent("gatehouse.yaml").path)
    let login = try await withGatehouseResult(config) { _, client in
        #expect(try await client.register("cli@example.com", app: "cli-app").status == .created)
        return try await client.login("cli@example.com", app: "cli-app").decode(LoginResponse.self)
    }
    return (config, login)
}

extension CLITests {
    /// Without a configuration file the dev mailbox is on; bound to every interface it would show every link to
    /// the network, so `serve` refuses to start and says how to fix it.
    @Test func serveRefusesTheDevMailboxOnANonLoopbackBind() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try await run(["serve", "--host", "0.0.0.0", "--port", "0"], in: folder)
        #expect(result.status == 78)
        #expect(result.stderr.contains("dev.mailbox"), "\(result.stderr)")
        #expect(result.stderr.contains("--host 127.0.0.1"), "\(result.stderr)")
    }
}

extension CLITests {
    /// `gatehouse purge` runs the retention service once and says, per table, what it deleted and what is left.
    @Test func purgeDeletesWhatAgedOutAndReportsEveryTable() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try await cliAppWithUser(in: folder)
        let result = try await run(["purge", "--config", "gatehouse.yaml"], in: folder)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == RetentionTarget.allCases.count, "\(result.stdout)")
        // The user's login is recent: its audit events stay.
        let audit = try #require(lines.first { $0.hasPrefix("audit_events") })
        #expect(audit.contains("deleted 0"))
        #expect(!audit.hasSuffix("left 0"))
    }
}

extension CLITests {
    /// `gatehouse mail failed` says when there is nothing to list; `mail retry` needs ids or `--all`, not both.
    @Test func mailCommandsListNothingAndRefuseAmbiguousRetries() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try await cliAppWithUser(in: folder)
        let failed = try await run(["mail", "failed", "--config", "gatehouse.yaml"], in: folder)
        #expect(failed.status == 0, "\(failed.stderr)")
        #expect(failed.stdout.isEmpty)
        #expect(failed.stderr.contains("no failed emails"))
        #expect(try await run(["mail", "retry", "--config", "gatehouse.yaml"], in: folder).status != 0)
        #expect(try await run(["mail", "retry", "--config", "gatehouse.yaml", "--all", "some-id"], in: folder).status != 0)
        let all = try await run(["mail", "retry", "--config", "gatehouse.yaml", "--all"], in: folder)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("0 emails queued again"))
    }
}
