import GatehouseArgon2
import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import GatehouseTestSupport
import Testing

@Suite struct LoginTests {
    /// A login service whose statements `recording` keeps, and the test app.
    static func recordedLogins(_ gatehouse: AuthServer) throws -> (RecordingDatabase, LoginService, AppSettings) {
        let recording = RecordingDatabase((gatehouse.env.store as! SQLStore).db)
        var env = gatehouse.env
        env.store = SQLStore(db: recording)
        return (recording, LoginService(env: env), try #require(env.configuration.app(id: "test-app")))
    }

    @Test func loginReturnsBothTokensAndObjectIds() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("quinn@example.com")
            #expect(Secrets.isObjectID(login.userId))
            #expect(Secrets.isObjectID(login.deviceId))
            #expect(login.userId == login.userId.lowercased())
            // The same credentials give the same user.
            let again = try await client.login("QUINN@example.com").decode(LoginResponse.self)
            #expect(again.userId == login.userId)
            #expect(again.deviceId != login.deviceId)
        }
    }

    @Test func wrongPasswordAndUnknownUserGetTheSameAnswer() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("rita@example.com")
            let wrong = try await client.login("rita@example.com", "wrong password")
            let unknown = try await client.login("nobody@example.com", "wrong password")
            let notAnEmail = try await client.login("nobody", "wrong password")
            for reply in [wrong, unknown, notAnEmail] {
                #expect(reply.status == .unauthorized)
                #expect(reply.error?.errorCode == .invalidPassword)
                #expect(reply.error?.error == "unauthorized")
            }
        }
    }

    /// An unknown user costs a password verification too (against a dummy hash), so the timing matches.
    @Test func unknownUsersCostAHashVerification() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.signUp("sam@example.com")
            let spy = SpyHasher(base: gatehouse.env.hasher)
            var env = gatehouse.env
            env.hasher = spy
            let service = LoginService(env: env)
            let app = try #require(env.configuration.app(id: "test-app"))
            await #expect(throws: AuthError.invalidCredentials) { try await service.prove(.emailPassword(username: "sam@example.com", password: "nope"), app: app) }
            await #expect(throws: AuthError.invalidCredentials) { try await service.prove(.emailPassword(username: "zed@example.com", password: "nope"), app: app) }
            #expect(spy.calls == ["verify", "burnVerify"])
        }
    }

    /// A password login reads the account and its user in one statement; a wrong password and an unknown address run
    /// the same statements as each other, so neither the work nor its timing tells them apart.
    @Test func aLoginReadsTheAccountWithItsUserAndAnUnknownAddressRunsTheSameStatements() async throws {
        try await withGatehouse { gatehouse, client in
            let owner = try await client.signUp("uma@example.com")
            let (recording, service, app) = try Self.recordedLogins(gatehouse)
            // The audit rows are written for every outcome; set apart, as their writer may group them.
            let statements = { recording.drain().filter { !$0.hasPrefix("INSERT INTO audit_events") } }
            let reads = { (log: [String]) in log.filter { $0.contains("email_accounts") || $0.contains("FROM users") } }

            let proof = try await service.prove(.emailPassword(username: "uma@example.com", password: "correct horse"), app: app)
            #expect(proof.user.id == owner.userId)
            let right = reads(statements())
            #expect(right.count == 1)
            #expect(right.first?.contains("LEFT JOIN users") == true)
            // On PostgreSQL the attempt's count is in the same statement (on SQLite, whose statements cost no round
            // trip, it is the one before).
            if recording.dialect == .postgres { #expect(right.first?.contains("INSERT INTO login_failures") == true) }

            for username in ["uma@example.com", "nobody@example.com"] {
                await #expect(throws: AuthError.invalidCredentials) {
                    try await service.prove(.emailPassword(username: username, password: "wrong horse"), app: app)
                }
            }
            _ = statements()
            await #expect(throws: AuthError.invalidCredentials) {
                try await service.prove(.emailPassword(username: "uma@example.com", password: "wrong horse"), app: app)
            }
            let known = statements()
            await #expect(throws: AuthError.invalidCredentials) {
                try await service.prove(.emailPassword(username: "nobody@example.com", password: "wrong horse"), app: app)
            }
            let unknown = statements()
            #expect(reads(known) == right)
            #expect(!known.isEmpty)
            #expect(known == unknown)
        }
    }

    /// A login's first claim of its backoff count and its read of the account come back together, whatever each
    /// finds: a first attempt is counted (an unknown address's too, with no account), and a second finds the run and
    /// counts nothing while still reading the account.
    @Test func theFirstClaimAndTheAccountReadComeBackTogether() async throws {
        try await withGatehouse { gatehouse, client in
            let owner = try await client.signUp("ulla@example.com")
            let store = gatehouse.env.store
            let now = gatehouse.env.clock.now
            let known = try await store.claimLoginAttempt(key: "k1", account: "a1", now: now, readingAccountOf: "test-app", email: "ulla@example.com")
            #expect(known.claimed == 1)
            #expect(known.account?.account.userId == owner.userId)
            #expect(known.account?.user?.id == owner.userId)
            let again = try await store.claimLoginAttempt(key: "k1", account: "a1", now: now, readingAccountOf: "test-app", email: "ulla@example.com")
            #expect(again.claimed == nil)
            #expect(again.account?.account.email == "ulla@example.com")
            #expect(try await store.loginFailures(key: "k1")?.failures == 1)
            let unknown = try await store.claimLoginAttempt(key: "k2", account: "a2", now: now, readingAccountOf: "test-app", email: "nobody@example.com")
            #expect(unknown.claimed == 1)
            #expect(unknown.account == nil)
            // Another app's account of the same address is not this app's.
            let elsewhere = try await store.claimLoginAttempt(key: "k3", account: "a3", now: now, readingAccountOf: "other-app", email: "ulla@example.com")
            #expect(elsewhere.claimed == 1)
            #expect(elsewhere.account == nil)
        }
    }

    /// A login's session, its `login_succeeded` row and the end of its address's backoff counts are written together:
    /// one statement on PostgreSQL, one transaction on SQLite (``SQLDatabase/writeTogether(_:)``: all or nothing). All
    /// three are there after it. (The recording wrapper runs SQLite's transaction a statement at a time; SQLite's own
    /// database sends it to its thread at once: `SQLiteDatabaseTests`.)
    @Test func aLoginWritesItsSessionItsAuditRowAndTheEndOfItsBackoffTogether() async throws {
        try await withGatehouse { gatehouse, client in
            let owner = try await client.signUp("una@example.com")
            let (recording, service, app) = try Self.recordedLogins(gatehouse)
            let credential = LoginCredential.emailPassword(username: "una@example.com", password: "correct horse")
            let before = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: owner.userId, afterSeq: nil, limit: 100)

            // A wrong password first: the address has a run of failures for the account, which the login ends.
            await #expect(throws: AuthError.invalidCredentials) {
                try await service.logIn(.emailPassword(username: "una@example.com", password: "wrong horse"), app: app, device: [:])
            }
            // This address's run and the account's total, each one failure long.
            let keys = LoginBackoff(env: gatehouse.env, app: app, identifier: "una@example.com").clearedKeys
            #expect(keys.count == 2)
            let failures = { () async throws -> [Int?] in
                var counts: [Int?] = []
                for key in keys { counts.append(try await gatehouse.env.store.loginFailures(key: key)?.failures) }
                return counts
            }
            #expect(try await failures() == [1, 1])
            _ = recording.drain()

            let result = try await service.logIn(credential, app: app, device: [:])
            // Each write by what it writes (`clear`, `session`, `audit`, joined by + when one statement does several),
            // and the transaction's edges.
            let written = recording.drain().compactMap { statement -> String? in
                let parts = [("DELETE FROM login_failures", "clear"), ("INSERT INTO sessions", "session"), ("INSERT INTO audit_events", "audit")]
                    .filter { statement.contains($0.0) }.map(\.1)
                return parts.isEmpty ? (["BEGIN", "COMMIT"].contains(statement) ? statement : nil) : parts.joined(separator: "+")
            }
            switch recording.dialect {
            // The session first: the other writes are made only with it (SQLStore.createSession).
            case .postgres: #expect(written == ["clear+session+audit"])
            case .sqlite: #expect(written == ["BEGIN", "session", "audit", "clear", "COMMIT"])
            }
            #expect(try await failures() == [nil, nil])
            let after = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: owner.userId, afterSeq: nil, limit: 100)
            #expect(after.filter { $0.kind == "login_succeeded" }.count == before.filter { $0.kind == "login_succeeded" }.count + 1)
            let sid = try #require(try jwtPayload(result.refreshToken)["sid"] as? String)
            #expect(try await gatehouse.env.store.session(id: sid) != nil)

        }
    }

    @Test func deviceOptionsAreKeptWithTheSession() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.signUp("tess@example.com")
            let body = #"{"provider":"local-userpass","username":"tess@example.com","password":"correct horse","options":{"device":{"platform":"iOS","sdkVersion":"10.54.6","extra":{"nested":true}}}}"#
            let login = try await client.call(Path.local("login"), body: body).decode(LoginResponse.self)
            let claims = try jwtPayload(login.refreshToken)
            let sid = try #require(claims["sid"] as? String)
            let session = try #require(try await gatehouse.env.store.session(id: sid))
            #expect(session.device["platform"] == "iOS")
            #expect(session.device["extra"] == ["nested": true])
            #expect(session.deviceId == login.deviceId)
        }
    }

    @Test func aChangedHashCostIsAppliedAtTheNextLogin() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-rehash-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("db.sqlite").path))
        try await withGatehouse(testConfiguration(database: url)) { _, client in
            _ = try await client.signUp("uma@example.com")
        }
        let stronger = Argon2ParametersForTests.stronger
        try await withGatehouse(testConfiguration(database: url, hash: stronger)) { gatehouse, client in
            let before = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "uma@example.com"))
            #expect(before.passwordHash.contains("m=64,t=1,p=1"))
            #expect(try await client.login("uma@example.com", "wrong password").status == .unauthorized)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "uma@example.com")?.passwordHash == before.passwordHash)
            #expect(try await client.login("uma@example.com").status == .ok)
            let after = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "uma@example.com"))
            #expect(after.passwordHash.contains("m=128,t=2,p=1"))
            #expect(try await client.login("uma@example.com").status == .ok)
        }
        await drop()
    }
}
