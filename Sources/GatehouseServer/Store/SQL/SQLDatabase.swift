import Foundation
import GatehouseDomain
import Synchronization

/// A value bound to or read from SQL. Timestamps are integer milliseconds; booleans are 0/1.
enum SQLValue: Sendable, Hashable {
    case int(Int64)
    case text(String)
    case blob([UInt8])
    case null
}

/// One result row, by column name.
/// The column names of a statement's rows, and where each is: made once per prepared statement (SQLite) or per
/// result (PostgreSQL) and shared by its rows, so that a row is an array of values, not a dictionary built per row
/// (hashing every column name of the session read at every refresh: `Benchmarks/PROFILING.md`). A name that occurs
/// twice (a join) finds its last column, as a dictionary built in column order would.
///
/// The store reads a row's columns mostly in the order its statement lists them, so a lookup first tries the column
/// after the one found last, a comparison of two short strings, and hashes the name only when that guess misses.
final class SQLColumns: Sendable {
    let names: [String]
    let position: [String: Int]
    /// Whether each column is the last of its name (only those are found, as in ``position``).
    private let isLast: [Bool]
    /// The column after the last one found: the next lookup's guess. Shared by every row of the statement, on any
    /// thread; a stale guess only costs the hash.
    private let next = Atomic<Int>(0)

    init(_ names: [String]) {
        self.names = names
        var position = [String: Int](minimumCapacity: names.count)
        for (index, name) in names.enumerated() { position[name] = index }
        self.position = position
        isLast = names.indices.map { position[names[$0]] == $0 }
    }

    /// Where `column` is; nil when there is no such column.
    func index(of column: String) -> Int? {
        let guess = next.load(ordering: .relaxed)
        if guess < names.count, isLast[guess], names[guess] == column {
            next.store(guess + 1, ordering: .relaxed)
            return guess
        }
        guard let found = position[column] else { return nil }
        next.store(found + 1, ordering: .relaxed)
        return found
    }
}

struct SQLRow: Sendable {
    let columns: SQLColumns
    /// One value per column of ``columns``, in order.
    let cells: [SQLValue]

    init(columns: SQLColumns, cells: [SQLValue]) {
        self.columns = columns
        self.cells = cells
    }

    /// The value of `column`; nil when the row has no such column.
    subscript(_ column: String) -> SQLValue? {
        columns.index(of: column).map { cells[$0] }
    }

    /// Every column's value by name (tests; the store reads single columns).
    var values: [String: SQLValue] {
        var values = [String: SQLValue](minimumCapacity: cells.count)
        for (index, name) in columns.names.enumerated() { values[name] = cells[index] }
        return values
    }

    // Each reads its column once: a lookup hashes the column's name.
    func text(_ column: String) throws -> String {
        guard case .text(let s)? = self[column] else { throw SQLRowError(column: column, expected: "text") }
        return s
    }
    func optionalText(_ column: String) throws -> String? {
        switch self[column] {
        case .null?: return nil
        case .text(let s)?: return s
        default: throw SQLRowError(column: column, expected: "text")
        }
    }
    func int(_ column: String) throws -> Int64 {
        guard case .int(let i)? = self[column] else { throw SQLRowError(column: column, expected: "integer") }
        return i
    }
    func optionalInt(_ column: String) throws -> Int64? {
        switch self[column] {
        case .null?: return nil
        case .int(let i)?: return i
        default: throw SQLRowError(column: column, expected: "integer")
        }
    }
    func blob(_ column: String) throws -> [UInt8] {
        guard case .blob(let b)? = self[column] else { throw SQLRowError(column: column, expected: "blob") }
        return b
    }
    func optionalBlob(_ column: String) throws -> [UInt8]? {
        switch self[column] {
        case .null?: return nil
        case .blob(let b)?: return b
        default: throw SQLRowError(column: column, expected: "blob")
        }
    }
    func date(_ column: String) throws -> Date { Date(milliseconds: try int(column)) }
    func optionalDate(_ column: String) throws -> Date? { try optionalInt(column).map(Date.init(milliseconds:)) }
}

struct SQLRowError: Error, CustomStringConvertible {
    var column: String
    var expected: String
    var description: String { "column \(column): expected \(expected)" }
}

/// The SQL dialects Gatehouse speaks. Queries are written once with `$1`-style placeholders and `RETURNING`,
/// which both SQLite (3.35+) and PostgreSQL understand; the dialect picks the schema.
enum SQLDialect: Sendable {
    case sqlite
    case postgres
}

/// Runs statements. Inside ``SQLDatabase/transaction(_:)`` every call runs in that transaction.
protocol SQLExecutor: Sendable {
    /// Runs one statement with `$1…$n` placeholders and returns its rows.
    @discardableResult
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow]
}

/// A read of the rows of one key (a session by its id) that a database may run for several keys at once: `sql` reads
/// one key (`$1`), `batchSQL` every key of a text array (`$1`), and each of its rows names its key in `keyColumn`.
/// Both must select the same columns in the same order, and order the rows of one key alike.
struct KeyedRead: Sendable {
    /// Names the read in the batcher's lanes (a short name: it is hashed at every read).
    let name: String
    let sql: String
    let batchSQL: String
    let keyColumn: String

    /// `select` up to its `WHERE`, then `key = $1` (or `key = ANY($1)`), then `tail` (an `ORDER BY`).
    init(_ name: String, select: String, key: String, column: String, tail: String = "") {
        self.name = name
        sql = "\(select) WHERE \(key) = $1 \(tail)"
        batchSQL = "\(select) WHERE \(key) = ANY($1) \(tail)"
        keyColumn = column
    }
}

/// A statement and its values, run for what it writes (``SQLDatabase/transaction(running:)``).
typealias SQLWrite = (sql: String, binds: [SQLValue])

/// A database the store runs on.
protocol SQLDatabase: SQLExecutor {
    var dialect: SQLDialect { get }
    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> T) async throws -> T
    /// Runs `writes` in order in one transaction, committed when the last has run, rolled back when one fails; returns
    /// the rows each returned (a write's `RETURNING`), in order. By default ``transaction(_:)`` with a statement each;
    /// SQLite sends them to its connection's thread at once (``SQLiteDatabase``).
    @discardableResult
    func transaction(running writes: [SQLWrite]) async throws -> [[SQLRow]]
    /// The rows `read` finds for `key`. PostgreSQL runs the reads that wait at the same time as one statement
    /// (``ReadBatcher``); elsewhere this is `query(read.sql, key)`.
    func rows(of read: KeyedRead, key: String) async throws -> [SQLRow]
    /// Cheap round trip for readiness checks.
    func ping() async throws
    func close() async throws
    /// Whether the last real write failed for lack of space (nil: not tracked).
    var writeHealth: WriteHealth? { get }
    /// Bytes free on the filesystem that holds the database, where the process can see it (an SQLite file); else nil.
    func freeSpace() -> Int64?
}

extension SQLExecutor {
    @discardableResult
    func query(_ sql: String, _ binds: SQLValue...) async throws -> [SQLRow] {
        try await query(sql, binds)
    }
}

extension SQLValue {
    init(_ date: Date) { self = .int(date.millisecondsSince1970) }
    init(_ date: Date?) { self = date.map { .int($0.millisecondsSince1970) } ?? .null }
    init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    init(_ flag: Bool) { self = .int(flag ? 1 : 0) }
    init(_ bytes: [UInt8]?) { self = bytes.map { .blob($0) } ?? .null }
}

extension SQLDatabase {
    func rows(of read: KeyedRead, key: String) async throws -> [SQLRow] {
        try await query(read.sql, [.text(key)])
    }
    @discardableResult
    func transaction(running writes: [SQLWrite]) async throws -> [[SQLRow]] {
        try await transaction { tx in
            var returned: [[SQLRow]] = []
            for write in writes { returned.append(try await tx.query(write.sql, write.binds)) }
            return returned
        }
    }
    var writeHealth: WriteHealth? { nil }
    func freeSpace() -> Int64? { nil }
    /// Runs the writes `collect` makes, all or none. Each is an `INSERT`, `UPDATE` or `DELETE` with `$1…$n` of its own
    /// whose rows nothing reads (`collect` gets no rows back) and which need not see each other's effects. On
    /// PostgreSQL they go as one statement, each but the last a data-modifying `WITH` clause: one round trip instead
    /// of a `BEGIN`, one per write and a `COMMIT`, with the same atomicity (a statement applies wholly or not at all,
    /// and foreign keys are checked at its end, so a row may refer to one inserted beside it). On SQLite, whose
    /// statements cost no round trip, they run in a transaction (``transaction(running:)``).
    func writeTogether(_ collect: (any SQLExecutor) async throws -> Void) async throws {
        let collected = CollectedWrites()
        try await collect(collected)
        let writes = collected.writes
        guard writes.count > 1 else {
            if let write = writes.first { try await query(write.sql, write.binds) }
            return
        }
        switch dialect {
        case .postgres:
            var binds: [SQLValue] = []
            var clauses: [String] = []
            for write in writes {
                clauses.append(Self.shiftingPlaceholders(of: write.sql, by: binds.count))
                binds += write.binds
            }
            let last = clauses.removeLast()
            let with = clauses.enumerated().map { "w\($0.offset) AS (\($0.element))" }.joined(separator: ", ")
            try await query("WITH \(with) \(last)", binds)
        case .sqlite:
            try await transaction(running: writes)
        }
    }

    /// `sql` with each placeholder `$n` written as `$(n + offset)`. Gatehouse's statements carry no `$` in literals.
    static func shiftingPlaceholders(of sql: String, by offset: Int) -> String {
        guard offset > 0 else { return sql }
        var out = ""
        /// The digits after a `$` so far (nil when the last character was not one of them, nor the `$`).
        var digits: String?
        func flush() {
            if let digits, let n = Int(digits) { out += String(n + offset) } else if let digits { out += digits }
            digits = nil
        }
        for character in sql {
            if digits != nil, character.isASCII, character.isNumber {
                digits!.append(character)
                continue
            }
            flush()
            out.append(character)
            if character == "$" { digits = "" }
        }
        flush()
        return out
    }
}

/// Writes recorded for ``SQLDatabase/writeTogether(_:)`` instead of run.
private final class CollectedWrites: SQLExecutor, @unchecked Sendable {
    /// Only ``SQLDatabase/writeTogether(_:)``'s `collect` appends, one write at a time (it awaits each).
    private(set) var writes: [SQLWrite] = []

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        writes.append((sql, binds))
        return []
    }
}

/// What is known of each statement text Gatehouse runs (``PostgresDatabase/isRead(_:)``'s answer), remembered so that
/// a statement is scanned once, not at every run. Gatehouse's statements are a fixed set plus batches whose text
/// depends on their size; past ``limit`` texts a new one is scanned each time instead of kept.
enum StatementFacts {
    static let limit = 2048
    private static let reads = Mutex<[ExactText: Bool]>([:])

    static func isRead(_ sql: String, scanning scan: (String) -> Bool) -> Bool {
        let key = ExactText(sql)
        if let known = reads.withLock({ $0[key] }) { return known }
        let answer = scan(sql)
        reads.withLock { table in
            if table.count < limit { table[key] = answer }
        }
        return answer
    }
}
