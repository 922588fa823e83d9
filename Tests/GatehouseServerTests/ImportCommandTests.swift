import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import HTTPTypes
import Testing

/// `gatehouse import --from`, run as an operator would: the report file, the dry run, a re-run, the progress line on a
/// terminal, and the refusals of bad flags.
extension CLITests {
    /// Writes `gatehouse.yaml` in `folder`: SQLite there (`gatehouse.sqlite`), one app with email/password accounts
    /// confirmed as `confirmation` says, and a cheap hash.
    func writeConfiguration(in folder: URL, app: String = "cli-app", confirmation: String = "email") throws {
        let yaml = """
            database: { url: "sqlite:\(folder.path)/gatehouse.sqlite" }
            apps:
              - id: \(app)
                providers: { local-userpass: { confirmation: \(confirmation) } }
                passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
            """
        try yaml.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
    }

    @Test func importFromACSVReportsEachSkippedRecordAndIsSafeToRunAgain() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try writeConfiguration(in: folder)
        let files = try await ForeignImportTests.exports()
        try #require(files["csv"]).write(to: folder.appendingPathComponent("users.csv"), atomically: true, encoding: .utf8)
        let arguments = ["import", "--config", "gatehouse.yaml", "--from", "csv", "--app", "cli-app", "--report", "report.tsv", "users.csv"]

        let dry = try await run(arguments + ["--dry-run"], in: folder)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stderr.contains("dry run, nothing was written: 8 records: 5 users imported"), "\(dry.stderr)")
        let first = try await run(arguments, in: folder)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("imported: 8 records: 5 users imported (0 without a password, 0 pending confirmation), 3 skipped"), "\(first.stderr)")
        let report = try String(contentsOf: folder.appendingPathComponent("report.tsv"), encoding: .utf8)
        let lines = report.split(separator: "\n")
        #expect(lines.count == 3 && lines[0].hasPrefix("record 6\tid=t-4\temail=tam@example.com\tskipped: "), "\(report)")
        let permissions = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent("report.tsv").path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)

        let again = try await run(arguments, in: folder)
        #expect(again.stderr.contains("0 users imported"), "\(again.stderr)")
        #expect(try String(contentsOf: folder.appendingPathComponent("report.tsv"), encoding: .utf8).components(separatedBy: "already imported").count == 6)

        // The imported users sign in with their old passwords against the server on that database.
        let config = try ConfigurationLoader(environment: [:]).load(file: folder.appendingPathComponent("gatehouse.yaml").path)
        try await withGatehouse(config) { _, client in
            let right = try await client.login("quinn@example.com", "csv one", app: "cli-app")
            let wrong = try await client.login("ray@example.com", "csv one", app: "cli-app")
            #expect(right.status == .ok && wrong.status == .unauthorized)
        }
    }

    @Test func importShowsItsProgressOnATerminalOnly() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try writeConfiguration(in: folder)
        let rows = ["email,email_verified"] + (0..<1200).map { "user\($0)@example.com,true" }
        try rows.joined(separator: "\n").write(to: folder.appendingPathComponent("users.csv"), atomically: true, encoding: .utf8)
        let command = "\(Self.binary.path) import --config gatehouse.yaml --from csv --app cli-app users.csv"
        // script(1) gives the command a terminal; its standard error is then that terminal.
        let terminal = try await ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qec", command, "/dev/null"], environment: Self.environment, directory: folder
        )
        #expect(terminal.status == 0, "\(terminal.stdout)")
        #expect(terminal.stdout.contains("importing  1200 records  1200 imported"), "\(terminal.stdout)")
        #expect(terminal.stdout.contains("100%  ETA 0:00"), "\(terminal.stdout)")
        #expect(terminal.stdout.contains("1200 users imported"))
        // Into a file, no progress line: only the summary.
        let piped = try await run(["import", "--config", "gatehouse.yaml", "--from", "csv", "--app", "cli-app", "users.csv"], in: folder)
        #expect(!piped.stderr.contains("importing") && !piped.stderr.contains("\u{1B}"), "\(piped.stderr)")
        #expect(piped.stderr.contains("1200 records: 0 users imported") && piped.stderr.contains("1200 skipped"), "\(piped.stderr)")
    }

    @Test func importRefusesFlagsItCannotUse() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try writeConfiguration(in: folder)
        try "{\"users\": []}".write(to: folder.appendingPathComponent("users.json"), atomically: true, encoding: .utf8)
        let base = ["import", "--config", "gatehouse.yaml"]
        let unknownFormat = try await run(base + ["--from", "cognito", "--app", "cli-app", "users.json"], in: folder)
        #expect(unknownFormat.status == 64 && unknownFormat.stderr.contains("firebase, supabase, auth0, keycloak, csv"), "\(unknownFormat.stderr)")
        let noApp = try await run(base + ["--from", "firebase", "users.json"], in: folder)
        #expect(noApp.status == 64 && noApp.stderr.contains("--app"))
        let unknownApp = try await run(base + ["--from", "csv", "--app", "other", "users.json"], in: folder)
        #expect(unknownApp.status == 65 && unknownApp.stderr.contains("no app \"other\""), "\(unknownApp.stderr)")
        let noParameters = try await run(base + ["--from", "firebase", "--app", "cli-app", "users.json"], in: folder)
        #expect(noParameters.status == 65 && noParameters.stderr.contains("--hash-algo"), "\(noParameters.stderr)")
        let missingFile = try await run(base + ["--from", "csv", "--app", "cli-app", "absent.csv"], in: folder)
        #expect(missingFile.status == 66)
        // Without --from the file is a `gatehouse export`, imported whole: a dry run or a report of it is refused before
        // anything is read (a dry run used to import the file).
        let dryRun = try await run(base + ["--dry-run", "users.json"], in: folder)
        #expect(dryRun.status == 64 && dryRun.stderr.contains("--dry-run goes with --from"), "\(dryRun.stderr)")
        let report = try await run(base + ["--report", "skipped.txt", "--app", "cli-app", "users.json"], in: folder)
        #expect(report.status == 64 && report.stderr.contains("--report, --app go with --from"), "\(report.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("skipped.txt").path))
    }

    /// The file of a dry run without --from is not written into the database (the review's case: it was, whole).
    @Test func aDryRunOfAnExportFileWritesNothing() async throws {
        let source = try await TransferTests.makeSource()
        defer { try? FileManager.default.removeItem(at: source.folder) }
        let lines = try await TransferTests.export(source.configuration, clock: source.clock, sessions: false)
        try lines.joined(separator: "\n").appending("\n").write(to: source.folder.appendingPathComponent("export.jsonl"), atomically: true, encoding: .utf8)
        let (target, drop) = try await TransferTests.target(in: source.folder.appendingPathComponent("dry"))
        let yaml = "apps:\n  - id: test-app\n    providers: { local-userpass: { confirmation: email } }\n  - id: auto-app\n    providers: { local-userpass: { confirmation: auto } }\n"
        try yaml.write(to: source.folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
        let url = target.database.url.commandLineValue
        let dry = try await run(["import", "--config", "gatehouse.yaml", "--database", url, "--dry-run", "export.jsonl"], in: source.folder)
        #expect(dry.status == 64, "\(dry.stderr)")
        let again = try await run(["import", "--config", "gatehouse.yaml", "--database", url, "export.jsonl"], in: source.folder)
        #expect(again.status == 0 && again.stderr.contains("imported 3 users"), "the dry run wrote nothing, so the import finds no conflict: \(again.stderr)")
        await drop()
    }

    /// An export or import is one transaction as long as the file takes, not bound by `query_timeout`, which bounds a
    /// running server's statements (plus two seconds' grace): a large deployment moving to PostgreSQL must not fail
    /// after ten seconds. The file arrives slowly here, as from a slow disk or a network copy: the shell that feeds it
    /// pauses four seconds after the header, past the deadline of a one-second timeout (three seconds with the grace).
    @Test(.enabled(if: TestDatabase.postgresAdmin != nil, "PostgreSQL only: SQLite has no statement deadline"))
    func anImportOutlastsTheStatementDeadline() async throws {
        let source = try await TransferTests.makeSource()
        defer { try? FileManager.default.removeItem(at: source.folder) }
        let lines = try await TransferTests.export(source.configuration, clock: source.clock, sessions: false)
        try lines.joined(separator: "\n").appending("\n").write(to: source.folder.appendingPathComponent("export.jsonl"), atomically: true, encoding: .utf8)
        let (target, drop) = try await TransferTests.target(in: source.folder.appendingPathComponent("slow"))
        let url = target.database.url.commandLineValue + "&query_timeout=1&connect_timeout=1"
        let yaml = "apps:\n  - id: test-app\n    providers: { local-userpass: { confirmation: email } }\n  - id: auto-app\n    providers: { local-userpass: { confirmation: auto } }\n"
        try yaml.write(to: source.folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
        let command = "(head -n 1 export.jsonl; sleep 4; tail -n +2 export.jsonl) | \"$0\" import --config gatehouse.yaml --database \"$1\""
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", command, Self.binary.path, url], environment: Self.environment, directory: source.folder
        )
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("imported 3 users"), "\(result.stderr)")
        await drop()
    }
}
