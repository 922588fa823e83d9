import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import GatehouseTestSupport
import Testing

/// Everything lives in the database: a restart loses no user, session or signing key.
@Suite struct PersistenceTests {
    @Test func usersAndRefreshTokensSurviveARestart() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-restart-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        // The folder does not exist yet: the server creates it.
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("nested/gatehouse.sqlite").path))
        let clock = ManualClock()

        let (login, jwks) = try await withGatehouseResult(testConfiguration(database: url), clock: clock) { _, client in
            let login = try await client.signUp("restart@example.com")
            let jwks = try await client.call("/.well-known/jwks.json", .get).decode(JWKS.self)
            return (login, jwks)
        }
        clock.advance(by: 60)
        try await withGatehouse(testConfiguration(database: url), clock: clock) { _, client in
            #expect(try await client.call("/.well-known/jwks.json", .get).decode(JWKS.self).keys == jwks.keys)
            let refreshed = try await client.call(Path.session, bearer: login.refreshToken)
            #expect(refreshed.status == .created)
            #expect(try await client.call(Path.profile, .get, bearer: login.accessToken).status == .ok)
            let again = try await client.login("restart@example.com").decode(LoginResponse.self)
            #expect(again.userId == login.userId)
        }
        await drop()
    }

    @Test func migrationsAreIdempotent() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-migrate-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("db.sqlite").path))
        let config = testConfiguration(database: url)
        let first = try await AuthServer.migrate(configuration: config, logger: quietLogger)
        #expect(first == Migrations.sqlite.map(\.version))
        let second = try await AuthServer.migrate(configuration: config, logger: quietLogger)
        #expect(second.isEmpty)
        // And a server starts on the migrated database.
        try await withGatehouse(config) { _, client throws in
            _ = try await expectReady(client)
        }
        await drop()
    }

    /// Sessions' API-key and revocation indexes keep only the rows that have a value, and login_failures (written by
    /// every password login) is rebuilt, on SQLite as its key's b-tree: the upgrade keeps its rows, and the
    /// statements that look sessions up by those columns (ending an API key's sessions, the retention service's
    /// delete) still find them by index.
    @Test func theUpgradeToLeanerLoginWritesKeepsRowsAndIndexedLookups() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-migrate-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("db.sqlite").path))
        let db = try await AuthServer.openDatabase(url, logger: quietLogger)
        do {
            #expect(try await Migrator(db: db, through: 14).migrate().last == 14)
            let now = SQLValue(Date())
            try await db.query(
                "INSERT INTO login_failures (key, failures, last_attempt_at, account) VALUES ($1, 3, $2, $3), ($4, 1, $2, $5)",
                .text("app|a|addr"), now, .text("app|a"), .text("app|b|addr"), .text("app|b")
            )
            #expect(try await Migrator(db: db, through: 15).migrate() == [15])
            let rows = try await db.query("SELECT key, failures, account FROM login_failures ORDER BY key", [])
            #expect(try rows.map { "\(try $0.text("key")) \(try $0.int("failures")) \(try $0.text("account"))" } == ["app|a|addr 3 app|a", "app|b|addr 1 app|b"])
            let partial = db.dialect == .sqlite
                ? "SELECT sql AS definition FROM sqlite_master WHERE name IN ('sessions_api_key', 'sessions_revoked') ORDER BY name"
                : "SELECT indexdef AS definition FROM pg_indexes WHERE indexname IN ('sessions_api_key', 'sessions_revoked') ORDER BY indexname"
            let definitions = try await db.query(partial, []).map { try $0.text("definition") }
            #expect(definitions.count == 2)
            #expect(definitions.allSatisfy { $0.contains("WHERE") && $0.contains("IS NOT NULL") }, "\(definitions)")
            if db.dialect == .sqlite {
                let table = try await db.query("SELECT sql AS definition FROM sqlite_master WHERE name = 'login_failures'", [])
                #expect(try table.first?.text("definition").contains("WITHOUT ROWID") == true)
            }
            // The plans: SQLite's, and PostgreSQL's with sequential scans priced out (its planner goes by statistics,
            // and these tables are empty), where an index is in the plan only if the statement may use it.
            func plan(_ sql: String, _ binds: [SQLValue]) async throws -> String {
                if db.dialect == .sqlite {
                    return try await db.query("EXPLAIN QUERY PLAN " + sql, binds).map { try $0.text("detail") }.joined(separator: "; ")
                }
                return try await db.transaction { tx in
                    try await tx.query("SET LOCAL enable_seqscan = off", [])
                    return try await tx.query("EXPLAIN " + sql, binds).map { try $0.text("QUERY PLAN") }.joined(separator: "; ")
                }
            }
            let retention = try await plan(
                "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE revoked_at < $1 OR expires_at < $1 LIMIT $2)", [now, .int(10)]
            )
            #expect(retention.contains("sessions_revoked") && retention.contains("sessions_expiry"), "\(retention)")
            let byKey = try await plan("UPDATE sessions SET revoked_at = $1 WHERE api_key_id = $2 AND revoked_at IS NULL", [now, .text("key")])
            #expect(byKey.contains("sessions_api_key"), "\(byKey)")
            try await db.close()
        } catch {
            try? await db.close()
            await drop()
            throw error
        }
        await drop()
    }

    /// Instances starting together on one database apply each migration once (PostgreSQL takes an advisory lock).
    /// PostgreSQL only: SQLite is for one process (several processes opening a new SQLite file at once can time out
    /// on its lock; see CHANGELOG.md's known limitations).
    @Test(.enabled(if: TestDatabase.postgresAdmin != nil))
    func concurrentMigrationsApplyEachVersionOnce() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("db.sqlite").path))
        let config = testConfiguration(database: url)
        let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<4 { group.addTask { try await AuthServer.migrate(configuration: config, logger: quietLogger) } }
            return try await group.reduce(into: [Int]()) { $0 += $1 }
        }
        #expect(applied.sorted() == Migrations.sqlite.map(\.version))
        await drop()
    }

    /// JSON columns (custom data, a session's device, an identity's data) come back exactly as stored: each kind of
    /// value keeps its kind, so a string that reads as a number or a boolean stays a string and an integer stays an
    /// integer.
    @Test func jsonColumnsKeepEveryKindOfValue() throws {
        let stored: [String: JSONValue] = [
            "text": "hello", "numeric text": "1", "boolean text": "true", "empty text": "", "null text": "null",
            "unicode": "é 👋", "int": 42, "negative": -7, "large": .int(Int64.max), "double": .double(1.5), "bool": true,
            "null": .null, "empty object": .object([:]), "empty array": .array([]),
            "nested": .object(["a": .array([1, "1", .double(2.25), false, .null, .object(["b": "c"])])]),
            "extended": .object(["$numberInt": "1"]), "path/key": "a/b", "quote \" and \\": "line\nbreak \u{1}",
        ]
        #expect(try JSONColumn.decode(JSONColumn.encode(stored)) == stored)
        #expect(try JSONColumn.encode([:]) == "{}")
        // Rows written when slashes were escaped read the same.
        #expect(try JSONColumn.decode(#"{"platform":"iOS\/17"}"#) == ["platform": "iOS/17"])
        #expect(try JSONColumn.encode(["platform": "iOS/17", "a": 1]) == #"{"a":1,"platform":"iOS/17"}"#)
        #expect(try JSONColumn.decode("{}") == [:])
        #expect(try JSONColumn.decode(#"{ "a" : 1 }"#) == ["a": 1])
        #expect(throws: (any Error).self) { try JSONColumn.decode("[1]") }
        #expect(throws: (any Error).self) { try JSONColumn.decode("{") }
    }
}
