import Foundation
import GatehouseArgon2
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import NIOConcurrencyHelpers
import Testing

/// Every imported password hash has a bounded cost (``HashCostBudget``), checked at import and again at login, and runs
/// apart from ordinary logins (``ImportedHashLane``), which a server shutting down never waits for. Written as an
/// attacker who controls an import file, or a row of the database, would try it.
@Suite struct HashCostBudgetTests {
    /// Gatehouse's own Argon2id form with 2^32 - 1 passes: hours of one core per login.
    static let billionsOfPasses = "$argon2id$v=19$m=19456,t=4294967295,p=1$c29tZXNhbHRzb21lc2FsdA$" + String(repeating: "A", count: 42) + "Y"
    /// PBKDF2-SHA1 with a 128-byte derived key at 10,000,000 rounds: seven chains of ten million HMACs, ~25 s.
    static let sevenChainsOfTenMillion: String = {
        let hash = ForeignPasswordHash(.pbkdf2(.sha1, rounds: 10_000_000), salt: Array("saltsaltsaltsalt".utf8), checksum: Array(repeating: 7, count: 128))!
        return hash.text!
    }()
    /// bcrypt at cost 15: ~1.7 s, one step past the budget.
    static let bcrypt15 = BcryptHash.hash("whatever", cost: 4).replacingOccurrences(of: "$2b$04$", with: "$2b$15$")

    /// A well-formed hash of each kind parses, so that a refusal below is the budget's and not the parser's.
    @Test func theHostileHashesAreWellFormed() throws {
        #expect(try Argon2.parseParameters(phc: Self.billionsOfPasses).iterations == 4_294_967_295)
        #expect(ForeignPasswordHash(Self.sevenChainsOfTenMillion) != nil)
        #expect(BcryptHash(Self.bcrypt15)?.cost == 15)
    }

    /// The figures of real systems pass; the reviewed hostile ones do not; an app's own parameters always pass.
    @Test func theBudgetPassesWhatRealSystemsWriteAndStopsTheRest() throws {
        func work(_ scheme: ForeignPasswordHash.Scheme, key: Int) -> UInt64 {
            ForeignPasswordHash(scheme, salt: Array(repeating: 1, count: 16), checksum: Array(repeating: 0, count: key))!.work!
        }
        let budget = HashCostBudget.maxWork
        #expect(work(.pbkdf2(.sha256, rounds: 600_000), key: 32) <= budget)
        #expect(work(.pbkdf2(.sha256, rounds: 1_200_000), key: 32) <= budget)
        #expect(work(.pbkdf2(.sha1, rounds: 1_300_000), key: 20) <= budget)
        #expect(work(.pbkdf2(.sha256, rounds: 27_500), key: 64) <= budget)
        #expect(work(.pbkdf2(.sha512, rounds: 210_000), key: 64) <= budget)
        #expect(work(.scrypt(cost: 1 << 16, blockSize: 8, parallelism: 1), key: 32) <= budget)
        #expect(work(.scrypt(cost: 1 << 17, blockSize: 8, parallelism: 1), key: 32) <= budget)
        #expect(work(.firebaseScrypt(memoryCost: 14, rounds: 8, separator: [7], signerKey: Array(repeating: 0, count: 64)), key: 64) <= budget)
        #expect(ForeignPasswordHash(BcryptHash.hash("x", cost: 4).replacingOccurrences(of: "$2b$04$", with: "$2b$14$"))!.work! <= budget)
        #expect(HashCostBudget.work(argon2: Argon2Parameters(memoryKiB: 65536, iterations: 3, parallelism: 1)) <= budget)
        #expect(HashCostBudget.work(argon2: Argon2Parameters(memoryKiB: 19456, iterations: 2, parallelism: 1)) <= budget)

        // Each block of a PBKDF2 key is a chain of its own: seven for 128 bytes of SHA-1.
        #expect(work(.pbkdf2(.sha1, rounds: 1000), key: 128) == 7 * work(.pbkdf2(.sha1, rounds: 1000), key: 20))
        #expect(work(.pbkdf2(.sha1, rounds: 10_000_000), key: 128) > budget)
        #expect(ForeignPasswordHash(Self.bcrypt15)!.work! > budget)
        #expect(HashCostBudget.work(argon2: Argon2Parameters(memoryKiB: 1_048_576, iterations: 1000, parallelism: 1)) > budget)
        guard case .refused = HashCostBudget.assess(Self.billionsOfPasses, ownParameters: .owasp) else {
            Issue.record("2^32 - 1 passes were accepted")
            return
        }
        #expect(budget == 1_000_000_000)
    }

    /// An app's parameters are held to the budget, so a hash made under the costliest valid configuration is still
    /// verified (on the imported-hash lane, then upgraded) after the app lowers its cost: the owner is never locked
    /// out by a configuration change. Before, an app could choose more and its users' hashes became wrong passwords.
    @Test func aHashOfTheCostliestValidConfigurationStillPassesAfterTheCostIsLowered() throws {
        let costliest = Argon2Parameters(memoryKiB: 65536, iterations: 30, parallelism: 1)
        #expect(costliest.work <= Argon2Parameters.maxWork)
        var configuration = nativeConfiguration()
        configuration.apps[0].passwordHash = costliest
        #expect(throws: Never.self) { try configuration.validate() }
        let made = "$argon2id$v=19$m=65536,t=30,p=1$c29tZXNhbHRzb21lc2FsdA$" + String(repeating: "A", count: 42) + "Y"
        #expect(HashCostBudget.assess(made, ownParameters: costliest) == .own(try Argon2.parseParameters(phc: made)))
        guard case .imported(_, let work) = HashCostBudget.assess(made, ownParameters: .owasp) else {
            Issue.record("the hash of a valid configuration is refused once the configuration is lowered")
            return
        }
        #expect(work <= HashCostBudget.maxWork)

        // A configuration above the budget is refused, naming the key, with one pass more.
        for over in [Argon2Parameters(memoryKiB: 65536, iterations: 31, parallelism: 1), Argon2Parameters(memoryKiB: 262_144, iterations: 8, parallelism: 1)] {
            configuration.apps[0].passwordHash = over
            let error = #expect(throws: ConfigurationError.self) { try configuration.validate() }
            #expect(error?.key == "apps[0].passwordHash", "\(String(describing: error))")
        }
    }

    /// The review's case: a `gatehouse export` file whose Argon2id has 2^32 - 1 passes is refused, naming its line,
    /// and nothing of the file is written.
    @Test func anExportFileWithBillionsOfArgon2PassesIsRefusedWholeNamingTheLine() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = ManualClock()
        let file = try await ForeignPasswordHashTests.exportOfOneUser("passes@example.com", withHash: Self.billionsOfPasses, in: folder, clock: clock)
        let (target, drop) = try await TransferTests.target(in: folder.appendingPathComponent("target"))
        let error = await #expect(throws: TransferError.self) { _ = try await TransferTests.importLines(file, into: target) }
        let line = try #require(file.firstIndex { $0.contains("passes@example.com") }) + 1
        #expect(error?.line == line, "\(String(describing: error))")
        #expect(error?.message.contains("cost budget") == true, "\(String(describing: error))")
        try await withGatehouse(target, clock: clock) { gatehouse, _ in
            let account294 = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "passes@example.com")
            #expect(account294 == nil)
        }
        await drop()
    }

    /// A CSV import from another system: each hash over the budget is a skipped row of the report, named by its
    /// position, id and address and said why; the rows around them are imported.
    @Test func foreignHashesOverTheBudgetAreSkippedRowByRowInTheReport() async throws {
        let ordinary = BcryptHash.hash("ordinary", cost: 4)
        let argon2Hours = "$argon2i$v=19$m=1048576,t=1000,p=1$c29tZXNhbHRzb21lc2FsdA$" + String(repeating: "A", count: 42) + "Y"
        let csv = """
            email,password_hash,email_verified,id
            first@example.com,\(ordinary),true,row-1
            chains@example.com,\(Self.sevenChainsOfTenMillion),true,row-2
            bcrypt@example.com,\(Self.bcrypt15),true,row-3
            argon@example.com,"\(argon2Hours)",true,row-4
            last@example.com,\(ordinary),true,row-5

            """
        try await ForeignImportTests.withTarget { target, clock in
            let (summary, skipped) = try await ForeignImportTests.importFile(csv, as: .csv, into: target, clock: clock)
            #expect(summary.imported == 2, "\(summary) \(skipped)")
            #expect(skipped.map(\.record) == [2, 3, 4])
            #expect(skipped.map(\.sourceId) == ["row-2", "row-3", "row-4"])
            #expect(skipped.map(\.email) == ["chains@example.com", "bcrypt@example.com", "argon@example.com"])
            for record in skipped {
                #expect(record.reason.contains("cost budget"), "\(record)")
            }
            #expect(skipped[0].reason.contains("PBKDF2-SHA1, 10000000 rounds, 128-byte key"), "\(skipped[0])")
            #expect(skipped[1].reason.contains("bcrypt cost 15"), "\(skipped[1])")
            try await withGatehouse(target, clock: clock) { gatehouse, _ in
                let account865 = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "first@example.com")
                #expect(account865 != nil)
                let account524 = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "chains@example.com")
                #expect(account524 == nil)
                let account376 = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "last@example.com")
                #expect(account376 != nil)
            }
        }
    }

    /// A row changed in the database after its import: a login to it is a wrong password, answered without running the
    /// hash. Gatehouse's own form with 2^32 - 1 passes would hold a thread for hours, so this test ends only if it is
    /// never run; the PBKDF2 one (~25 s) never reaches the imported-hash lane.
    @Test(.timeLimit(.minutes(1))) func aHashOverTheBudgetWrittenIntoTheDatabaseIsAWrongPasswordNeverRun() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.signUp("tampered@example.com", "the real password")
            let stored = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "tampered@example.com")).passwordHash
            try await gatehouse.env.store.upgradePasswordHash(appId: "test-app", email: "tampered@example.com", from: stored, to: Self.billionsOfPasses)
            #expect(try await client.login("tampered@example.com", "a guess").status == .unauthorized)
            #expect(try await client.login("tampered@example.com", "another guess").status == .unauthorized)

            let runs = NIOLockedValueBox(0)
            var env = gatehouse.env
            env.hasher = Argon2PasswordHasher(importedLane: ImportedHashLane(beforeEach: { _ in runs.withLockedValue { $0 += 1 } }))
            let service = LoginService(env: env)
            let app = try #require(env.configuration.app(id: "test-app"))
            for hash in [Self.billionsOfPasses, Self.sevenChainsOfTenMillion, Self.bcrypt15] {
                let current = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "tampered@example.com")).passwordHash
                try await gatehouse.env.store.upgradePasswordHash(appId: "test-app", email: "tampered@example.com", from: current, to: hash)
                await #expect(throws: AuthError.invalidCredentials) {
                    try await service.prove(.emailPassword(username: "tampered@example.com", password: "a guess"), app: app)
                }
            }
            #expect(runs.withLockedValue { $0 } == 0)
        }
    }

    /// While the imported-hash lane is held busy (a latch stands for a slow hash within the budget), an imported
    /// user's login waits there, and an ordinary user's login still succeeds: it never waits for the lane. A newer
    /// login from the client whose login waits takes its place, and the older is answered like a busy server (503 with
    /// `Retry-After`), its hash never run. Released, the imported logins complete.
    @Test func anOrdinaryLoginSucceedsWhileTheImportedHashLaneIsBusy() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let clock = ManualClock()
        let imported = BcryptHash.hash("the imported password", cost: 4)
        let file = try await ForeignPasswordHashTests.exportOfOneUser("imported@example.com", withHash: imported, in: folder, clock: clock)
        let (target, drop) = try await TransferTests.target(in: folder.appendingPathComponent("target"))
        _ = try await TransferTests.importLines(file, into: target)
        try await withGatehouse(target, clock: clock) { gatehouse, client in
            _ = try await client.signUp("ordinary@example.com", "an ordinary password")
            let latch = DispatchSemaphore(value: 0)
            let runs = NIOLockedValueBox(0)
            let lane = ImportedHashLane(beforeEach: { _ in
                runs.withLockedValue { $0 += 1 }
                latch.wait()
            })
            var env = gatehouse.env
            env.hasher = Argon2PasswordHasher(importedLane: lane)
            let service = LoginService(env: env)
            let fromOneClient = LoginService(env: env.serving(RequestOrigin(ip: "198.51.100.7")))
            let app = try #require(env.configuration.app(id: "test-app"))

            let importedLogin = Task {
                try await service.prove(.emailPassword(username: "imported@example.com", password: "the imported password"), app: app)
            }
            // Wait until the imported hash holds the lane (its thread is at the latch): no sleep, the lane says so.
            while lane.load.running == 0 { await Task.yield() }
            let ordinary = try await service.prove(.emailPassword(username: "ordinary@example.com", password: "an ordinary password"), app: app)
            #expect(ordinary.user.id == (try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ordinary@example.com"))?.userId)
            #expect(lane.load.running == 1)

            // A typo waits; the same client's retry takes its place, and the typo is told the server is busy.
            let typo = Task {
                try await fromOneClient.prove(.emailPassword(username: "imported@example.com", password: "a typo"), app: app)
            }
            while lane.load.waiting == 0 { await Task.yield() }
            let retry = Task {
                try await fromOneClient.prove(.emailPassword(username: "imported@example.com", password: "the imported password"), app: app)
            }
            await #expect(throws: StoreError.self) { _ = try await typo.value }
            #expect(lane.load.waiting == 1)

            latch.signal()
            latch.signal()
            let proof = try await importedLogin.value
            let userId = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "imported@example.com")?.userId
            #expect(proof.user.id == userId)
            #expect(try await retry.value.user.id == userId)
            #expect(runs.withLockedValue { $0 } == 2)
        }
        await drop()
    }

    // MARK: The lane's turns

    /// A lane held at a latch, which records the jobs it runs as `account@network`, in order.
    static func heldLane() -> (lane: ImportedHashLane, latch: DispatchSemaphore, ran: NIOLockedValueBox<[String]>) {
        let latch = DispatchSemaphore(value: 0)
        let ran = NIOLockedValueBox<[String]>([])
        let lane = ImportedHashLane(beforeEach: { check in
            ran.withLockedValue { $0.append(check.map { "\($0.account)@\($0.network ?? "-")" } ?? "-") }
            latch.wait()
        })
        return (lane, latch, ran)
    }

    /// A job of `account` from `network` on `lane`, once it runs or waits in the line (no sleep: the lane says so); a
    /// job that takes the place of its network's older one is in once the older is answered.
    static func enter(_ lane: ImportedHashLane, _ account: String, _ network: String?, displacing older: Task<String, any Error>? = nil) async
        -> Task<String, any Error>
    {
        let before = lane.load
        let label = "\(account)@\(network ?? "-")"
        let job = Task { try await lane.run(for: PasswordCheck(account: account, network: network)) { _ in label } }
        if let older {
            _ = await older.result
        } else {
            while lane.load == before { await Task.yield() }
        }
        return job
    }

    /// Accounts take turns, one job each, an account new to the line joining at the back; an account's own jobs run
    /// in the order they came.
    @Test func accountsTakeTurnsAndEachAccountsJobsRunInTheOrderTheyCame() async throws {
        let (lane, latch, ran) = Self.heldLane()
        var jobs = [await Self.enter(lane, "holder", "n0")]
        for (account, network) in [("A", "n1"), ("A", "n2"), ("A", "n3"), ("B", "n4"), ("C", "n5"), ("B", "n6"), ("D", "n7")] {
            jobs.append(await Self.enter(lane, account, network))
        }
        #expect(lane.load.running == 1 && lane.load.waiting == 7)
        for _ in jobs { latch.signal() }
        for job in jobs { _ = try await job.value }
        #expect(ran.withLockedValue { $0 } == ["holder@n0", "A@n1", "B@n4", "C@n5", "D@n7", "A@n2", "B@n6", "A@n3"])
        // A job answers before the lane's thread marks it done: the lane is idle once the thread has moved on.
        try await waitFor("the lane is idle", limit: 10) { lane.load.running == 0 && lane.load.waiting == 0 }
    }

    /// The owner's login to an account no one else was trying runs after one job of each account waiting before it,
    /// however many jobs those accounts have and however many come after it, for its account or any other.
    @Test func laterJobsNeverGoBeforeAnOwnersJob() async throws {
        let (lane, latch, ran) = Self.heldLane()
        var jobs = [await Self.enter(lane, "holder", "n0")]
        for index in 1...6 { jobs.append(await Self.enter(lane, index.isMultiple(of: 2) ? "B" : "C", "flood\(index)")) }
        let owners = await Self.enter(lane, "owner", "home")
        for index in 7...16 { jobs.append(await Self.enter(lane, ["owner", "B", "C", "D"][index % 4], "flood\(index)")) }
        for _ in 0...(jobs.count) { latch.signal() }
        #expect(try await owners.value == "owner@home")
        for job in jobs { _ = try await job.value }
        // The one running, then one job of each account that waited before the owner's (B and C).
        #expect(ran.withLockedValue { $0.firstIndex(of: "owner@home") } == 3)
    }

    /// One waiting place per network: a newer job from it takes the older's place (the same place for the same
    /// account, the back of the line for another), and the older is answered busy without running. Jobs without a
    /// network hold no place; a job cancelled while it waits leaves the line.
    @Test func aNewerJobFromANetworkTakesTheOldersPlace() async throws {
        let (lane, latch, ran) = Self.heldLane()
        let holder = await Self.enter(lane, "holder", "n0")
        let typo = await Self.enter(lane, "A", "x")
        let other = await Self.enter(lane, "B", "y")
        let retry = await Self.enter(lane, "A", "x", displacing: typo)
        await #expect(throws: StoreError.self) { _ = try await typo.value }
        #expect(lane.load.running == 1 && lane.load.waiting == 2)
        // The same network, another account: the retry goes, the new job waits at the back.
        let elsewhere = await Self.enter(lane, "C", "x", displacing: retry)
        await #expect(throws: StoreError.self) { _ = try await retry.value }
        let unnamed = [await Self.enter(lane, "D", nil), await Self.enter(lane, "D", nil)]
        let cancelled = await Self.enter(lane, "E", "z")
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { _ = try await cancelled.value }
        #expect(lane.load.running == 1 && lane.load.waiting == 4)

        for _ in 0..<5 { latch.signal() }
        for job in [holder, other, elsewhere] + unnamed { _ = try await job.value }
        #expect(ran.withLockedValue { $0 } == ["holder@n0", "B@y", "C@x", "D@-", "D@-"])
    }

    /// A caller that stops waiting (a request cancelled at shutdown) is answered at once, whatever the lane's thread
    /// is doing: the latch below never opens while the caller waits.
    @Test func aCancelledCallerIsAnsweredAtOnceWhileItsHashStillRuns() async throws {
        let latch = DispatchSemaphore(value: 0)
        let entered = NIOLockedValueBox(false)
        let lane = ImportedHashLane(beforeEach: { _ in
            entered.withLockedValue { $0 = true }
            latch.wait()
        })
        let sawCancellation = NIOLockedValueBox(false)
        let call = Task {
            try await lane.run { isCancelled in
                sawCancellation.withLockedValue { $0 = isCancelled() }
                return true
            }
        }
        // The job has started: the lane's thread is at the latch.
        while !entered.withLockedValue({ $0 }) { await Task.yield() }
        call.cancel()
        await #expect(throws: CancellationError.self) { _ = try await call.value }
        // The hash (here the latch) still runs; told to stop, it sees so when it looks.
        #expect(lane.load.running == 1)
        latch.signal()
        while lane.load.running == 1 { await Task.yield() }
        #expect(sawCancellation.withLockedValue { $0 })
    }
}
