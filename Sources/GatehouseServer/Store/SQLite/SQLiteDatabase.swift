import Foundation
import GatehouseDomain
import Logging
import NIOCore
import NIOPosix
import SQLiteNIO

/// The embedded SQLite database: one connection, WAL journal, foreign keys on.
///
/// SQLite allows one writer at a time, so statements and transactions take turns through a FIFO lock; a
/// transaction holds it from `BEGIN IMMEDIATE` to `COMMIT`, so nothing interleaves with it.
final class SQLiteDatabase: SQLDatabase {
    let dialect = SQLDialect.sqlite
    private let connection: SQLiteConnection
    private let lock = AsyncLock()
    /// The wait for the connection (its lock), the work on it, and whether it is in use.
    private let metrics: QueuedWorkMetrics

    private init(connection: SQLiteConnection, metrics: QueuedWorkMetrics) {
        self.connection = connection
        self.metrics = metrics
    }

    /// Opens (creating if needed) the database at `url`; creates the parent folder of a file database.
    static func open(_ url: DatabaseURL, logger: Logger, metrics: QueuedWorkMetrics = .none) async throws -> SQLiteDatabase {
        let storage: SQLiteConnection.Storage
        switch url {
        case .sqliteMemory:
            storage = .memory
        case .sqliteFile(let path):
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            storage = .file(path: path)
        case .postgres:
            preconditionFailure("SQLiteDatabase opens SQLite URLs only")
        }
        var sqliteLogger = logger
        sqliteLogger.logLevel = max(logger.logLevel, .notice)
        let connection = try await SQLiteConnection.open(storage: storage, logger: sqliteLogger)
        let db = SQLiteDatabase(connection: connection, metrics: metrics)
        do {
            // The busy timeout first: another process opening the same file may hold it for a moment.
            try await db.raw("PRAGMA busy_timeout = 5000")
            if case .sqliteFile = url {
                try await db.raw("PRAGMA journal_mode = WAL")
                try await db.raw("PRAGMA synchronous = NORMAL")
            }
            try await db.raw("PRAGMA foreign_keys = ON")
        } catch {
            try? await Task { try await connection.close() }.value
            throw error
        }
        return db
    }

    private func raw(_ sql: String, _ binds: [SQLValue] = []) async throws -> [SQLRow] {
        let rows: [SQLiteRow]
        do {
            // Shielded from cancellation: SQLiteNIO's thread-pool call answers a cancelled task at once while the
            // statement goes on running, which would let the lock (and the connection) go before SQLite is done.
            let (connection, sql, binds) = (connection, Self.translate(sql), binds.map(\.sqlite))
            rows = try await Task { try await connection.query(sql, binds) }.value
        } catch let error as SQLiteError where [.constraintUniqueFailed, .constraintPrimaryKeyFailed, .constraint].contains(error.reason) {
            throw StoreError.conflict
        } catch {
            // I/O errors, a full disk, a closed connection: the request cannot be served now (503), nothing was
            // half-written (statements of a transaction roll back together).
            throw StoreError.unavailable(String(describing: error))
        }
        return rows.map { row in
            var values: [String: SQLValue] = [:]
            for column in row.columns { values[column.name] = SQLValue(column.data) }
            return SQLRow(values: values)
        }
    }

    @discardableResult
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        let queued = ContinuousClock.now
        return try await lock.withLock { try await self.metrics.leased(since: queued) { try await self.raw(sql, binds) } }
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        let queued = ContinuousClock.now
        return try await lock.withLock {
            try await self.metrics.leased(since: queued) {
                _ = try await self.raw("BEGIN IMMEDIATE")
                do {
                    let result = try await body(Transaction(db: self))
                    _ = try await self.raw("COMMIT")
                    return result
                } catch {
                    _ = try? await self.raw("ROLLBACK")
                    throw error
                }
            }
        }
    }

    func ping() async throws {
        try await query("SELECT 1", [])
    }

    func close() async throws {
        // Shielded from cancellation, like every statement: a close that never runs trips SQLiteNIO's deinit check.
        let connection = connection
        try await lock.withLock { try await Task { try await connection.close() }.value }
    }

    /// Runs statements of a transaction that already holds the lock.
    private struct Transaction: SQLExecutor {
        let db: SQLiteDatabase
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            try await db.raw(sql, binds)
        }
    }

    /// `$1` → `?1`: SQLite numbers `?NNN` parameters by their digits, whatever order they appear in. Works on the
    /// UTF-8 bytes (`$` and digits are ASCII), since every statement passes through here.
    static func translate(_ sql: String) -> String {
        let utf8 = Array(sql.utf8)
        guard utf8.contains(UInt8(ascii: "$")) else { return sql }
        var out = utf8
        for i in out.indices.dropLast() where out[i] == UInt8(ascii: "$") && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(out[i + 1]) {
            out[i] = UInt8(ascii: "?")
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension SQLValue {
    fileprivate var sqlite: SQLiteData {
        switch self {
        case .int(let i): .integer(SQLiteInt64(i))
        case .text(let s): .text(s)
        case .blob(let b): .blob(ByteBuffer(bytes: b))
        case .null: .null
        }
    }

    fileprivate init(_ data: SQLiteData) {
        switch data {
        case .integer(let i): self = .int(Int64(i))
        case .float(let d): self = .int(Int64(d))
        case .text(let s): self = .text(s)
        case .blob(let buffer): self = .blob(Array(buffer.readableBytesView))
        case .null: self = .null
        }
    }
}

/// A FIFO mutual-exclusion lock for async code: waiters resume in arrival order.
actor AsyncLock {
    private var locked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func lock() async {
        if !locked {
            locked = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func unlock() {
        if waiters.isEmpty {
            locked = false
        } else {
            waiters.removeFirst().resume()
        }
    }

    nonisolated func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await lock()
        do {
            let result = try await body()
            await unlock()
            return result
        } catch {
            await unlock()
            throw error
        }
    }
}
