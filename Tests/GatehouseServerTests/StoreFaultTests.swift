import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import NIOConcurrencyHelpers
import Testing

/// Faults of the database as the HTTP API sees them, in process: a full SQLite disk (`PRAGMA max_page_count`, which
/// fails writes with SQLITE_FULL exactly as a full filesystem does), and PostgreSQL's own refusals.
@Suite struct StoreFaultTests {
    @Test func aFullSQLiteDiskAnswers503SaysNotReadyLosesNothingAndRecovers() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("full-disk-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("gatehouse.sqlite").path))
        let gatehouse = try await AuthServer.open(configuration: configuration, logger: quietLogger)
        do {
            try await gatehouse.makeApplication().test(.router) { client in
                #expect(try await client.register("before@example.com").status == .created)
                _ = try await expectReady(client)

                // The disk fills up: no page can be added from now on.
                try await gatehouse.database.query("PRAGMA max_page_count = 1", [])
                var refused: Reply?
                for n in 0..<200 {
                    let reply = try await client.register("user\(n)@example.com")
                    if reply.status != .created {
                        refused = reply
                        break
                    }
                }
                let full = try #require(refused, "200 registrations fitted in a database that cannot grow")
                #expect(full.status == .serviceUnavailable)
                #expect(full.error?.errorCode == .maintenanceInProgress)
                #expect(full.headers[.retryAfter] == String(StoreError.retryAfterSeconds))
                // Readiness writes, so it sees the full disk rather than a database that still answers reads.
                try await waitFor("not ready", limit: 10) { try await client.call("/readyz", .get).status == .serviceUnavailable }
                let notReady = try await client.call("/readyz", .get)
                #expect(notReady.text.contains("refused a write"))
                #expect(notReady.headers[.retryAfter] != nil)
                // Reads still work.
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "before@example.com") != nil)

                // Space again: ready, and writes go through; nothing acknowledged was lost.
                try await gatehouse.database.query("PRAGMA max_page_count = 1073741823", [])
                try await waitFor("ready again", limit: 10) { try await client.call("/readyz", .get).status == .ok }
                #expect(try await client.register("after@example.com").status == .created)
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "before@example.com") != nil)
                let integrity = try await gatehouse.database.query("PRAGMA integrity_check", [])
                #expect(integrity.first?.values.values.first == .text("ok"))
            }
            try await gatehouse.close()
        } catch {
            try? await gatehouse.close()
            throw error
        }
    }

    @Test func postgresRefusalsOfTheServerAreInfrastructureAndOthersAreNot() {
        // Shutdown, crash, a statement cancelled by statement_timeout, a full disk, too many connections, a lock not
        // granted in time, a read-only server after a failover: 503, never 500.
        for state in ["57P01", "57P02", "57P03", "57014", "08006", "08003", "53100", "53300", "55P03", "25006", "40001", "40P01", "58030"] {
            #expect(PostgresDatabase.isInfrastructure(sqlState: state), "\(state)")
        }
        // A constraint, a syntax error, a missing table: bugs or conflicts, not outages.
        for state in ["23505", "23503", "42601", "42P01", "22P02"] {
            #expect(!PostgresDatabase.isInfrastructure(sqlState: state), "\(state)")
        }
    }

    @Test func onlyPlainSelectsCountAsReads() {
        #expect(PostgresDatabase.isRead("SELECT 1"))
        #expect(PostgresDatabase.isRead("  select id FROM users WHERE id = $1"))
        #expect(!PostgresDatabase.isRead("SELECT id FROM sessions WHERE id = $1 FOR UPDATE"))
        #expect(!PostgresDatabase.isRead("UPDATE sessions SET revoked_at = $1"))
        #expect(!PostgresDatabase.isRead("INSERT INTO users (id) VALUES ($1) RETURNING id"))
        #expect(!PostgresDatabase.isRead("WITH x AS (DELETE FROM outbox RETURNING id) SELECT id FROM x"))
        #expect(PostgresDatabase.isRead("\n\tSeLeCt id FROM users -- no row lock"))
        #expect(!PostgresDatabase.isRead("select id from sessions where id = $1 for update skip locked"))
        #expect(!PostgresDatabase.isRead("SELECT id FROM sessions WHERE id = $1 For Update"))
        #expect(!PostgresDatabase.isRead("SELEC"))
        #expect(!PostgresDatabase.isRead("   "))
        // Asked again (the answer remembered), and for the same text built afresh: the same answers.
        for _ in 0..<2 {
            #expect(!PostgresDatabase.isRead(String("SELECT id FROM sessions WHERE id = $1 FOR UPDATE".utf8.map { Character(UnicodeScalar($0)) })))
            #expect(PostgresDatabase.isRead(["SELECT", "1"].joined(separator: " ")))
        }
    }

    /// A row's columns are found by name whatever order they are read in (the guess of the next column only saves a
    /// hash); of two columns of one name (a join), the last; an unknown name is nil.
    @Test func columnsAreFoundByNameInAnyOrderAndTheLastOfADuplicateWins() {
        let names = ["id", "user_id", "a_longer_column_name_than_fifteen", "id", "data"]
        // The first guess is the first column: an `id` that a later one of the same name hides.
        #expect(SQLColumns(names).index(of: "id") == 3)
        let columns = SQLColumns(names)
        let row = SQLRow(columns: columns, cells: [.int(1), .text("u"), .text("long"), .int(4), .null])
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            for name in (names + ["missing"]).shuffled(using: &generator) {
                switch name {
                case "id": #expect(row["id"] == .int(4))
                case "user_id": #expect(row["user_id"] == .text("u"))
                case "a_longer_column_name_than_fifteen": #expect(row[name] == .text("long"))
                case "data": #expect(row["data"] == .null)
                default: #expect(row[name] == nil)
                }
            }
        }
        // In order, as the store reads them: every name after the first is the guess.
        #expect(row["user_id"] == .text("u"))
        #expect(row["a_longer_column_name_than_fifteen"] == .text("long"))
        #expect(row["id"] == .int(4))
        #expect(row["data"] == .null)
        #expect(columns.index(of: "id") == 3)
    }

    /// Statement texts as dictionary keys (kept statements, remembered answers): equal when their bytes are, whatever
    /// string holds them, and told apart by a byte their hash does not sample.
    @Test func statementTextsAreEqualByTheirBytes() {
        let long = "SELECT s.id, s.user_id FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND u.disabled = 0 AND s.revoked_at IS NULL"
        #expect(long.utf8.count > 96)
        let copy = String(decoding: Array(long.utf8), as: UTF8.self)
        #expect(ExactText(long) == ExactText(copy))
        #expect(ExactText(long).hashValue == ExactText(copy).hashValue)
        // One byte changed between the samples (start, middle, end): another statement.
        var bytes = Array(long.utf8)
        bytes[40] = UInt8(ascii: "X")
        let other = String(decoding: bytes, as: UTF8.self)
        #expect(ExactText(long) != ExactText(other))
        // NFC and NFD spellings are equal Strings but not equal bytes: two statements.
        #expect("SELECT 'é'" == "SELECT 'e\u{301}'")
        #expect(ExactText("SELECT 'é'") != ExactText("SELECT 'e\u{301}'"))
        var table: [ExactText: Int] = [ExactText(long): 1, ExactText(other): 2]
        table[ExactText(copy)] = 3
        #expect(table.count == 2)
        #expect(table[ExactText(long)] == 3)
        #expect(table[ExactText(other)] == 2)
        #expect(table[ExactText("SELECT 1")] == nil)
    }

    @Test func aDeadlineFiresOnceWhenDueUnlessDisarmed() {
        // A tick of an hour: only the test's own `fire(now:)` runs the deadlines, at the instants it names.
        let deadlines = Deadlines(tick: .seconds(3600))
        let fired = NIOLockedValueBox<[String]>([])
        let start = ContinuousClock.now
        let soon = deadlines.arm(at: start + .seconds(1)) { fired.withLockedValue { $0.append("soon") } }
        let later = deadlines.arm(at: start + .seconds(5)) { fired.withLockedValue { $0.append("later") } }
        let disarmed = deadlines.arm(at: start + .seconds(1)) { fired.withLockedValue { $0.append("disarmed") } }
        #expect(deadlines.disarm(disarmed))
        deadlines.fire(now: start)
        #expect(fired.withLockedValue { $0 }.isEmpty)
        deadlines.fire(now: start + .seconds(2))
        #expect(fired.withLockedValue { $0 } == ["soon"])
        deadlines.fire(now: start + .seconds(3))
        #expect(fired.withLockedValue { $0 } == ["soon"], "a deadline fires once")
        #expect(!deadlines.disarm(soon), "a deadline that fired cannot be disarmed")
        #expect(deadlines.disarm(later))
        deadlines.fire(now: start + .seconds(10))
        #expect(fired.withLockedValue { $0 } == ["soon"])
    }
}
