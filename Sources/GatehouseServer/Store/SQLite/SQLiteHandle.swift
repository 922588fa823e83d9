import Synchronization
import VaporCSQLite

/// One `sqlite3` connection and the statements prepared on it, each prepared once and kept.
///
/// The C library is the SQLite that sqlite-nio builds (`VaporCSQLite`: its amalgamation, thread-safe, secure delete,
/// with its symbols prefixed `sqlite_nio_`), called directly: sqlite-nio itself prepares every statement afresh and
/// moves each one to a thread pool and back through an event loop, which was most of what a statement cost
/// (`Benchmarks/PROFILING.md`).
///
/// Not thread-safe: ``SQLiteDatabase`` calls it on its one thread only, one call at a time (hence
/// `@unchecked Sendable`).
final class SQLiteHandle: @unchecked Sendable {
    private var db: OpaquePointer?
    /// Prepared statements by their SQL as Gatehouse writes it (`$1` placeholders): Gatehouse's statements other than
    /// batches (not kept) are a fixed set of a few hundred, so the table stays small; past ``statementLimit`` one
    /// entry makes room for the next.
    private var statements: [ExactText: Statement] = [:]
    static let statementLimit = 512
    /// Statements with more placeholders than this are batches, prepared for each use and not kept.
    static let keptPlaceholderLimit: Int32 = 32
    /// How long a statement waits for another connection's lock (`sqlite3_busy_timeout`), in milliseconds.
    private let busyTimeoutMilliseconds: Int32
    /// The WAL's size in pages after the last commit, as SQLite reports it (``keepCheckpoints()``).
    private let walPages = WALPages()

    private final class WALPages: Sendable {
        let count = Atomic<Int>(0)
    }

    /// SQLite's own threshold for an automatic checkpoint (`wal_autocheckpoint`'s default), in WAL pages.
    static let checkpointPages = 1000

    private struct Statement {
        let pointer: OpaquePointer
        var columns: SQLColumns
        /// How often SQLite has prepared it again (a schema change): its columns are read again when this moves.
        var reprepared: Int32
    }

    /// Opens (creating if needed) the database at `path`, or a private in-memory one for `":memory:"`. A statement that
    /// finds the database locked by another connection retries for up to `busyTimeout`, then fails with `SQLITE_BUSY`.
    init(path: String, busyTimeout: Duration, readOnly: Bool = false) throws {
        var db: OpaquePointer?
        let flags = readOnly ? SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite_nio_sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let failure = SQLiteFailure(code: status, message: db.map(Self.message) ?? "out of memory")
            sqlite_nio_sqlite3_close_v2(db)
            throw failure
        }
        self.db = db
        sqlite_nio_sqlite3_extended_result_codes(db, 1)
        let (seconds, attoseconds) = busyTimeout.components
        busyTimeoutMilliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        sqlite_nio_sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    }

    /// Runs `body` with statements that find another connection's lock failing at once (`SQLITE_BUSY`) instead of
    /// waiting up to the busy timeout: for a write run on a thread that must not block for long.
    func withoutWaitingForLocks<T>(_ body: () throws -> T) rethrows -> T {
        guard let db else { return try body() }
        sqlite_nio_sqlite3_busy_timeout(db, 0)
        defer { sqlite_nio_sqlite3_busy_timeout(db, busyTimeoutMilliseconds) }
        return try body()
    }

    /// Takes the WAL's checkpoints out of the commits: SQLite runs an automatic checkpoint (which copies the WAL into
    /// the database file and waits for the disk twice) inside the commit that takes the WAL past
    /// ``checkpointPages``, on whatever thread committed. With this, a commit only notes the WAL's size, and the
    /// owner runs ``checkpointIfDue()`` where waiting for the disk does no harm (``SQLiteDatabase``: the
    /// connection's own thread). Registering the hook is what turns the automatic checkpoints off.
    func keepCheckpoints() {
        guard let db else { return }
        let context = Unmanaged.passUnretained(walPages).toOpaque()
        _ = sqlite_nio_sqlite3_wal_hook(db, { context, _, _, pages in
            // The handle holds the box for as long as the connection is open (and closes it before letting go).
            guard let context else { return SQLITE_OK }
            Unmanaged<WALPages>.fromOpaque(context).takeUnretainedValue().count.store(Int(pages), ordering: .relaxed)
            return SQLITE_OK
        }, context)
    }

    /// Whether the WAL has reached ``checkpointPages`` since the last checkpoint (``keepCheckpoints()``).
    var checkpointDue: Bool { walPages.count.load(ordering: .relaxed) >= Self.checkpointPages }

    /// Runs a passive checkpoint (as SQLite's automatic one does: it copies what no reader still needs and waits for
    /// no one) when one is due and no transaction is open on the connection; true when it ran one.
    @discardableResult
    func checkpointIfDue() -> Bool {
        guard let db, checkpointDue, sqlite_nio_sqlite3_get_autocommit(db) != 0 else { return false }
        walPages.count.store(0, ordering: .relaxed)
        var log: Int32 = 0
        var copied: Int32 = 0
        // A failure (I/O) leaves the WAL as it was; the next commit's size asks for another try.
        _ = sqlite_nio_sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
        return true
    }

    deinit {
        close()
    }

    /// Runs one statement with `$1…$n` placeholders and returns its rows. The statement is reset afterwards, whatever
    /// happened, so that it holds no lock and no read snapshot between calls.
    ///
    /// `readOnly`: run it only if it cannot write (`sqlite3_stmt_readonly`); one that could is not run and fails with
    /// ``SQLiteFailure/notReadOnly``.
    func run(_ sql: String, _ binds: [SQLValue], readOnly: Bool = false) throws -> [SQLRow] {
        guard let db else { throw SQLiteFailure.closed }
        let (statement, kept) = try prepared(sql, on: db)
        let pointer = statement.pointer
        if readOnly, sqlite_nio_sqlite3_stmt_readonly(pointer) == 0 {
            if !kept { sqlite_nio_sqlite3_finalize(pointer) }
            throw SQLiteFailure.notReadOnly
        }
        defer {
            if kept {
                sqlite_nio_sqlite3_reset(pointer)
                // The values are dropped (a token's hash does not stay in a kept statement), each replaced by NULL.
                // Not with sqlite3_clear_bindings: it marks the statement for preparing again whenever the planner
                // looked at any of its values (it weighs `$1` as a possible 0 or 1 for plans it does not choose), and
                // the session read was then parsed and planned afresh at every call. A NULL that replaces a value
                // prepares it again only if the value was a 0 or a 1 the plan depends on.
                for index in 0..<sqlite_nio_sqlite3_bind_parameter_count(pointer) { sqlite_nio_sqlite3_bind_null(pointer, index + 1) }
            } else {
                sqlite_nio_sqlite3_finalize(pointer)
            }
        }
        // A value left out would run as NULL: every placeholder gets one (and SQLite refuses one too many).
        let placeholders = Int(sqlite_nio_sqlite3_bind_parameter_count(pointer))
        guard binds.count >= placeholders else {
            throw SQLiteFailure(code: SQLITE_RANGE, message: "\(placeholders) placeholders, \(binds.count) values in: \(sql)")
        }
        for (offset, value) in binds.enumerated() {
            let status = Self.bind(value, at: Int32(offset + 1), to: pointer)
            guard status == SQLITE_OK else { throw SQLiteFailure(code: status, message: Self.message(db)) }
        }
        var rows: [SQLRow] = []
        var columns = statement.columns
        while true {
            let status = sqlite_nio_sqlite3_step(pointer)
            if status == SQLITE_DONE { return rows }
            guard status == SQLITE_ROW else { throw SQLiteFailure(code: status, message: Self.message(db)) }
            if rows.isEmpty {
                let reprepared = sqlite_nio_sqlite3_stmt_status(pointer, SQLITE_STMTSTATUS_REPREPARE, 0)
                if reprepared != statement.reprepared {
                    // The schema changed under a kept statement and SQLite prepared it again: its columns (names,
                    // number, order) may have changed too.
                    columns = Self.columnNames(pointer)
                    statements[ExactText(sql)]?.columns = columns
                    statements[ExactText(sql)]?.reprepared = reprepared
                }
            }
            var cells: [SQLValue] = []
            cells.reserveCapacity(columns.names.count)
            for index in columns.names.indices { cells.append(Self.value(pointer, Int32(index))) }
            rows.append(SQLRow(columns: columns, cells: cells))
        }
    }

    var keptStatements: Int { statements.count }

    /// How often SQLite has prepared the kept statement for `sql` again since it was first prepared; nil if it is not
    /// kept.
    func timesPreparedAgain(_ sql: String) -> Int32? {
        statements[ExactText(sql)].map { sqlite_nio_sqlite3_stmt_status($0.pointer, SQLITE_STMTSTATUS_REPREPARE, 0) }
    }

    /// The SQL, as Gatehouse wrote it, of every kept statement SQLite has prepared again since it was first prepared
    /// (tests: a statement planned afresh at each use shows here).
    var statementsPreparedAgain: [String] {
        statements.keys.map(\.text).filter { (timesPreparedAgain($0) ?? 0) > 0 }
    }

    /// Finalizes the kept statements and closes the connection; statements after it fail.
    func close() {
        for statement in statements.values { sqlite_nio_sqlite3_finalize(statement.pointer) }
        statements = [:]
        if let db { sqlite_nio_sqlite3_close_v2(db) }
        db = nil
    }

    /// The statement for `sql`, and whether it is kept: one with many placeholders is a batch whose text depends on
    /// its size (an import, a flush of rate counts), used once; it is finalized after use instead of pushing the
    /// statements every request runs out of the table.
    private func prepared(_ sql: String, on db: OpaquePointer) throws -> (Statement, kept: Bool) {
        let key = ExactText(sql)
        if let statement = statements[key] { return (statement, true) }
        var pointer: OpaquePointer?
        // The tail (what follows the first statement) points into the C string, so it is read while that lives.
        let (status, rest) = Self.translate(sql).withCString { text in
            var tail: UnsafePointer<CChar>?
            let status = sqlite_nio_sqlite3_prepare_v3(db, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &pointer, &tail)
            return (status, tail.map { String(cString: $0) } ?? "")
        }
        guard status == SQLITE_OK, let pointer else {
            sqlite_nio_sqlite3_finalize(pointer)
            throw SQLiteFailure(code: status == SQLITE_OK ? SQLITE_MISUSE : status, message: status == SQLITE_OK ? "no statement in: \(sql)" : Self.message(db))
        }
        if !rest.allSatisfy(\.isWhitespace) {
            // One statement per call: anything after it would be silently skipped.
            sqlite_nio_sqlite3_finalize(pointer)
            throw SQLiteFailure(code: SQLITE_MISUSE, message: "more than one statement in: \(sql)")
        }
        let statement = Statement(
            pointer: pointer, columns: Self.columnNames(pointer),
            reprepared: sqlite_nio_sqlite3_stmt_status(pointer, SQLITE_STMTSTATUS_REPREPARE, 0)
        )
        if sqlite_nio_sqlite3_bind_parameter_count(pointer) > Self.keptPlaceholderLimit { return (statement, false) }
        if statements.count >= Self.statementLimit, let evicted = statements.first {
            statements.removeValue(forKey: evicted.key)
            sqlite_nio_sqlite3_finalize(evicted.value.pointer)
        }
        statements[key] = statement
        return (statement, true)
    }

    private static func columnNames(_ pointer: OpaquePointer) -> SQLColumns {
        SQLColumns((0..<sqlite_nio_sqlite3_column_count(pointer)).map { index in
            sqlite_nio_sqlite3_column_name(pointer, index).map { String(cString: $0) } ?? ""
        })
    }

    private static func bind(_ value: SQLValue, at index: Int32, to pointer: OpaquePointer) -> Int32 {
        switch value {
        case .int(let i):
            return sqlite_nio_sqlite3_bind_int64(pointer, index, i)
        case .text(let text):
            // The bridged C string is the text's UTF-8, with the length given: a NUL inside stays part of the value.
            return sqlite_nio_sqlite3_bind_text64(pointer, index, text, UInt64(text.utf8.count), transient, UInt8(SQLITE_UTF8))
        case .blob(let bytes):
            // An empty buffer may have no address, which SQLite would bind as NULL.
            if bytes.isEmpty { return sqlite_nio_sqlite3_bind_zeroblob(pointer, index, 0) }
            return bytes.withUnsafeBytes { sqlite_nio_sqlite3_bind_blob64(pointer, index, $0.baseAddress, UInt64($0.count), transient) }
        case .null:
            return sqlite_nio_sqlite3_bind_null(pointer, index)
        }
    }

    private static func value(_ pointer: OpaquePointer, _ index: Int32) -> SQLValue {
        switch sqlite_nio_sqlite3_column_type(pointer, index) {
        case SQLITE_INTEGER:
            return .int(sqlite_nio_sqlite3_column_int64(pointer, index))
        case SQLITE_FLOAT:
            // Gatehouse stores no floating-point values; one written by hand reads as its integer part.
            return Int64(exactly: sqlite_nio_sqlite3_column_double(pointer, index).rounded(.towardZero)).map(SQLValue.int) ?? .null
        case SQLITE_TEXT:
            // The text first, then its length (SQLite's documented order).
            let text = sqlite_nio_sqlite3_column_text(pointer, index)
            let count = Int(sqlite_nio_sqlite3_column_bytes(pointer, index))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: text == nil ? 0 : count), as: UTF8.self))
        case SQLITE_BLOB:
            let bytes = sqlite_nio_sqlite3_column_blob(pointer, index)
            let count = Int(sqlite_nio_sqlite3_column_bytes(pointer, index))
            guard let bytes, count > 0 else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default:
            return .null
        }
    }

    private static func message(_ db: OpaquePointer) -> String {
        sqlite_nio_sqlite3_errmsg(db).map { String(cString: $0) } ?? "unknown error"
    }

    /// `$1` → `?1`: SQLite numbers `?NNN` parameters by their digits, whatever order they appear in. Works on the
    /// UTF-8 bytes (`$` and digits are ASCII); runs once per statement, when it is prepared.
    static func translate(_ sql: String) -> String {
        let utf8 = Array(sql.utf8)
        guard utf8.contains(UInt8(ascii: "$")) else { return sql }
        var out = utf8
        for i in out.indices.dropLast() where out[i] == UInt8(ascii: "$") && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(out[i + 1]) {
            out[i] = UInt8(ascii: "?")
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// SQLite's `SQLITE_TRANSIENT`: it copies the bound bytes before the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// An SQLite result code other than success, with the connection's message for it.
struct SQLiteFailure: Error, CustomStringConvertible {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_IOERR_WRITE`…); its low byte is the primary code.
    var code: Int32
    var message: String

    /// A unique or primary key refused the statement (the row exists already): the statement wrote nothing. As on
    /// PostgreSQL (23505) only these are a conflict; a foreign key, NOT NULL or CHECK failure is not "already in use".
    var isConflict: Bool { code == Self.constraintUnique || code == Self.constraintPrimaryKey }
    /// `SQLITE_CONSTRAINT_UNIQUE` and `SQLITE_CONSTRAINT_PRIMARYKEY` (macros Swift does not import).
    static let constraintUnique = SQLITE_CONSTRAINT | (8 << 8)
    static let constraintPrimaryKey = SQLITE_CONSTRAINT | (6 << 8)
    var description: String { "SQLite error \(code): \(message)" }

    /// A statement sent after ``SQLiteHandle/close()``.
    static let closed = SQLiteFailure(code: SQLITE_MISUSE, message: "the database is closed")
    /// A statement that could write, sent to be run only if it could not (``SQLiteHandle/run(_:_:readOnly:)``).
    static let notReadOnly = SQLiteFailure(code: SQLITE_READONLY, message: "the statement could write")
    /// Another connection holds a lock this one needs (`SQLITE_BUSY`, `SQLITE_LOCKED` and their extended codes).
    var isBusy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
}
