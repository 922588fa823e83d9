import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The fault suite: a `gatehouse serve` process under load while what it depends on fails, checked from outside as an
/// operator would see it. Every wait has a deadline, so a server that hangs fails the test instead of the run.
///
/// - PostgreSQL (a cluster of the test's own, so that freezing it stalls nothing else): frozen with SIGSTOP, then
///   stopped (`pg_ctl stop -m fast`) and started again, under concurrent registrations. Every request gets an answer
///   within the stated bound (`connect_timeout` + `query_timeout` + 2 s), 503 with `Retry-After` or success, never
///   500; `/readyz` answers within its 3 s; every acknowledged registration is there afterwards; SIGTERM ends the
///   process within `shutdownTimeout`.
/// - A lowered file limit with many slow clients: accepting pauses instead of spinning, the slow clients are closed
///   at their deadline, and the server serves again.
/// (A full SQLite disk is in ``StoreFaultTests``; SMTP down then up in the outbox delivery tests.)
@Suite(.serialized) struct FaultSuiteTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// What one request got: its status (nil: no answer within the client's own 60 s) and how long it took.
    struct Outcome: Sendable {
        var status: Int?
        var seconds: Double
        var retryAfter: String?
        var body: String
    }

    /// Seconds since `start`, reading the clock once.
    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = (ContinuousClock.now - start).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    static func request(_ url: String, method: String = "GET", json: String? = nil) async -> Outcome {
        var request = URLRequest(url: URL(string: url)!, timeoutInterval: 60)
        request.httpMethod = method
        if let json {
            request.httpBody = Data(json.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let start = ContinuousClock.now
        let seconds = { Self.seconds(since: start) }
        do {
            let (data, response) = try await URLSession.shared.data(for: request)
            let http = response as? HTTPURLResponse
            return Outcome(
                status: http?.statusCode, seconds: seconds(), retryAfter: http?.value(forHTTPHeaderField: "Retry-After"),
                body: String(decoding: data, as: UTF8.self)
            )
        } catch {
            return Outcome(status: nil, seconds: seconds(), retryAfter: nil, body: "\(error)")
        }
    }

    /// `gatehouse serve` with `yaml` as its configuration, started and listening; returns it and its base URL.
    static func serve(_ yaml: String, in folder: URL, fileLimit: Int? = nil) async throws -> (ChildProcess, String) {
        try yaml.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
        let binary = CLITests.binary.path
        let server: ChildProcess
        if let fileLimit {
            // The soft and hard limits both, so that the server cannot raise them.
            server = try ChildProcess(
                URL(fileURLWithPath: "/bin/sh"), ["-c", "ulimit -n \(fileLimit) && exec '\(binary)' serve --config gatehouse.yaml --port 0"],
                environment: CLITests.environment, directory: folder
            )
        } else {
            server = try ChildProcess(CLITests.binary, ["serve", "--config", "gatehouse.yaml", "--port", "0"], environment: CLITests.environment, directory: folder)
        }
        do {
            let banner = try await server.waitForOutput("database:", within: .seconds(60))
            let base = try #require(banner.firstMatch(of: /listening on (http:\/\/127\.0\.0\.1:\d+)/)?.output.1, "\(banner)")
            return (server, String(base))
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Runs `arguments` to its end with `posix_spawn`, every signal unblocked, output to files, polling `waitpid`.
    /// Not ``ChildProcess``: the test runner's children inherit its blocked signals, and a postmaster that cannot get
    /// its children's signals never becomes ready; and Foundation's `Process` does not see a script end whose daemon
    /// (the postmaster `pg_ctl` leaves running) still holds what the script inherited.
    static func spawn(_ arguments: [String], within limit: Duration) async throws -> (status: Int32, stdout: String, stderr: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spawn-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (out, err) = (folder.appendingPathComponent("out").path, folder.appendingPathComponent("err").path)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        var pid: pid_t = 0
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        let spawned = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw SMTPTestSetupError(description: "cannot start \(arguments[0]): \(spawned)") }
        let deadline = ContinuousClock.now + limit
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            guard ContinuousClock.now < deadline else {
                kill(pid, SIGKILL)
                throw SMTPTestSetupError(description: "\(arguments.joined(separator: " ")) did not end within \(limit)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return ((status >> 8) & 0xff, read(out), read(err))
    }

    /// Every process of the PostgreSQL cluster whose postmaster is `pid`: the postmaster and its children.
    static func clusterProcesses(postmaster pid: Int32) -> [Int32] {
        var found = [pid]
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let child = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8) else { continue }
            // pid (comm) state ppid …: the command may hold spaces, so read after its closing parenthesis.
            guard let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == pid { found.append(child) }
        }
        return found
    }

    /// CPU seconds a process has used (user + system), from `/proc/PID/stat`.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // Fields after the command: state(0) ppid(1) … utime(11) stime(12), in clock ticks.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Registers `count` new accounts from `workers` concurrent clients, one after another per worker, starting with
    /// number `first`; returns each registration's email and outcome.
    static func registrations(_ base: String, prefix: String, workers: Int, each: Int) async -> [(email: String, outcome: Outcome)] {
        await withTaskGroup(of: [(String, Outcome)].self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var results: [(String, Outcome)] = []
                    for n in 0..<each {
                        let email = "\(prefix)-\(worker)-\(n)@example.com"
                        let outcome = await request(
                            "\(base)/api/client/v2.0/app/fault-app/auth/providers/local-userpass/register", method: "POST",
                            json: #"{"email":"\#(email)","password":"correct horse"}"#
                        )
                        results.append((email, outcome))
                    }
                    return results
                }
            }
            var all: [(email: String, outcome: Outcome)] = []
            for await results in group { all += results.map { (email: $0.0, outcome: $0.1) } }
            return all
        }
    }

    static func appYAML(database: String, server: String = "") -> String {
        """
        server: { \(server) }
        database: { url: "\(database)" }
        apps:
          - id: fault-app
            providers: { local-userpass: { confirmation: auto } }
            passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
            rateLimits: { enabled: false }
            loginBackoff: { enabled: false }
        """
    }

    @Test(.enabled(if: TestDatabase.postgresAdmin != nil, "needs PostgreSQL (the test command's second pass)"))
    func postgresFrozenStoppedAndRestartedUnderLoad() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fault-pg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = Self.root.appendingPathComponent("scripts/postgres-env.sh")
        let cluster = folder.appendingPathComponent("pg").path
        func pg(_ command: String) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await Self.spawn(["/bin/bash", script.path, command, cluster], within: .seconds(60))
        }
        let started = try await pg("start")
        try #require(started.status == 0, "\(started.stderr)")
        do {
            try await Self.underLoad(admin: started.stdout.trimmingCharacters(in: .whitespacesAndNewlines), cluster: cluster, folder: folder, pg: pg)
            _ = try? await pg("stop")
        } catch {
            _ = try? await pg("stop")
            throw error
        }
    }

    static func underLoad(
        admin: String, cluster: String, folder: URL, pg: (String) async throws -> (status: Int32, stdout: String, stderr: String)
    ) async throws {
        // A statement waits 2 s for a connection and may take 2 s; unanswered work loses its connection 2 s later.
        let (connect, query, grace) = (2.0, 2.0, 2.0)
        let bound = connect + query + grace
        let database = admin + "?connect_timeout=\(Int(connect))&query_timeout=\(Int(query))"
        let (server, base) = try await Self.serve(Self.appYAML(database: database, server: "shutdownTimeout: 5"), in: folder)
        do {
            var acknowledged: [String] = []
            func record(_ results: [(email: String, outcome: Outcome)], phase: String, sourceLocation: SourceLocation = #_sourceLocation) {
                for (email, outcome) in results {
                    #expect(outcome.status != nil, "\(phase): no answer for \(email) after \(outcome.seconds) s", sourceLocation: sourceLocation)
                    #expect(outcome.status != 500, "\(phase): 500 for \(email): \(outcome.body)", sourceLocation: sourceLocation)
                    if outcome.status == 201 { acknowledged.append(email) }
                    if outcome.status == 503 {
                        #expect(outcome.retryAfter != nil, "\(phase): 503 without Retry-After", sourceLocation: sourceLocation)
                        #expect(outcome.body.contains("MaintenanceInProgress"), "\(phase): \(outcome.body)", sourceLocation: sourceLocation)
                    }
                }
            }
            record(await Self.registrations(base, prefix: "before", workers: 3, each: 5), phase: "before")
            #expect(acknowledged.count == 15)

            // Frozen (a network partition looks like this): requests answer 503 within the bound, /readyz within its own.
            let postmaster = try #require(
                Int32((try String(contentsOfFile: cluster + "/data/postmaster.pid", encoding: .utf8)).split(separator: "\n").first ?? ""),
                "no postmaster.pid"
            )
            let frozen = Self.clusterProcesses(postmaster: postmaster)
            for pid in frozen { kill(pid, SIGSTOP) }
            let during: [(email: String, outcome: Outcome)]
            let ready: Outcome
            do {
                async let load = Self.registrations(base, prefix: "frozen", workers: 3, each: 2)
                ready = await Self.request("\(base)/readyz")
                during = await load
            }
            for pid in frozen { kill(pid, SIGCONT) }
            #expect(ready.status == 503, "\(ready.body)")
            #expect(ready.seconds < 3 + 2, "readyz took \(ready.seconds) s")
            record(during, phase: "frozen")
            #expect(during.contains { $0.outcome.status == 503 }, "nothing noticed the frozen database")
            for (email, outcome) in during {
                // One request is at most two statements deep when it meets the frozen server; the rest of its time is
                // queueing behind the others of its worker's connection. Generous, so a slow machine passes: without
                // the deadlines these waited the whole freeze and longer.
                #expect(outcome.seconds < 2 * bound + 5, "\(email) took \(outcome.seconds) s")
            }

            // Back: it serves again by itself.
            try await waitFor("ready after the freeze", limit: 90) { await Self.request("\(base)/readyz").status == 200 }
            record(await Self.registrations(base, prefix: "thawed", workers: 3, each: 3), phase: "thawed")

            // Stopped (fast shutdown: connections are told, SQLSTATE 57P01) for a while, then started again.
            let stop = try await pg("stop")
            #expect(stop.status == 0)
            let down = await Self.registrations(base, prefix: "down", workers: 3, each: 2)
            record(down, phase: "stopped")
            #expect(down.allSatisfy { $0.outcome.status == 503 }, "\(down.map { $0.outcome.status ?? 0 })")
            #expect(await Self.request("\(base)/readyz").status == 503)
            let restart = try await pg("restart")
            try #require(restart.status == 0, "\(restart.stderr)")
            try await waitFor("ready after the restart", limit: 90) { await Self.request("\(base)/readyz").status == 200 }
            record(await Self.registrations(base, prefix: "after", workers: 3, each: 3), phase: "after")

            // Nothing acknowledged was lost: every account that got 201 logs in.
            for email in acknowledged {
                let login = await Self.request(
                    "\(base)/api/client/v2.0/app/fault-app/auth/providers/local-userpass/login", method: "POST",
                    json: #"{"username":"\#(email)","password":"correct horse"}"#
                )
                #expect(login.status == 200, "\(email) was acknowledged and is gone: \(login.body)")
            }
            // The server's log says what happened, without 500s.
            #expect(!server.standardError.contains("unexpected error"), "\(server.standardError.suffix(2000))")

            // SIGTERM: the process ends within its shutdown bound.
            server.signal(SIGTERM)
            #expect(try await server.waitForExit(within: .seconds(5 + 5 + 10)) == 0)
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    @Test func slowClientsUnderALowFileLimitNeitherSpinNorBlockForEver() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fault-fd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        FileLimit.raise()
        // 128 files and a connection cap above it: accept() runs out of descriptors, as on a server whose limit was
        // never raised. Slow clients are closed 5 s after their first byte.
        let (server, base) = try await Self.serve(
            Self.appYAML(database: "sqlite:\(folder.path)/db.sqlite", server: "idleTimeout: 5, headerTimeout: 5, maxConnections: 1000"),
            in: folder, fileLimit: 128
        )
        let port = try #require(Int(base.split(separator: ":").last ?? ""))
        do {
            #expect(await Self.request("\(base)/healthz").status == 200)
            // 200 connections that each send nine bytes and nothing more.
            var clients: [Int32] = []
            defer { for fd in clients { close(fd) } }
            for _ in 0..<200 {
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                guard fd >= 0 else { break }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = in_port_t(UInt16(port).bigEndian)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                guard connected == 0 else {
                    close(fd)
                    break
                }
                _ = "GET /heal".withCString { send(fd, $0, 9, Int32(MSG_NOSIGNAL)) }
                clients.append(fd)
            }
            #expect(clients.count > 128, "only \(clients.count) connections were made")

            // While the process is out of descriptors its event loop does not spin: well under a core.
            let pid = server.processIdentifier
            try await Task.sleep(for: .seconds(1))
            let cpuBefore = Self.cpuSeconds(pid)
            let window = ContinuousClock.now
            try await Task.sleep(for: .seconds(2.5))
            let busy = Self.cpuSeconds(pid) - cpuBefore
            let elapsed = Self.seconds(since: window)
            #expect(busy < elapsed * 0.6, "the server used \(busy) s of CPU in \(elapsed) s with its descriptors exhausted")

            // The slow clients are closed at their deadline (those still in the listen backlog once accepted); the
            // server serves again without a restart.
            for fd in clients { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
            var open = Set(clients)
            try await waitFor("the slow clients closed", limit: 90) {
                var byte: UInt8 = 0
                for fd in open where recv(fd, &byte, 1, 0) == 0 { open.remove(fd) }
                return open.isEmpty
            }
            #expect(await Self.request("\(base)/healthz").status == 200)
            let register = await Self.request(
                "\(base)/api/client/v2.0/app/fault-app/auth/providers/local-userpass/register", method: "POST",
                json: #"{"email":"after@example.com","password":"correct horse"}"#
            )
            #expect(register.status == 201, "\(register.body)\n\(server.standardError.suffix(3000))")
            #expect(server.standardError.contains("cannot accept connections"), "\(server.standardError.suffix(2000))")
            server.signal(SIGTERM)
            #expect(try await server.waitForExit(within: .seconds(40)) == 0)
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }
}
