import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Two `gatehouse serve` processes on one PostgreSQL database, with a real SMTP server: what must hold across
/// instances behind a load balancer. PostgreSQL only (SQLite is one process's database).
@Suite(.serialized, .enabled(if: TestDatabase.postgresAdmin != nil, "needs GATEHOUSE_TEST_POSTGRES_URL"))
struct MultiInstanceTests {
    @Test func aConfirmationTokenRedeemedThroughBothInstancesWorksOnce() async throws {
        try await withTwoInstances { a, b, smtp, _ in
            #expect(try await a.json("/api/client/v2.0/app/multi/auth/providers/local-userpass/register", ["email": "ann@example.com", "password": "correct horse"]).status == 201)
            let text = try await smtp.waitForMail(to: "ann@example.com", count: 1).last!
            let token = String(try #require(text.firstMatch(of: /[?&]token=([0-9a-f]+)/)?.output.1))
            let tokenId = String(try #require(text.firstMatch(of: /[?&]tokenId=([0-9a-f]+)/)?.output.1))
            let statuses = try await race(a, b) { instance in
                try await instance.json("/api/client/v2.0/app/multi/auth/providers/local-userpass/confirm", ["token": token, "tokenId": tokenId]).status
            }
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 400 }.count == statuses.count - 1, "\(statuses)")
        }
    }

    @Test func aResetTokenRedeemedThroughBothInstancesWorksOnce() async throws {
        try await withTwoInstances { a, b, smtp, _ in
            try await a.registerConfirmed("ben@example.com", smtp: smtp)
            #expect(try await b.json("/api/client/v2.0/app/multi/auth/providers/local-userpass/reset/send", ["email": "ben@example.com"]).status == 200)
            let text = try await smtp.waitForMail(to: "ben@example.com", count: 2).last!
            let token = String(try #require(text.firstMatch(of: /[?&]token=([0-9a-f]+)/)?.output.1))
            let tokenId = String(try #require(text.firstMatch(of: /[?&]tokenId=([0-9a-f]+)/)?.output.1))
            let statuses = try await race(a, b) { instance in
                try await instance.json(
                    "/api/client/v2.0/app/multi/auth/providers/local-userpass/reset",
                    ["token": token, "tokenId": tokenId, "password": "battery staple \(instance.port)"]
                ).status
            }
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
        }
    }

    @Test func aOneTimeCodeSubmittedThroughBothInstancesWorksOnce() async throws {
        try await withTwoInstances { a, b, smtp, _ in
            let types = "oob password redirect"
            let started = try await a.form("signup/v1.0/start", ["username": "cat@example.com", "challenge_type": types])
            let ct1 = try #require(try started.decode(NativeAuthStepResponse.self).continuationToken)
            let challenged = try await b.form("signup/v1.0/challenge", ["continuation_token": ct1, "challenge_type": types])
            let ct2 = try #require(try challenged.decode(NativeAuthStepResponse.self).continuationToken)
            let text = try await smtp.waitForMail(to: "cat@example.com", count: 1).last!
            let code = String(try #require(text.firstMatch(of: /(?m)^\s+(\d{8})\s*$/)?.output.1))
            let statuses = try await race(a, b) { instance in
                try await instance.form("signup/v1.0/continue", ["continuation_token": ct2, "grant_type": "oob", "oob": code]).status
            }
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
        }
    }

    @Test func tokensVerifyOnBothAndALogoutIsSeenAtOnce() async throws {
        try await withTwoInstances { a, b, smtp, _ in
            // Both started on an empty database at the same moment: they publish the same key.
            let jwksA = try await a.get("/.well-known/jwks.json")
            let jwksB = try await b.get("/.well-known/jwks.json")
            #expect(jwksA.body == jwksB.body)

            try await a.registerConfirmed("dan@example.com", smtp: smtp)
            let login = try await a.json("/api/client/v2.0/app/multi/auth/providers/local-userpass/login", ["username": "dan@example.com", "password": "correct horse"])
            let tokens = try login.decode(LoginResponse.self)
            #expect(try await b.get("/api/client/v2.0/auth/profile", bearer: tokens.accessToken).status == 200)
            #expect(try await b.send("/api/client/v2.0/auth/session", method: "POST", bearer: tokens.refreshToken).status == 201)
            #expect(try await b.send("/api/client/v2.0/auth/session", method: "DELETE", bearer: tokens.refreshToken).status == 204)
            #expect(try await a.send("/api/client/v2.0/auth/session", method: "POST", bearer: tokens.refreshToken).status == 401)
        }
    }

    @Test func eachEmailIsSentOnceAndSendLimitsAreShared() async throws {
        try await withTwoInstances { a, b, smtp, store in
            let addresses = (0..<6).map { "user\($0)@example.com" }
            for (index, address) in addresses.enumerated() {
                let instance = index.isMultiple(of: 2) ? a : b
                #expect(try await instance.json("/api/client/v2.0/app/multi/auth/providers/local-userpass/register", ["email": address, "password": "correct horse"]).status == 201)
            }
            for address in addresses { _ = try await smtp.waitForMail(to: address, count: 1) }
            // A row is marked delivered just after the SMTP server accepted it: wait for the marks too.
            try await waitFor("all rows marked delivered") {
                try await store.mailbox(recipient: nil, limit: 100).allSatisfy { $0.status == .delivered }
            }
            // Every row was delivered in exactly one attempt, and the SMTP server saw each message once.
            let rows = try await store.mailbox(recipient: nil, limit: 100)
            #expect(rows.count == 6)
            #expect(rows.allSatisfy { $0.status == .delivered && $0.attempts == 1 })
            #expect(try smtp.messages().count == 6)

            // The send limit (3 per window) counts requests through both instances together.
            var statuses: [Int] = []
            for index in 0..<4 {
                let instance = index.isMultiple(of: 2) ? a : b
                statuses.append(try await instance.json("/api/client/v2.0/app/multi/auth/providers/local-userpass/reset/send", ["email": "user0@example.com"]).status)
            }
            #expect(statuses == [200, 200, 200, 429])
        }
    }
}

// MARK: - Two instances

/// One running `gatehouse serve` process.
struct Instance: Sendable {
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }

    struct Answer: Sendable {
        var status: Int
        var body: Data
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: body) }
    }

    func send(
        _ path: String, method: String, body: Data? = nil, contentType: String? = nil, bearer: String? = nil, timeout: TimeInterval = 60
    ) async throws -> Answer {
        var request = URLRequest(url: URL(string: base + path)!, timeoutInterval: timeout)
        request.httpMethod = method
        request.httpBody = body
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return Answer(status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: data)
    }

    func get(_ path: String, bearer: String? = nil) async throws -> Answer { try await send(path, method: "GET", bearer: bearer) }

    func json(_ path: String, _ object: [String: String]) async throws -> Answer {
        try await send(path, method: "POST", body: try JSONEncoder().encode(object), contentType: "application/json")
    }

    /// A native auth call of app `multi`, client `ios-app`.
    func form(_ endpoint: String, _ fields: [String: String]) async throws -> Answer {
        var fields = fields
        fields["client_id"] = "ios-app"
        let body = FormURLEncoding.encode(fields.sorted { $0.key < $1.key })
        return try await send("/native/multi/\(endpoint)", method: "POST", body: body, contentType: "application/x-www-form-urlencoded")
    }

    /// Registers `email` and confirms it with the emailed link.
    func registerConfirmed(_ email: String, smtp: SMTPTestServer) async throws {
        #expect(try await json("/api/client/v2.0/app/multi/auth/providers/local-userpass/register", ["email": email, "password": "correct horse"]).status == 201)
        let text = try await smtp.waitForMail(to: email, count: 1).last!
        let token = String(try #require(text.firstMatch(of: /[?&]token=([0-9a-f]+)/)?.output.1))
        let tokenId = String(try #require(text.firstMatch(of: /[?&]tokenId=([0-9a-f]+)/)?.output.1))
        #expect(try await json("/api/client/v2.0/app/multi/auth/providers/local-userpass/confirm", ["token": token, "tokenId": tokenId]).status == 200)
    }
}

/// Runs `attempt` three times on each instance, all at once; the statuses.
func race(_ a: Instance, _ b: Instance, _ attempt: @escaping @Sendable (Instance) async throws -> Int) async throws -> [Int] {
    try await withThrowingTaskGroup(of: Int.self) { group in
        for instance in [a, b, a, b, a, b] { group.addTask { try await attempt(instance) } }
        return try await group.reduce(into: []) { $0.append($1) }
    }
}

extension SMTPTestServer {
    /// The text parts of the emails to `address`, oldest first, once at least `count` arrived (polls for up to 30 s:
    /// delivery is asynchronous, not timed).
    func waitForMail(to address: String, count: Int) async throws -> [String] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let texts = try messages().filter { $0.rcptTos.contains(address) }.compactMap { $0.parts.first?.content }
            if texts.count >= count { return texts }
            guard ContinuousClock.now < deadline else {
                throw SMTPTestSetupError(description: "no \(count) email(s) to \(address) after 30 s (have \(texts.count))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// Starts two `gatehouse serve` processes on one fresh PostgreSQL database and a real SMTP server, runs `body`,
/// then stops them (SIGKILL: the test runner's signal mask blocks SIGTERM in its children) and drops the database.
func withTwoInstances(_ body: @Sendable (Instance, Instance, SMTPTestServer, any GatehouseStore) async throws -> Void) async throws {
    let (url, drop) = try await TestDatabase.fresh(.sqliteMemory)
    guard case .postgres(let settings) = url else { throw SMTPTestSetupError(description: "multi-instance tests need PostgreSQL") }
    do {
        try await withInstances(settings, body)
        await drop()
    } catch {
        await drop()
        throw error
    }
}

private func withInstances(_ settings: PostgresSettings, _ body: @Sendable (Instance, Instance, SMTPTestServer, any GatehouseStore) async throws -> Void) async throws {
    let databaseURL = DatabaseURL.postgres(settings).commandLineValue
    try await withSMTPServer { smtp in
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let config = """
            server: { host: 127.0.0.1, publicURL: "http://gatehouse.test" }
            mail: { smtp: "smtp://127.0.0.1:\(smtp.port)", starttls: never, from: "Gatehouse <no-reply@gatehouse.test>", timeout: 10 }
            apps:
              - id: multi
                emailLimit: { count: 3, window: 600 }
                passwordHash: { memoryKiB: 64, iterations: 1, parallelism: 1 }
                providers: { local-userpass: { confirmation: email } }
                nativeAuth: { clientIds: [ios-app], code: { resendInterval: 0 } }
            """
        try config.write(to: folder.appendingPathComponent("gatehouse.yaml"), atomically: true, encoding: .utf8)
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GATEHOUSE_") }
        var processes: [ChildProcess] = []
        var instances: [Instance] = []
        do {
            for _ in 0..<2 {
                let (instance, process) = try await startServing(in: folder, environment: environment) { port in
                    ["serve", "--config", "gatehouse.yaml", "--port", String(port), "--database", databaseURL, "--log-level", "warning"]
                }
                instances.append(instance)
                processes.append(process)
            }
            // The test reads the outbox through a store of its own on the same database.
            let reader = try await PostgresDatabase.open(settings, logger: quietLogger)
            do {
                try await body(instances[0], instances[1], smtp, SQLStore(db: reader))
                try await reader.close()
            } catch {
                try? await reader.close()
                throw error
            }
        } catch {
            for process in processes { await process.stop() }
            throw error
        }
        for process in processes { await process.stop() }
    }
}

/// Starts `gatehouse` with the arguments `arguments` gives for a free port, and waits until it is ready. A port found
/// free can be taken by another process before the child binds it (other suites start servers too): a child that
/// stops on "Address already in use" is started again on another port, up to five times.
func startServing(
    in folder: URL, environment: [String: String], _ arguments: (Int) -> [String]
) async throws -> (Instance, ChildProcess) {
    for attempt in 1...5 {
        let port = try freePort()
        let process = try ChildProcess(CLITests.binary, arguments(port), environment: environment, directory: folder)
        let instance = Instance(port: port)
        do {
            try await waitUntilReady(instance, process)
            return (instance, process)
        } catch {
            await process.stop()
            guard attempt < 5, process.standardError.contains("Address already in use") else { throw error }
        }
    }
    preconditionFailure("the loop returns or throws")
}

/// Polls `/readyz` until it answers 200 (at most 60 s: a cold start runs the migrations). When it never does, the
/// error carries the last answer and what the process wrote, so that a failed run says why.
func waitUntilReady(_ instance: Instance, _ process: ChildProcess) async throws {
    let deadline = ContinuousClock.now + .seconds(60)
    var last = "no answer"
    while ContinuousClock.now < deadline {
        do {
            // A probe that hangs is retried, not waited out: one request must not spend the whole minute.
            let answer = try await instance.send("/readyz", method: "GET", timeout: 5)
            if answer.status == 200 { return }
            last = "\(answer.status): \(String(decoding: answer.body.prefix(500), as: UTF8.self))"
        } catch {
            last = "\(error)"
        }
        guard process.isRunning else { break }
        try await Task.sleep(for: .milliseconds(100))
    }
    throw SMTPTestSetupError(description: """
        gatehouse on port \(instance.port) was not ready after 60 s (running: \(process.isRunning); last /readyz: \(last))
        stderr: \(process.standardError.suffix(3000))
        stdout: \(process.standardOutput.suffix(1000))
        """)
}
