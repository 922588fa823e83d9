import Foundation
import GatehouseDomain
@testable import GatehouseServer
import Hummingbird
import Testing

/// A cancelled task must not leave the SQLite connection half-used: statements run to the end and `close` still
/// closes (SQLiteNIO answers a cancelled caller at once while its thread goes on, and asserts on an unclosed
/// connection).
@Suite struct CancellationTests {
    @Test func closingFromACancelledTaskStillCloses() async throws {
        let db = try await SQLiteDatabase.open(.sqliteMemory, logger: quietLogger)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await db.query("SELECT 1", [])
            try await db.close()
        }
        try await task.value
        // Closed for real: a new statement fails instead of running.
        await #expect(throws: (any Error).self) { try await db.query("SELECT 1", []) }
    }
}
