import Foundation
import GatehouseDomain
@testable import GatehouseServer
import NIOConcurrencyHelpers
import Testing

/// Gatehouse's own SQLite layer (`SQLiteDatabase` on `SQLiteHandle`): values round-trip exactly, kept statements stay
/// right when the schema changes under them, and every failure SQLite can report is the store's error for it —
/// a constraint a conflict, a lock held past the busy timeout or a closed database unavailable (503), never a crash.
/// The full disk is `StoreFaultTests`; a cancelled caller is `CancellationTests` and the transaction test below.
@Suite struct SQLiteDatabaseTests {
    /// A private in-memory database, closed afterwards.
    private func withMemoryDatabase(_ body: (SQLiteDatabase) async throws -> Void) async throws {
        let db = try await SQLiteDatabase.open(.sqliteMemory, logger: quietLogger)
        do {
            try await body(db)
            try await db.close()
        } catch {
            try? await db.close()
            throw error
        }
    }

    /// A file database in a folder of its own, closed and removed afterwards.
    private func withFileDatabase(
        busyTimeout: Duration = .seconds(5), _ body: (SQLiteDatabase, String) async throws -> Void
    ) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("db.sqlite").path
        let db = try await SQLiteDatabase.open(.sqliteFile(path), logger: quietLogger, busyTimeout: busyTimeout)
        do {
            try await body(db, path)
            try await db.close()
        } catch {
            try? await db.close()
            throw error
        }
    }

    /// Another connection to the file at `path` that inserts `value` into `t` inside a transaction and keeps it open
    /// (holding the write lock) until `held`'s continuation is resumed; `holder` ends with its commit.
    private static func holdWriteLock(on path: String, inserting value: Int64) async throws
        -> (other: SQLiteDatabase, held: NIOLockedValueBox<CheckedContinuation<Void, Never>?>, holder: Task<Void, any Error>)
    {
        let other = try await SQLiteDatabase.open(.sqliteFile(path), logger: quietLogger, busyTimeout: .seconds(30))
        let held = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
        let holder = Task {
            try await other.transaction { tx in
                try await tx.query("INSERT INTO t (a) VALUES ($1)", [.int(value)])
                await withCheckedContinuation { continuation in held.withLockedValue { $0 = continuation } }
            }
        }
        try await waitFor("the other connection holds the write lock", limit: 10) { held.withLockedValue { $0 != nil } }
        return (other, held, holder)
    }

    /// The file holds the signing keys and every password hash: a folder and a database Gatehouse creates are its
    /// user's alone (the `-wal` and `-shm` files too), whatever the umask; an existing file others may read keeps its
    /// mode and is named in a warning.
    @Test func aDatabaseItCreatesIsItsUsersAlone() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-modes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let folder = base.appendingPathComponent("state")
        let path = folder.appendingPathComponent("db.sqlite").path
        func mode(_ path: String) throws -> Int {
            try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        }
        // The umask is the process's, shared by the tests running beside this one: it is changed only when it would
        // hide what this test looks for (one that keeps files from group and others already), to the usual 022.
        let current = umask(0o022)
        if current & 0o044 == 0 { umask(current) }
        defer { umask(current) }
        let db = try await SQLiteDatabase.open(.sqliteFile(path), logger: quietLogger)
        try await db.query("CREATE TABLE t (a INTEGER)", [])
        try await db.query("INSERT INTO t (a) VALUES (1)", [])
        #expect(try mode(folder.path) == 0o700)
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(try mode(file) == 0o600, "\(file)")
        }
        try await db.close()

        let shared = base.appendingPathComponent("shared.sqlite").path
        #expect(FileManager.default.createFile(atPath: shared, contents: nil, attributes: [.posixPermissions: 0o644]))
        let log = CapturedLog()
        let other = try await SQLiteDatabase.open(.sqliteFile(shared), logger: log.logger)
        try await other.close()
        #expect(try mode(shared) == 0o644)
        #expect(log.text.contains("other users of this machine") && log.text.contains("644"))
    }

    @Test func valuesRoundTripExactly() async throws {
        try await withMemoryDatabase { db in
            try await db.query("CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, s TEXT, b BLOB)", [])
            let cases: [(SQLValue, SQLValue, SQLValue)] = [
                (.int(.max), .text("ä ✓ 𝄞"), .blob([0, 1, 255])),
                (.int(.min), .text("nul\u{0}inside"), .blob([])),
                (.int(0), .text(""), .null),
                (.null, .null, .blob(Array(repeating: 7, count: 70_000))),
            ]
            for (index, (i, s, b)) in cases.enumerated() {
                try await db.query("INSERT INTO t (id, i, s, b) VALUES ($1, $2, $3, $4)", [.int(Int64(index)), i, s, b])
            }
            for (index, (i, s, b)) in cases.enumerated() {
                let row = try #require(try await db.query("SELECT i, s, b FROM t WHERE id = $1", [.int(Int64(index))]).first)
                #expect(row.values["i"] == i, "row \(index)")
                #expect(row.values["s"] == s, "row \(index)")
                #expect(row.values["b"] == b, "row \(index): an empty blob stays a blob, not NULL")
            }
            // Placeholders are numbered, not positional: `$2` before `$1`, and one used twice.
            let row = try #require(try await db.query("SELECT $2 AS a, $1 AS b, $2 AS c", [.text("one"), .text("two")]).first)
            #expect(row.values == ["a": .text("two"), "b": .text("one"), "c": .text("two")])
        }
    }

    @Test func aKeptStatementFollowsASchemaChange() async throws {
        try await withMemoryDatabase { db in
            try await db.query("CREATE TABLE t (a INTEGER)", [])
            try await db.query("INSERT INTO t (a) VALUES (1)", [])
            #expect(try await db.query("SELECT * FROM t", []).first?.values == ["a": .int(1)])
            try await db.query("ALTER TABLE t ADD COLUMN b TEXT", [])
            try await db.query("UPDATE t SET b = 'x'", [])
            // The same text, kept prepared since the first call: SQLite prepares it again, with the new column.
            #expect(try await db.query("SELECT * FROM t", []).first?.values == ["a": .int(1), "b": .text("x")])
            // A rename keeps the number of columns: the names are read again all the same.
            try await db.query("ALTER TABLE t RENAME COLUMN b TO c", [])
            #expect(try await db.query("SELECT * FROM t", []).first?.values == ["a": .int(1), "c": .text("x")])
        }
    }

    @Test func constraintsAreConflictsAndLeaveTheRowAlone() async throws {
        try await withMemoryDatabase { db in
            try await db.query("CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL)", [])
            try await db.query("CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES t(id))", [])
            try await db.query("INSERT INTO t (id, email) VALUES (1, 'a@example.com')", [])
            await #expect(throws: StoreError.conflict) {
                try await db.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(2), .text("a@example.com")])
            }
            await #expect(throws: StoreError.conflict) {
                try await db.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(1), .text("b@example.com")])
            }
            // Only a unique or primary key is a conflict ("already exists"), as on PostgreSQL: a missing parent row or
            // a NULL where none may be is not.
            for (sql, binds) in [
                ("INSERT INTO child (id, parent) VALUES ($1, $2)", [SQLValue.int(1), .int(99)]),
                ("INSERT INTO t (id, email) VALUES ($1, $2)", [SQLValue.int(5), .null]),
            ] {
                do {
                    try await db.query(sql, binds)
                    Issue.record("\(sql) succeeded")
                } catch StoreError.conflict {
                    Issue.record("\(sql) counted as a conflict")
                } catch StoreError.unavailable(let reason) {
                    #expect(reason.contains("constraint"), "\(reason)")
                }
            }
            // The statement that failed is reset: run again with other values, it succeeds.
            try await db.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(2), .text("b@example.com")])
            #expect(try await db.query("SELECT count(*) AS n FROM t", []).first?.values["n"] == .int(2))
            // A failed transaction leaves nothing behind.
            await #expect(throws: StoreError.conflict) {
                try await db.transaction { tx in
                    try await tx.query("INSERT INTO t (id, email) VALUES (3, 'c@example.com')", [])
                    try await tx.query("INSERT INTO t (id, email) VALUES (4, 'a@example.com')", [])
                }
            }
            #expect(try await db.query("SELECT count(*) AS n FROM t", []).first?.values["n"] == .int(2))
        }
    }

    /// ``SQLDatabase/writeTogether(_:)``'s writes go to the connection's thread at once (one hand-off, not one per
    /// statement with `BEGIN` and `COMMIT`), and are all or none: a write that fails rolls back those before it, the
    /// failure is the store's (a conflict), and the connection is left outside any transaction.
    @Test func writesTogetherAreOnePieceOfWorkAndAllOrNone() async throws {
        try await withFileDatabase { db, _ in
            try await db.query("CREATE TABLE t (id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL)", [])
            try await db.query("CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES t(id))", [])
            let before = (handOffs: db.handOffs, ranHere: db.ranHere)
            try await db.writeTogether { tx in
                try await tx.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(1), .text("a@example.com")])
                try await tx.query("INSERT INTO child (id, parent) VALUES ($1, $2)", [.int(1), .int(1)])
                try await tx.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(2), .text("b@example.com")])
            }
            // The connection was free: BEGIN, the three writes and COMMIT ran on the calling thread, no hand-off.
            #expect(db.handOffs == before.handOffs)
            #expect(db.ranHere - before.ranHere == 1)
            #expect(try await db.query("SELECT count(*) AS n FROM t", []).first?.values["n"] == .int(2))
            #expect(try await db.query("SELECT count(*) AS n FROM child", []).first?.values["n"] == .int(1))

            // The third write takes an address already there: the two before it are rolled back with it.
            await #expect(throws: StoreError.conflict) {
                try await db.writeTogether { tx in
                    try await tx.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(3), .text("c@example.com")])
                    try await tx.query("INSERT INTO child (id, parent) VALUES ($1, $2)", [.int(2), .int(3)])
                    try await tx.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(4), .text("a@example.com")])
                }
            }
            #expect(try await db.query("SELECT id FROM t ORDER BY id", []).map { $0.values["id"] } == [.int(1), .int(2)])
            #expect(try await db.query("SELECT count(*) AS n FROM child", []).first?.values["n"] == .int(1))
            // Outside any transaction: the next one begins, and a write alone commits at once.
            try await db.writeTogether { tx in
                try await tx.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(3), .text("c@example.com")])
                try await tx.query("INSERT INTO child (id, parent) VALUES ($1, $2)", [.int(2), .int(3)])
            }
            try await db.query("INSERT INTO t (id, email) VALUES ($1, $2)", [.int(5), .text("e@example.com")])
            #expect(try await db.query("SELECT id FROM t ORDER BY id", []).map { $0.values["id"] } == [.int(1), .int(2), .int(3), .int(5)])
        }
    }

    @Test func anotherConnectionsLockPastTheBusyTimeoutIsUnavailableAndWithinItWaits() async throws {
        try await withFileDatabase(busyTimeout: .milliseconds(200)) { db, path in
            try await db.query("CREATE TABLE t (a INTEGER)", [])
            // Another process's connection (the CLI, a backup tool) takes the write lock and keeps it.
            let (other, held, holder) = try await Self.holdWriteLock(on: path, inserting: 1)
            let started = ContinuousClock.now
            let before = (handOffs: db.handOffs, ranHere: db.ranHere)
            await #expect(throws: StoreError.self) { try await db.query("INSERT INTO t (a) VALUES (2)", []) }
            #expect(ContinuousClock.now - started >= .milliseconds(200), "failed before its busy timeout")
            // It found the lock taken on the calling thread, which it did not block: it waited on the connection's.
            #expect(db.handOffs - before.handOffs == 1)
            #expect(db.ranHere == before.ranHere)
            do {
                try await db.query("INSERT INTO t (a) VALUES (2)", [])
                Issue.record("a write went through while another connection held the lock")
            } catch StoreError.unavailable(let reason) {
                #expect(reason.contains("locked"), "\(reason)")
            }
            // The other connection commits; a writer with a long busy timeout started while it held the lock gets through.
            let patient = try await SQLiteDatabase.open(.sqliteFile(path), logger: quietLogger, busyTimeout: .seconds(30))
            async let waiting = patient.query("INSERT INTO t (a) VALUES (3)", [])
            // Released only once the write found the lock taken and waits for it on its connection's thread.
            try await waitFor("the patient writer to wait for the lock", limit: 10) { patient.handOffs == 1 }
            held.withLockedValue { $0?.resume() }
            try await holder.value
            _ = try await waiting
            #expect(try await db.query("SELECT a FROM t ORDER BY a", []).map { $0.values["a"] } == [.int(1), .int(3)])
            try await patient.close()
            try await other.close()
        }
    }

    /// A write that finds the connection free runs on the calling thread; one that finds a transaction holding it
    /// goes to the connection's thread and runs after the transaction, in its turn.
    @Test func aWriteRunsHereWhenTheConnectionIsFreeAndAfterATransactionThatHoldsIt() async throws {
        try await withFileDatabase { db, _ in
            try await db.query("CREATE TABLE t (a INTEGER)", [])
            let start = (handOffs: db.handOffs, ranHere: db.ranHere)
            try await db.query("INSERT INTO t (a) VALUES (1)", [])
            #expect(db.ranHere - start.ranHere == 1)
            #expect(db.handOffs == start.handOffs)

            let held = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
            let transaction = Task {
                try await db.transaction { tx in
                    try await tx.query("INSERT INTO t (a) VALUES (2)", [])
                    await withCheckedContinuation { continuation in held.withLockedValue { $0 = continuation } }
                }
            }
            try await waitFor("the transaction holds the connection", limit: 10) { held.withLockedValue { $0 != nil } }
            let during = (handOffs: db.handOffs, ranHere: db.ranHere)
            let waiting = Task { try await db.query("INSERT INTO t (a) VALUES (3)", []) }
            try await waitFor("the write waits for its turn", limit: 10) { db.waitingForConnection == 1 }
            held.withLockedValue { $0?.resume() }
            try await transaction.value
            _ = try await waiting.value
            // The transaction's COMMIT, then the waiting write: each a hand-off, nothing on the calling thread.
            #expect(db.handOffs - during.handOffs == 2)
            #expect(db.ranHere == during.ranHere)
            #expect(try await db.query("SELECT a FROM t ORDER BY rowid", []).map { $0.values["a"] } == [.int(1), .int(2), .int(3)])
        }
    }

    /// Writes on the calling thread leave the WAL's checkpoints to the connection's thread (which waits for the disk
    /// there): the write after a commit that took the WAL past SQLite's threshold goes there, and the checkpoint runs
    /// after it. The WAL stays near the threshold however much is written.
    @Test func checkpointsRunOnTheConnectionsThreadAndKeepTheWALBounded() async throws {
        try await withFileDatabase { db, path in
            try await db.query("CREATE TABLE t (a INTEGER PRIMARY KEY, b BLOB NOT NULL)", [])
            let pageSize = try #require(try await db.query("PRAGMA page_size", []).first?.int("page_size"))
            let start = (ranHere: db.ranHere, handOffs: db.handOffs, checkpoints: db.checkpoints)
            // A row of 3 KB per commit: at least one WAL page each, so three times the threshold or more in all.
            let rows = 3 * SQLiteHandle.checkpointPages
            for n in 1...rows {
                try await db.query("INSERT INTO t (a, b) VALUES ($1, $2)", [.int(Int64(n)), .blob(Array(repeating: UInt8(n & 0xff), count: 3_000))])
            }
            let checkpoints = db.checkpoints - start.checkpoints
            #expect(checkpoints >= 3)
            // Each checkpoint came with the one write that went to the thread for it; every other write ran here.
            #expect(db.handOffs - start.handOffs == checkpoints)
            #expect(db.ranHere - start.ranHere == rows - checkpoints)
            let wal = try #require(try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int)
            #expect(wal < (SQLiteHandle.checkpointPages + 10) * (Int(pageSize) + 24) + 32, "the WAL grew to \(wal) bytes")
            #expect(try await db.query("SELECT count(*) AS n FROM t", []).first?.values["n"] == .int(Int64(rows)))
        }
    }

    /// A file database runs plain `SELECT`s on its read-only connections, on the calling thread: each sees every write
    /// committed before it, and reads go on while another connection holds the write lock (WAL), seeing what was
    /// committed. Writes and statements inside a transaction never go there.
    @Test func readsRunOnTheReadOnlyConnectionAndSeeEveryCommittedWrite() async throws {
        try await withFileDatabase { db, path in
            try await db.query("CREATE TABLE t (a INTEGER)", [])
            let start = db.readerCounts
            for n in 1...50 {
                try await db.query("INSERT INTO t (a) VALUES ($1)", [.int(Int64(n))])
                let count = try await db.query("SELECT count(*) AS n FROM t", []).first?["n"]
                #expect(count == .int(Int64(n)), "read \(n) saw every write before it")
            }
            let inTransaction = try await db.transaction { tx in
                try await tx.query("INSERT INTO t (a) VALUES (51)", [])
                return try await tx.query("SELECT count(*) AS n FROM t", []).first?["n"]
            }
            #expect(inTransaction == .int(51), "a read inside a transaction sees the transaction's own write")
            #expect(db.readerCounts.ran - start.ran == 50)
            #expect(db.readerCounts.handedOver == start.handedOver)

            let (other, held, holder) = try await Self.holdWriteLock(on: path, inserting: 52)
            let whileHeld = try await db.query("SELECT count(*) AS n FROM t", []).first?["n"]
            #expect(whileHeld == .int(51), "a read while another connection writes sees what was committed, at once")
            held.withLockedValue { $0?.resume() }
            try await holder.value
            let after = try await db.query("SELECT count(*) AS n FROM t", []).first?["n"]
            #expect(after == .int(52))
            try await other.close()
        }
    }

    /// Reads from many tasks at once (the event loops' requests) all run on the read-only connections, none goes to
    /// the writer, and each sees the rows committed before it (which connection each takes: the test below).
    @Test func concurrentReadsShareTheReadOnlyConnections() async throws {
        try await withFileDatabase { db, _ in
            try await db.query("CREATE TABLE t (a INTEGER)", [])
            for n in 1...10 { try await db.query("INSERT INTO t (a) VALUES ($1)", [.int(Int64(n))]) }
            let start = db.readerCounts
            let counts = try await withThrowingTaskGroup(of: [SQLValue?].self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        var seen: [SQLValue?] = []
                        for _ in 0..<50 { seen.append(try await db.query("SELECT count(*) AS n FROM t", []).first?["n"]) }
                        return seen
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(counts.count == 400)
            #expect(counts.allSatisfy { $0 == .int(10) })
            #expect(db.readerCounts.ran - start.ran == 400)
            #expect(db.readerCounts.handedOver == start.handedOver)
        }
    }

    /// A read that finds a read-only connection in use takes the next free one instead of waiting for it: two loops'
    /// reads run side by side.
    @Test func aReadTakesTheNextReaderWhileOneIsInUse() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let db = try await SQLiteDatabase.open(.sqliteFile(folder.appendingPathComponent("db.sqlite").path), logger: quietLogger, readers: 2)
        try await db.query("CREATE TABLE t (a INTEGER)", [])
        try await db.query("INSERT INTO t (a) VALUES (1)", [])
        let before = db.readerRuns
        try #require(before.count == 2)
        // Reader 0 held on a thread of its own, as a read in progress on another loop holds it.
        let release = DispatchSemaphore(value: 0)
        await withCheckedContinuation { (held: CheckedContinuation<Void, Never>) in
            Thread {
                db.holdingReader(0) {
                    held.resume()
                    // Let go after 5 s whatever happens: a read that waited for reader 0 then ends, and fails below.
                    _ = release.wait(timeout: .now() + 5)
                }
            }.start()
        }
        let whileHeld = try await db.query("SELECT count(*) AS n FROM t", []).first?["n"]
        release.signal()
        #expect(whileHeld == .int(1))
        #expect(db.readerRuns == [before[0], before[1] + 1])
        #expect(db.readerCounts.handedOver == 0)
        try await db.close()
    }

    @Test func aCancelledTransactionStillEndsAndTheNextStatementIsOutsideIt() async throws {
        try await withFileDatabase { db, _ in
            try await db.query("CREATE TABLE t (a INTEGER)", [])
            let task = Task {
                try await db.transaction { tx in
                    try await tx.query("INSERT INTO t (a) VALUES (1)", [])
                    withUnsafeCurrentTask { $0?.cancel() }
                    // Sent after the cancellation: it runs all the same, and so does the COMMIT.
                    try await tx.query("INSERT INTO t (a) VALUES (2)", [])
                }
            }
            try await task.value
            #expect(try await db.query("SELECT count(*) AS n FROM t", []).first?.values["n"] == .int(2))
            // No transaction is left open on the connection: another one begins.
            try await db.transaction { tx in try await tx.query("INSERT INTO t (a) VALUES (3)", []) }
            #expect(try await db.query("SELECT count(*) AS n FROM t", []).first?.values["n"] == .int(3))
        }
    }

    @Test func misuseIsAnErrorNotACrash() async throws {
        let db = try await SQLiteDatabase.open(.sqliteMemory, logger: quietLogger)
        // Two statements in one call would run only the first: refused instead.
        await #expect(throws: StoreError.self) { try await db.query("SELECT 1; SELECT 2", []) }
        await #expect(throws: StoreError.self) { try await db.query("SELECT * FROM missing", []) }
        await #expect(throws: StoreError.self) { try await db.query("SELECT $1", [.int(1), .int(2)]) }
        // One value too few would run as NULL: refused.
        await #expect(throws: StoreError.self) { try await db.query("SELECT $1, $2", [.int(1)]) }
        #expect(try await db.query("SELECT 1 AS one;  ", []).first?.values == ["one": .int(1)])
        try await db.close()
        await #expect(throws: StoreError.self) { try await db.query("SELECT 1", []) }
    }

    /// SQLite marks a value the planner looked at (here `$1`, which it weighed as a possible small integer for a
    /// plan it did not choose) so that a new value prepares the statement again; clearing the values after each
    /// call counted as a new value every time, and the session read, every refresh's one statement, was parsed and
    /// planned afresh at each call.
    @Test func aKeptStatementIsNotPreparedAgainForNewValues() async throws {
        try await withMemoryDatabase { (db: SQLiteDatabase) async throws in
            try await db.query("CREATE TABLE owners (id TEXT PRIMARY KEY, name TEXT NOT NULL)", [])
            try await db.query("CREATE TABLE things (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, size INTEGER NOT NULL)", [])
            try await db.query("INSERT INTO owners VALUES ('o1', 'Ann')", [])
            for n in 0..<20 { try await db.query("INSERT INTO things VALUES ($1, 'o1', $2)", [.text("t\(n)"), .int(Int64(n % 3))]) }
            let read = "SELECT things.size, owners.name FROM things LEFT JOIN owners ON owners.id = things.owner_id WHERE things.id = $1"
            let bySize = "SELECT count(*) AS n FROM things WHERE owner_id = $1 AND size = $2"
            for n in 0..<20 {
                let row = try #require(try await db.query(read, [.text("t\(n)")]).first)
                #expect(row.values["size"] == .int(Int64(n % 3)) && row.values["name"] == .text("Ann"))
                #expect(try await db.query(bySize, [.text("o1"), .int(Int64(n % 3 == 0 ? 5 : 7))]).first?.values["n"] == .int(0))
            }
            for sql in [read, bySize] {
                let again = try await db.timesPreparedAgain(sql)
                #expect(again == 0, "prepared again \(again.map(String.init) ?? "?") times: \(sql)")
            }
        }
    }

    /// SQLite reads a bound LIMIT's value to plan a statement and marks the statement to be planned again whenever
    /// the value is bound anew: `LIMIT $1` was parsed and planned at every use. The store writes the limits it fixes
    /// into the text (``SQLStore/limit(_:)``), so its routine statements — the outbox's claim at every poll, the
    /// retention service's deletes, the dev mailbox's reads, an export's pages — are each planned once.
    @Test func limitsTheStoreFixesArePlannedOnce() async throws {
        try await withFileDatabase { db, _ in
            try await Migrator(db: db).migrate()
            // The migrations' own statements were planned again as each changed the schema under them.
            let migrating = Set(try await db.statementsPreparedAgain())
            func plannedAgain() async throws -> Set<String> { Set(try await db.statementsPreparedAgain()).subtracting(migrating) }
            // SQLite's side of it: the same statement with the value bound is planned again at its next use.
            let bound = "SELECT id FROM outbox ORDER BY seq LIMIT $1"
            for _ in 0..<3 { _ = try await db.query(bound, [.int(10)]) }
            #expect(try await plannedAgain() == [bound])

            let store = SQLStore(db: db)
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            for i in 0..<3 {
                try await store.enqueue(OutboxMessage(
                    id: Secrets.objectID(), appId: "app", kind: "confirmation", recipient: "User\(i)@example.com",
                    subject: "s", text: "t", html: "h", createdAt: now, nextAttemptAt: now
                ))
            }
            var claimed = 0
            for round in 0..<3 {
                let later = now.addingTimeInterval(TimeInterval(600 * round))
                claimed += try await store.claimDueMail(now: later, leaseUntil: later.addingTimeInterval(900), limit: 2).count
                #expect(try await store.mailbox(recipient: "user\(round)@example.com", limit: 200).count == 1)
                #expect(try await store.mailbox(recipient: nil, limit: 200).count == 3)
                for target in RetentionTarget.allCases { _ = try await store.purge(target, before: now, limit: 100) }
            }
            // Each round's claim took what was due and not leased: two, then the third, then the first two again.
            #expect(claimed == 5)
            // An export reads its users and migrated addresses in pages: three users one page at a time, twice.
            for i in 0..<3 {
                let user = UserRecord(id: Secrets.objectID(at: now), appId: "app", createdAt: now, disabled: false, customData: [:])
                try await store.createUser(user, identity: IdentityRecord(
                    id: Secrets.objectID(at: now), userId: user.id, appId: "app", providerType: "anon-user", externalId: "anon-\(i)",
                    data: [:], createdAt: now
                ))
            }
            for _ in 0..<2 {
                let summary = try await UserTransfer(db: db, pageSize: 1).export(apps: ["app"], sessions: false, now: now) { _ in }
                #expect(summary.users == 3)
            }
            let planned = try await plannedAgain()
            #expect(planned == [bound], "planned again: \(planned)")
        }
    }

    @Test func theStatementTableIsBounded() async throws {
        try await withMemoryDatabase { (db: SQLiteDatabase) async throws in
            // More distinct statements than the table keeps: older ones make room, and each still answers right.
            for n in 0..<(SQLiteHandle.statementLimit + 20) {
                #expect(try await db.query("SELECT \(n) AS n", []).first?.values["n"] == .int(Int64(n)))
            }
            #expect(try await db.query("SELECT 0 AS n", []).first?.values["n"] == .int(0))
            #expect(try await db.keptStatements() == SQLiteHandle.statementLimit)
            // A batch (many placeholders, its text depending on its size) runs and is not kept.
            let batch = (1...40).map { "$\($0)" }.joined(separator: " + ")
            let sum = try await db.query("SELECT \(batch) AS n", (1...40).map { SQLValue.int(Int64($0)) })
            #expect(sum.first?.values["n"] == .int(820))
            #expect(try await db.keptStatements() == SQLiteHandle.statementLimit)
            #expect(try await db.query("SELECT 1 AS n", []).first?.values["n"] == .int(1))
        }
    }
}
