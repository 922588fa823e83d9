import Foundation
import GatehouseDomain
import GatehouseWire

/// Rate limit counters, login failure runs and the audit log.
extension SQLStore {
    // MARK: Rate limits

    func hitRateLimits(_ counters: [RateCounter], now: Date) async throws -> [String: RateCount] {
        guard !counters.isEmpty else { return [:] }
        // One multi-row upsert: a counter whose window had ended by the row's start restarts there with these
        // hits; otherwise it counts up. Both SQLite and PostgreSQL evaluate every SET expression against the row as
        // it was.
        var binds: [SQLValue] = []
        var rows: [String] = []
        for counter in counters {
            binds.append(.text(counter.key))
            binds.append(SQLValue(counter.windowStart ?? now))
            binds.append(.int(Int64(counter.window) * 1000))
            binds.append(.int(Int64(counter.hits)))
            let n = binds.count
            rows.append("($\(n - 3), $\(n - 2), $\(n - 1), $\(n))")
        }
        let expired = "rate_limits.window_start + rate_limits.window_ms <= excluded.window_start"
        let result = try await db.query(
            """
            INSERT INTO rate_limits (key, window_start, window_ms, hits) VALUES \(rows.joined(separator: ", "))
            ON CONFLICT (key) DO UPDATE SET
                hits = CASE WHEN \(expired) THEN excluded.hits ELSE rate_limits.hits + excluded.hits END,
                window_start = CASE WHEN \(expired) THEN excluded.window_start ELSE rate_limits.window_start END,
                window_ms = excluded.window_ms
            RETURNING key, hits, window_start
            """,
            binds
        )
        var counts: [String: RateCount] = [:]
        for row in result {
            counts[try row.text("key")] = RateCount(hits: Int(try row.int("hits")), windowStart: try row.date("window_start"))
        }
        return counts
    }

    // MARK: Login backoff

    func loginFailures(key: String) async throws -> LoginFailureRecord? {
        try await db.query("SELECT failures, last_attempt_at FROM login_failures WHERE key = $1", .text(key)).first.map { row in
            LoginFailureRecord(failures: Int(try row.int("failures")), lastAttemptAt: try row.date("last_attempt_at"))
        }
    }

    func claimLoginAttempt(key: String, account: String, seen: Int?, now: Date) async throws -> Int? {
        guard let seen else {
            return try await db.query(Self.claimFirstAttempt, .text(key), .text(account), SQLValue(now)).first.map { Int(try $0.int("failures")) }
        }
        return try await db.query(
            "UPDATE login_failures SET failures = $2 + 1, last_attempt_at = $3 WHERE key = $1 AND failures = $2 RETURNING failures",
            .text(key), .int(Int64(seen)), SQLValue(now)
        ).first.map { Int(try $0.int("failures")) }
    }

    func recordLoginFailure(key: String, account: String, now: Date) async throws -> Int {
        let rows = try await db.query(
            """
            INSERT INTO login_failures (key, account, failures, last_attempt_at) VALUES ($1, $2, 1, $3)
            ON CONFLICT (key) DO UPDATE SET failures = login_failures.failures + 1, last_attempt_at = excluded.last_attempt_at
            RETURNING failures
            """,
            .text(key), .text(account), SQLValue(now)
        )
        return Int(try rows.first?.int("failures") ?? 1)
    }

    func claimLoginAttempt(key: String, account: String, now: Date, readingAccountOf appId: String, email: String) async throws
        -> (claimed: Int?, account: (account: EmailAccountRecord, user: UserRecord?)?)
    {
        let claim = (sql: Self.claimFirstAttempt, binds: [SQLValue.text(key), .text(account), SQLValue(now)])
        switch db.dialect {
        case .postgres:
            // One row whatever the two find: the claim's count (null when another attempt was counted first) beside
            // ``emailAccountWithUserQuery``'s row (nulls for an unknown address), whose placeholders come first.
            let row = try await db.query(
                """
                WITH claim AS (\(type(of: db).shiftingPlaceholders(of: claim.sql, by: 2)))
                SELECT (SELECT failures FROM claim) AS claimed, found.*
                FROM (SELECT 1) AS one LEFT JOIN (\(Self.emailAccountWithUserQuery)) AS found ON true
                """,
                [.text(appId), .text(email)] + claim.binds
            ).first
            guard let row else { throw SQLRowError(column: "claimed", expected: "one row") }
            return (try row.optionalInt("claimed").map(Int.init), try Self.accountWithUser(row))
        case .sqlite:
            // Statements in process cost no round trip.
            let claimed = try await db.query(claim.sql, claim.binds).first.map { Int(try $0.int("failures")) }
            return (claimed, try await emailAccountWithUser(appId: appId, email: email))
        }
    }

    /// Counts the first attempt of a key with no run: ``claimLoginAttempt(key:account:seen:now:)`` with `seen` nil.
    private static let claimFirstAttempt =
        "INSERT INTO login_failures (key, account, failures, last_attempt_at) VALUES ($1, $2, 1, $3) ON CONFLICT (key) DO NOTHING RETURNING failures"

    func clearLoginFailures(keys: [String]) async throws {
        try await Self.clearLoginFailures(keys: keys, db)
    }

    /// Ends the runs of `keys` (nothing for none).
    static func clearLoginFailures(keys: [String], _ db: any SQLExecutor) async throws {
        guard !keys.isEmpty else { return }
        try await db.query("DELETE FROM login_failures WHERE key IN (\(placeholders(keys.count)))", keys.map { SQLValue.text($0) })
    }

    func returnLoginAttempt(keys: [String]) async throws {
        guard !keys.isEmpty else { return }
        let list = Self.placeholders(keys.count)
        let binds = keys.map { SQLValue.text($0) }
        // A run of one goes (the next attempt is then counted as a first, without a read); a longer one loses one. The
        // two match disjoint rows of the same snapshot, so no run loses two, and they are written together.
        try await db.writeTogether { db in
            try await db.query("DELETE FROM login_failures WHERE key IN (\(list)) AND failures <= 1", binds)
            try await db.query("UPDATE login_failures SET failures = failures - 1 WHERE key IN (\(list)) AND failures > 1", binds)
        }
    }

    /// `$1, …, $count`: the values of an `IN` list.
    private static func placeholders(_ count: Int) -> String {
        (1...count).map { "$\($0)" }.joined(separator: ", ")
    }

    func clearLoginFailures(account: String) async throws {
        try await db.query("DELETE FROM login_failures WHERE account = $1", .text(account))
    }

    // MARK: Audit log

    func appendAuditEvents(_ events: [AuditEvent]) async throws {
        try await Self.insertAuditEvents(events, db)
    }

    /// One multi-row INSERT of `events`; nothing for none.
    static func insertAuditEvents(_ events: [AuditEvent], _ db: any SQLExecutor) async throws {
        guard !events.isEmpty else { return }
        var binds: [SQLValue] = []
        binds.reserveCapacity(events.count * 7)
        let rows = try events.map { "(" + (try auditValues($0, binds: &binds)) + ")" }
        try await db.query("INSERT INTO audit_events (\(auditColumns)) VALUES \(rows.joined(separator: ", "))", binds)
    }

    static let auditColumns = "at, app_id, kind, user_id, ip, user_agent, detail"

    /// The placeholders of `event`'s values in ``auditColumns``' order, its values appended to `binds`.
    static func auditValues(_ event: AuditEvent, binds: inout [SQLValue]) throws -> String {
        let first = binds.count + 1
        binds += [
            SQLValue(event.at), .text(event.appId), .text(event.kind), SQLValue(event.userId), SQLValue(event.ip),
            SQLValue(event.userAgent), .text(try JSONColumn.encode(event.detail.mapValues { .string($0) })),
        ]
        return (first..<first + 7).map { "$\($0)" }.joined(separator: ", ")
    }

    func auditEvents(appId: String?, userId: String?, afterSeq: Int64?, limit: Int) async throws -> [AuditEvent] {
        var conditions: [String] = []
        var binds: [SQLValue] = []
        if let appId {
            binds.append(.text(appId))
            conditions.append("app_id = $\(binds.count)")
        }
        if let userId {
            binds.append(.text(userId))
            conditions.append("user_id = $\(binds.count)")
        }
        if let afterSeq {
            binds.append(.int(afterSeq))
            conditions.append("seq > $\(binds.count)")
        }
        binds.append(.int(Int64(limit)))
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let rows = try await db.query(
            "SELECT seq, at, app_id, kind, user_id, ip, user_agent, detail FROM audit_events \(filter) ORDER BY seq DESC LIMIT $\(binds.count)",
            binds
        )
        return try rows.reversed().map { row in
            AuditEvent(
                seq: try row.int("seq"), at: try row.date("at"), appId: try row.text("app_id"), kind: try row.text("kind"),
                userId: try row.optionalText("user_id"), ip: try row.optionalText("ip"), userAgent: try row.optionalText("user_agent"),
                detail: try JSONColumn.decode(row.text("detail")).compactMapValues { if case .string(let s) = $0 { s } else { nil } }
            )
        }
    }
}

/// The retention service's deletes.
extension SQLStore {
    func purge(_ target: RetentionTarget, before cutoff: Date, limit: Int) async throws -> Int {
        // Each DELETE picks at most `limit` rows by an indexed age and deletes them by key, in one statement: a
        // short lock, and a concurrent run on another instance finds fewer rows, never the same work twice.
        let (key, condition): (String, String) =
            switch target {
            case .expiredFlows: ("id", "token_expires_at < $1")
            case .expiredTokens: ("id", "expires_at < $1")
            case .endedSessions: ("id", "revoked_at < $1 OR expires_at < $1")
            // send_log has no key of its own: the row's physical id.
            case .sendLog: (db.dialect == .postgres ? "ctid" : "rowid", "at < $1")
            case .loginFailures: ("key", "last_attempt_at < $1")
            case .rateLimits: ("key", "window_start + window_ms < $1")
            // Failed mail stays until an operator retries it (gatehouse mail failed / retry).
            case .sentMail: ("id", "status = 'delivered' AND created_at < $1")
            case .auditEvents: ("seq", "at < $1")
            }
        let table = target.rawValue
        let rows = try await db.query(
            "DELETE FROM \(table) WHERE \(key) IN (SELECT \(key) FROM \(table) WHERE \(condition) \(Self.limit(limit))) RETURNING 1 AS one",
            SQLValue(cutoff)
        )
        return rows.count
    }

    /// Rows per table that the retention service keeps in check (for `gatehouse purge` and the tests).
    func retainedTableSizes() async throws -> [RetentionTarget: Int] {
        var sizes: [RetentionTarget: Int] = [:]
        for target in RetentionTarget.allCases {
            sizes[target] = Int(try await db.query("SELECT COUNT(*) AS n FROM \(target.rawValue)", []).first?.int("n") ?? 0)
        }
        return sizes
    }
}
