import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import Testing

/// A write on its own is answered once PostgreSQL has committed it, not at its `CommandComplete`, which the server
/// sends before the commit (``ReadyForQueryWatch``): a commit that fails, or a session that ends between the two, is
/// never reported as a write that happened. And a `COMMIT` that PostgreSQL answers with `ROLLBACK` is a failure.
@Suite(.serialized, .enabled(if: TestDatabase.postgresAdmin != nil, "needs GATEHOUSE_TEST_POSTGRES_URL"))
struct PostgresCommitTests {
    /// A database of its own with a pool of one connection (over TLS if `tls`).
    private func withDatabase(
        tls: Bool = false, _ body: (GatehouseServer.PostgresDatabase, PostgresSettings) async throws -> Void
    ) async throws {
        try await withPostgresDatabase({ settings in
            settings.poolSize = 1
            if tls { settings.sslMode = .require }
        }, body)
    }

    private func count(_ db: GatehouseServer.PostgresDatabase, _ table: String) async throws -> Int64? {
        try await db.query("SELECT count(*) AS n FROM \(table)", []).first?.int("n")
    }

    @Test func aWriteWhoseCommitFailsIsRefusedAndTheDatabaseServesOn() async throws {
        try await withDatabase { db, _ in
            // The unique check runs at the commit: after the INSERT's CommandComplete.
            try await db.query("CREATE TABLE deferred_keys (k integer UNIQUE DEFERRABLE INITIALLY DEFERRED)", [])
            await #expect(throws: StoreError.conflict) {
                try await db.query("INSERT INTO deferred_keys VALUES ($1), ($1)", [.int(1)])
            }
            #expect(try await count(db, "deferred_keys") == 0)
            try await db.query("INSERT INTO deferred_keys VALUES ($1)", [.int(2)])
            #expect(try await count(db, "deferred_keys") == 1)
        }
    }

    /// Over TLS the watch sits after the TLS handler and reads the messages, not their ciphertext: a failed commit is
    /// still seen, and writes that commit are answered.
    @Test func overTLSTheCommitIsStillSeen() async throws {
        try await withDatabase(tls: true) { db, _ in
            let encrypted = try await db.query("SELECT CASE WHEN ssl THEN 1 ELSE 0 END AS tls FROM pg_stat_ssl WHERE pid = pg_backend_pid()", [])
            try #require(encrypted.first?.int("tls") == 1, "not encrypted: the test cluster takes TLS (scripts/postgres-env.sh)")
            try await db.query("CREATE TABLE deferred_keys (k integer UNIQUE DEFERRABLE INITIALLY DEFERRED)", [])
            await #expect(throws: StoreError.conflict) {
                try await db.query("INSERT INTO deferred_keys VALUES ($1), ($1)", [.int(1)])
            }
            for k in 2...4 { try await db.query("INSERT INTO deferred_keys VALUES ($1)", [.int(Int64(k))]) }
            #expect(try await count(db, "deferred_keys") == 3)
        }
    }

    /// What the restart fault test found once under load, made certain: the session is terminated after the INSERT's
    /// CommandComplete and before its commit (a deferred constraint trigger holds the commit), and the write, rolled
    /// back, is answered as unavailable, never as done.
    @Test func aWriteWhoseSessionEndsBeforeItsCommitIsNotAcknowledged() async throws {
        try await withDatabase { db, settings in
            try await db.query("CREATE TABLE held (k integer)", [])
            try await db.query(
                "CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(5); RETURN NULL; END $$", []
            )
            try await db.query(
                "CREATE CONSTRAINT TRIGGER held_commit AFTER INSERT ON held DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_commit()", []
            )
            let pid = try #require(try await db.query("SELECT pg_backend_pid() AS pid", []).first?.int("pid"))
            let other = try await GatehouseServer.PostgresDatabase.open(settings, logger: quietLogger)
            defer { other.shutdown() }
            let write = Task { try await db.query("INSERT INTO held VALUES ($1)", [.int(1)]) }
            // Once the commit is under way (the trigger sleeps in it), the session is ended from another.
            let deadline = ContinuousClock.now + .seconds(4)
            var holding = false
            while !holding, ContinuousClock.now < deadline {
                holding = try await other.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1::int AND wait_event = 'PgSleep'", [.int(pid)]).count == 1
                if !holding { try await Task.sleep(for: .milliseconds(10)) }
            }
            try #require(holding, "the commit never started")
            let ended = try await other.query("SELECT CASE WHEN pg_terminate_backend($1::int) THEN 1 ELSE 0 END AS ended", [.int(pid)])
            try #require(ended.first?.int("ended") == 1, "the session was not terminated")
            let result = await write.result
            switch result {
            case .success: Issue.record("a write rolled back was acknowledged")
            case .failure(let error):
                // Rolled back (the server's FATAL came before the commit), so unavailable, not an outcome unknown.
                guard case .unavailable(let reason) = error as? StoreError else {
                    Issue.record("not unavailable: \(error)")
                    break
                }
                #expect(reason.contains("57P01"), "\(reason)")
            }
            #expect(try await count(other, "held") == 0)
        }
    }

    @Test func aTransactionThatPostgreSQLRolledBackAtCommitFails() async throws {
        try await withDatabase { db, _ in
            try await db.query("CREATE TABLE kept (k integer)", [])
            // Rolled back, as PostgreSQL says: unavailable (nothing written), not an outcome unknown.
            await #expect(throws: StoreError.unavailable("the transaction was rolled back at COMMIT (ROLLBACK)")) {
                try await db.transaction { tx in
                    try await tx.query("INSERT INTO kept VALUES ($1)", [.int(1)])
                    // A failure the body swallows leaves the transaction aborted; its COMMIT is answered `ROLLBACK`.
                    _ = try? await tx.query("SELECT 1 / 0", [])
                }
            }
            #expect(try await count(db, "kept") == 0)
        }
    }
}
