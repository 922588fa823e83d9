import Foundation
import GatehouseTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The binary `scripts/release.sh` made, when the test command built one.
private let releaseBinary = ProcessInfo.processInfo.environment["GATEHOUSE_RELEASE_BINARY"]

/// The release binary (`scripts/release.sh`), run as an operator runs it: copied alone into an empty folder and started
/// with an environment that holds no Swift toolchain (no `PATH` to one, no `LD_LIBRARY_PATH`), on a fresh SQLite
/// database, with the production password hashing.
///
/// The test command builds the binary after the suite's first run and runs this suite with `GATEHOUSE_RELEASE_BINARY`
/// naming it; a plain `swift test` skips it (a release build takes about 12 minutes).
@Suite(.enabled(if: releaseBinary != nil, "scripts/test.sh builds the release binary and sets GATEHOUSE_RELEASE_BINARY"))
struct ReleaseBinaryTests {

    /// The whole environment the binary gets: a `PATH` of one empty folder and a home. Nothing of the toolchain, of
    /// the build folder or of the test process reaches it.
    static func environment(in folder: URL) -> [String: String] {
        ["PATH": folder.appendingPathComponent("empty-bin").path, "HOME": folder.path]
    }

    /// Copies the binary, alone, into a new folder: `folder/bin/gatehouse`.
    static func install(in folder: URL) throws -> URL {
        let built = URL(fileURLWithPath: try #require(releaseBinary))
        for sub in ["bin", "empty-bin", "data"] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        let binary = folder.appendingPathComponent("bin/gatehouse")
        try FileManager.default.copyItem(at: built, to: binary)
        return binary
    }

    @Test func itLinksNoSwiftLibraryAndFindsEveryLibraryItNeedsOnTheHost() async throws {
        let folder = try CLITests().temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let binary = try Self.install(in: folder)

        // ldd resolves the binary's libraries as the loader will, here with no LD_LIBRARY_PATH.
        let ldd = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ldd"), [binary.path], environment: Self.environment(in: folder))
        #expect(ldd.status == 0, "\(ldd.stderr)")
        let libraries = ldd.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(libraries.contains { $0.hasPrefix("libc.so") }, "\(ldd.stdout)")
        #expect(!libraries.contains { $0.contains("not found") }, "\(ldd.stdout)")
        #expect(!libraries.contains { $0.contains("swift") || $0.contains("Foundation") || $0.contains("dispatch") }, "\(ldd.stdout)")
        // Every library resolved comes from the system's folders.
        for line in libraries where line.contains("=>") {
            let path = line.components(separatedBy: "=> ")[1]
            #expect(path.hasPrefix("/lib") || path.hasPrefix("/usr/lib"), "\(line)")
        }

        let version = try await ChildProcess.run(binary, ["--version"], environment: Self.environment(in: folder), directory: folder)
        #expect(version.status == 0, "\(version.stderr)")
        #expect(version.stdout.firstMatch(of: /^\d+\.\d+\.\d+/) != nil, "\(version.stdout)")
    }

    @Test func aCopyAloneStartsOnAFreshDatabaseServesASignUpAndALoginAndStopsOnSIGTERM() async throws {
        let folder = try CLITests().temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let binary = try Self.install(in: folder)
        let database = folder.appendingPathComponent("data/gatehouse.sqlite")
        // The production defaults: Argon2id at its default cost, rate limits and audit on.
        try """
            database: { url: "sqlite:\(database.path)" }
            apps:
              - id: release-app
                providers: { local-userpass: { confirmation: auto } }
            """.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)

        for run in 1...2 {
            let started = ContinuousClock.now
            let server = try ChildProcess(
                binary, ["serve", "--config", "gatehouse.yaml", "--port", "0"], environment: Self.environment(in: folder), directory: folder
            )
            defer { server.signal(SIGKILL) }
            let banner = try await server.waitForOutput("database:")
            let base = String(try #require(banner.firstMatch(of: /listening on (http:\/\/127\.0\.0\.1:\d+)/)?.output.1, "\(banner)"))
            #expect(try await Self.status(of: "\(base)/readyz") == 200)
            let ready = ContinuousClock.now - started

            let local = "\(base)/api/client/v2.0/app/release-app/auth/providers/local-userpass"
            let credentials = ["email": "operator@example.com", "password": "a release passphrase"]
            if run == 1 {
                #expect(FileManager.default.fileExists(atPath: database.path), "the first start creates the database")
                #expect(try await CLITests().post("\(local)/register", credentials) == 201)
            }
            // The second run logs in to the account the first one made: SIGTERM left the database whole.
            let login = try await CLITests.postJSON("\(local)/login", ["username": credentials["email"]!, "password": credentials["password"]!])
            #expect(login.status == 200)
            #expect((login.body["access_token"] as? String)?.split(separator: ".").count == 3, "\(login.body)")
            #expect((login.body["refresh_token"] as? String)?.isEmpty == false)

            server.signal(SIGTERM)
            let status = try await server.waitForExit(within: .seconds(20))
            #expect(server.process.terminationReason == .exit)
            #expect(status == 0, "\(server.standardError)")
            await server.stop()
            // What the deployment guide quotes: the start to ready time of this binary (the suite's output has it).
            print("release binary start \(run): ready in \(ready)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("bin").path) == ["gatehouse"])
    }

    static func status(of url: String) async throws -> Int {
        let (_, response) = try await URLSession.shared.data(from: URL(string: url)!)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }
}
