import Foundation
import GatehouseDomain
@testable import GatehouseServer
import Hummingbird
import Testing

/// A cancelled task must not leave the SQLite connection half-used: statements sent to its thread run to the end and
/// `close` still closes (a close skipped by a cancellation would leave the connection and its thread behind).
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
