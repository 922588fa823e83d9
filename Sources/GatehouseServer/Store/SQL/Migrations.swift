import Foundation
import GatehouseDomain

/// Versioned schema migrations. Each runs once, in its own transaction, recorded in `schema_migrations`;
/// running them again does nothing. Add new ones at the end; never edit one that has shipped.
struct Migration: Sendable {
    var version: Int
    var name: String
    var statements: [String]
}

enum Migrations {
    static func all(for dialect: SQLDialect) -> [Migration] {
        switch dialect {
        case .sqlite: sqlite
        case .postgres: sqlite.map { migration in
            var migration = migration
            migration.statements = migration.statements.map(postgres)
            return migration
        }
        }
    }

    /// The schema is written once, in SQLite's types; PostgreSQL differs only in their names (and in how a column counts
    /// itself up: `INTEGER PRIMARY KEY AUTOINCREMENT` is `BIGSERIAL PRIMARY KEY` there), and has no `WITHOUT ROWID`
    /// (its tables are heaps beside their primary key's index either way).
    static func postgres(_ statement: String) -> String {
        statement.replacing(/\bINTEGER\b/, with: "BIGINT").replacing(/\bBLOB\b/, with: "BYTEA")
            .replacing("BIGINT PRIMARY KEY AUTOINCREMENT", with: "BIGSERIAL PRIMARY KEY")
            .replacing(/\)\s*WITHOUT ROWID/, with: ")")
    }

    /// Serializes migrations across instances that start together (PostgreSQL; SQLite has one writer anyway).
    static let advisoryLockKey: Int64 = 0x6761_7465  // "gate"

    /// Timestamps are INTEGER milliseconds since 1970; ids are 24-hex TEXT; secrets are stored only as SHA-256 BLOBs.
    static let sqlite: [Migration] = [
        Migration(
            version: 1,
            name: "accounts, sessions, one-time tokens, outbox, signing keys",
            statements: [
                """
                CREATE TABLE signing_keys (
                    kid TEXT PRIMARY KEY,
                    algorithm TEXT NOT NULL,
                    private_key BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    retired_at INTEGER
                )
                """,
                """
                CREATE TABLE users (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    disabled INTEGER NOT NULL DEFAULT 0,
                    custom_data TEXT NOT NULL DEFAULT '{}'
                )
                """,
                "CREATE INDEX users_app ON users(app_id)",
                """
                CREATE TABLE identities (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    app_id TEXT NOT NULL,
                    provider_type TEXT NOT NULL,
                    external_id TEXT NOT NULL,
                    data TEXT NOT NULL DEFAULT '{}',
                    created_at INTEGER NOT NULL,
                    UNIQUE (app_id, provider_type, external_id)
                )
                """,
                "CREATE INDEX identities_user ON identities(user_id)",
                """
                CREATE TABLE email_accounts (
                    app_id TEXT NOT NULL,
                    email TEXT NOT NULL,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    password_hash TEXT NOT NULL,
                    confirmed_at INTEGER,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, email)
                )
                """,
                "CREATE INDEX email_accounts_user ON email_accounts(user_id)",
                """
                CREATE TABLE one_time_tokens (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    -- Deferred, so that the rolled-back dry run for an unknown address can run the same INSERT.
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
                    secret_hash BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    used_at INTEGER,
                    superseded_at INTEGER
                )
                """,
                "CREATE INDEX one_time_tokens_user ON one_time_tokens(user_id, kind)",
                """
                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    device_id TEXT NOT NULL,
                    device TEXT NOT NULL DEFAULT '{}',
                    secret_hash BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    revoked_at INTEGER
                )
                """,
                "CREATE INDEX sessions_user ON sessions(user_id)",
                """
                CREATE TABLE outbox (
                    id TEXT PRIMARY KEY,
                    seq INTEGER NOT NULL,
                    app_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    recipient TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    text_body TEXT NOT NULL,
                    html_body TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    status TEXT NOT NULL DEFAULT 'pending',
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at INTEGER NOT NULL,
                    delivered_at INTEGER,
                    last_error TEXT
                )
                """,
                "CREATE INDEX outbox_due ON outbox(status, next_attempt_at)",
                "CREATE INDEX outbox_recipient ON outbox(recipient, seq)",
            ]
        ),
        Migration(
            version: 2,
            name: "send limits",
            statements: [
                // One row per email request (known address or not), for per-address send limits.
                "CREATE TABLE send_log (app_id TEXT NOT NULL, address TEXT NOT NULL, kind TEXT NOT NULL, at INTEGER NOT NULL)",
                "CREATE INDEX send_log_key ON send_log(app_id, address, kind, at)",
            ]
        ),
        Migration(
            version: 3,
            name: "outbox claims",
            statements: [
                // Set while one sender (instance) delivers a message, so that no other sends it too.
                "ALTER TABLE outbox ADD COLUMN claimed_until INTEGER"
            ]
        ),
        Migration(
            version: 4,
            name: "native auth flows, rotating refresh tokens",
            statements: [
                """
                CREATE TABLE native_flows (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    client_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    step TEXT NOT NULL,
                    username TEXT NOT NULL,
                    email TEXT NOT NULL,
                    user_id TEXT,
                    challenge_types TEXT NOT NULL,
                    token_hash BLOB NOT NULL,
                    token_expires_at INTEGER NOT NULL,
                    code_hash BLOB,
                    code_expires_at INTEGER,
                    code_sent_at INTEGER,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    verified INTEGER NOT NULL DEFAULT 0,
                    password_hash TEXT,
                    attributes TEXT NOT NULL DEFAULT '{}',
                    created_at INTEGER NOT NULL
                )
                """,
                "CREATE INDEX native_flows_expiry ON native_flows(token_expires_at)",
                // Native auth sessions: the client they were issued to, and the rotation state of their refresh
                // token (the previous secret's hash and the salt its successor was derived with).
                "ALTER TABLE sessions ADD COLUMN client_id TEXT",
                "ALTER TABLE sessions ADD COLUMN previous_secret_hash BLOB",
                "ALTER TABLE sessions ADD COLUMN rotation_salt BLOB",
                "ALTER TABLE sessions ADD COLUMN rotated_at INTEGER",
            ]
        ),
        // Version 5 is taken by another branch; each version is applied on its own, so the gap is harmless.
        Migration(
            version: 6,
            name: "api keys",
            statements: [
                // User keys (user_id set) and server keys (user_id NULL). Only the SHA-256 of the secret is kept.
                """
                CREATE TABLE api_keys (
                    id TEXT PRIMARY KEY,
                    app_id TEXT NOT NULL,
                    user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    key_hash BLOB NOT NULL,
                    disabled INTEGER NOT NULL DEFAULT 0,
                    created_at INTEGER NOT NULL,
                    UNIQUE (app_id, user_id, name)
                )
                """,
                // NULLs are distinct in UNIQUE, so server key names get a partial index of their own.
                "CREATE UNIQUE INDEX api_keys_server_name ON api_keys(app_id, name) WHERE user_id IS NULL",
                "CREATE UNIQUE INDEX api_keys_hash ON api_keys(key_hash)",
                "CREATE INDEX api_keys_user ON api_keys(user_id)",
                // The key a session was logged in with, so that disabling or deleting the key ends it.
                "ALTER TABLE sessions ADD COLUMN api_key_id TEXT",
                "CREATE INDEX sessions_api_key ON sessions(api_key_id)",
            ]
        ),
        Migration(
            version: 7,
            name: "rate limits, login backoff, session idle time, audit log",
            statements: [
                // One fixed-window counter per (app, kind of request, client address or identifier); the key holds
                // no secret and no email: identifiers are hashed.
                """
                CREATE TABLE rate_limits (
                    key TEXT PRIMARY KEY,
                    window_start INTEGER NOT NULL,
                    window_ms INTEGER NOT NULL,
                    hits INTEGER NOT NULL
                )
                """,
                "CREATE INDEX rate_limits_expiry ON rate_limits(window_start)",
                // Consecutive failed password checks per (app, hashed identifier), known accounts or not.
                """
                CREATE TABLE login_failures (
                    key TEXT PRIMARY KEY,
                    failures INTEGER NOT NULL,
                    last_attempt_at INTEGER NOT NULL
                )
                """,
                // When the session's refresh token was last used (coarsely: at most once a minute), for idle timeouts.
                "ALTER TABLE sessions ADD COLUMN last_used_at INTEGER",
                """
                CREATE TABLE audit_events (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    at INTEGER NOT NULL,
                    app_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    user_id TEXT,
                    ip TEXT,
                    user_agent TEXT,
                    detail TEXT NOT NULL DEFAULT '{}'
                )
                """,
                "CREATE INDEX audit_events_app ON audit_events(app_id, seq)",
                "CREATE INDEX audit_events_user ON audit_events(user_id, seq)",
            ]
        ),
        Migration(
            version: 8,
            name: "spent refresh secrets, proven mailboxes",
            statements: [
                // When the owner of the address first proved they read it; accounts confirmed before this column
                // existed are taken as proven (most were confirmed by a link; those an app confirmed automatically
                // cannot be told apart now).
                "ALTER TABLE email_accounts ADD COLUMN mailbox_proven_at INTEGER",
                "UPDATE email_accounts SET mailbox_proven_at = confirmed_at",
                // The address a confirmation or reset token was made for: it proves that mailbox, not the user's others.
                "ALTER TABLE one_time_tokens ADD COLUMN email TEXT",
                // Every refresh secret a rotation replaced, for the life of its session: presenting one outside the
                // reuse window ends the session, however many rotations ago it was spent.
                """
                CREATE TABLE spent_refresh_secrets (
                    secret_hash BLOB PRIMARY KEY,
                    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                    spent_at INTEGER NOT NULL
                )
                """,
                "CREATE INDEX spent_refresh_secrets_session ON spent_refresh_secrets(session_id)",
            ]
        ),
        Migration(
            version: 9,
            name: "login failures per account and address, retention indexes",
            statements: [
                // Login failures are counted per account and client address now, each row knowing its account (so a
                // proof of the mailbox clears them all). The old per-username runs are dropped: they only restart.
                "DELETE FROM login_failures",
                "ALTER TABLE login_failures ADD COLUMN account TEXT NOT NULL DEFAULT ''",
                "CREATE INDEX login_failures_account ON login_failures(account)",
                // What the retention service deletes by age, in small batches.
                "CREATE INDEX login_failures_age ON login_failures(last_attempt_at)",
                "CREATE INDEX one_time_tokens_expiry ON one_time_tokens(expires_at)",
                "CREATE INDEX sessions_expiry ON sessions(expires_at)",
                "CREATE INDEX sessions_revoked ON sessions(revoked_at)",
                "CREATE INDEX send_log_age ON send_log(at)",
                "CREATE INDEX outbox_age ON outbox(created_at)",
                "CREATE INDEX audit_events_age ON audit_events(at)",
            ]
        ),
        Migration(
            version: 10,
            name: "readiness probe",
            statements: [
                // `/readyz` writes a row that needs new pages and deletes it in one committed transaction: the database
                // is writable, not just reachable. The table is empty between probes.
                "CREATE TABLE readiness_probe (id TEXT PRIMARY KEY, pad BLOB NOT NULL)"
            ]
        ),
        Migration(
            version: 11,
            name: "send counts and tokens per requester, contested registrations, registered addresses, accounts from an old system",
            statements: [
                // The send limit counts per recipient and asking client, so that others asking cannot use up the
                // owner's own allowance. Rows from before count as one requester's (the empty key).
                "ALTER TABLE send_log ADD COLUMN requester TEXT NOT NULL DEFAULT ''",
                // Who asked for a confirmation or reset token: a newer one supersedes only the same client's older
                // ones, so that others asking cannot void the owner's link.
                "ALTER TABLE one_time_tokens ADD COLUMN requester TEXT NOT NULL DEFAULT ''",
                // When a second registration named a pending address: its confirmation then proves the mailbox but
                // confirms no password (the owner chooses one).
                "ALTER TABLE email_accounts ADD COLUMN contested_at INTEGER",
                // 1 for an account a lazy migration or an import brought from another system: only such an account
                // may have its missing password vouched for by the migrate-user function.
                "ALTER TABLE email_accounts ADD COLUMN from_old_system INTEGER NOT NULL DEFAULT 0",
                // Accounts an import brought (their identity names its source) or a lazy migration made (its audit
                // row, while retention keeps it) before the column existed.
                """
                UPDATE email_accounts SET from_old_system = 1 WHERE user_id IN (
                    SELECT user_id FROM identities WHERE provider_type = 'local-userpass' AND data LIKE '%"imported_from":%'
                    UNION SELECT user_id FROM audit_events WHERE kind = 'user_migrated' AND user_id IS NOT NULL)
                """,
                // The address as its registration spelled it: where mail about the account goes.
                "ALTER TABLE email_accounts ADD COLUMN address TEXT",
            ]
        ),
        Migration(
            version: 12,
            name: "sessions know how they were proven",
            statements: [
                // How a session began (first-party, api-key, anonymous), the RFC 8176 methods that proved it (space
                // separated; unknown for sessions from before), and when (its auth_time).
                "ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'first-party'",
                "UPDATE sessions SET kind = 'api-key' WHERE api_key_id IS NOT NULL",
                """
                UPDATE sessions SET kind = 'anonymous' WHERE api_key_id IS NULL AND user_id IN (
                    SELECT user_id FROM identities WHERE provider_type = 'anon-user')
                """,
                "ALTER TABLE sessions ADD COLUMN methods TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE sessions ADD COLUMN proven_at INTEGER",
            ]
        ),
        Migration(
            version: 13,
            name: "codes for signed-in users: reauthentication and email change",
            statements: [
                // Wrong guesses of a code (a reauthentication or email-change code lives with the link tokens).
                "ALTER TABLE one_time_tokens ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0",
                // The address as the user spelled it (an email change's new or old address).
                "ALTER TABLE one_time_tokens ADD COLUMN address TEXT",
                // What the token acts on beyond its user (an email change's undo: the identity whose address changed).
                "ALTER TABLE one_time_tokens ADD COLUMN subject TEXT",
            ]
        ),
        Migration(
            version: 14,
            name: "credentials know who added them",
            statements: [
                // The signed-in session that added an identity (a link, an API key's) and what it had proven then
                // (RFC 8176 values, space separated); NULL for one that came with the account.
                "ALTER TABLE identities ADD COLUMN added_session TEXT",
                "ALTER TABLE identities ADD COLUMN added_methods TEXT",
                // When a change or a reset last set the password, and the session that changed it.
                "ALTER TABLE email_accounts ADD COLUMN password_set_at INTEGER",
                "ALTER TABLE email_accounts ADD COLUMN password_session TEXT",
                "ALTER TABLE email_accounts ADD COLUMN password_methods TEXT",
            ]
        ),
        Migration(
            version: 15,
            name: "fewer index writes per login",
            statements: [
                // Few sessions are revoked before they expire or were made by an API key, and no query looks for a
                // NULL in either column: the indexes keep only the rows that have a value, so a new session writes
                // neither (a password login on SQLite wrote 19 WAL pages, 17 without them).
                "DROP INDEX sessions_api_key",
                "CREATE INDEX sessions_api_key ON sessions(api_key_id) WHERE api_key_id IS NOT NULL",
                "DROP INDEX sessions_revoked",
                "CREATE INDEX sessions_revoked ON sessions(revoked_at) WHERE revoked_at IS NOT NULL",
                // Every password login writes its attempt's row here before its hash and deletes it with its session:
                // on SQLite the table is its key's b-tree (WITHOUT ROWID), not a table and a second b-tree for the
                // key (15 WAL pages per login).
                """
                CREATE TABLE login_failures_keyed (
                    key TEXT PRIMARY KEY,
                    failures INTEGER NOT NULL,
                    last_attempt_at INTEGER NOT NULL,
                    account TEXT NOT NULL DEFAULT ''
                ) WITHOUT ROWID
                """,
                """
                INSERT INTO login_failures_keyed (key, failures, last_attempt_at, account)
                    SELECT key, failures, last_attempt_at, account FROM login_failures
                """,
                "DROP TABLE login_failures",
                "ALTER TABLE login_failures_keyed RENAME TO login_failures",
                "CREATE INDEX login_failures_account ON login_failures(account)",
                "CREATE INDEX login_failures_age ON login_failures(last_attempt_at)",
            ]
        ),
        Migration(
            version: 16,
            name: "sessions end for logins in flight too",
            statements: [
                // Counts the times every session of the user was ended (a reset, a password change, a first proof of
                // the mailbox, an undo, disabling, log out everywhere). A login reads it with the credential it
                // proves, and its session is written only while it is unchanged (SQLStore.insertIssuedSession).
                "ALTER TABLE users ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 0",
            ]
        ),
        Migration(
            version: 17,
            name: "native flows end with their user's sessions",
            statements: [
                // The user's session_epoch a native flow holds to, pinned when the flow fixes its user; every later
                // step requires it unchanged (SQLStore.advanceFlow). Flows under way keep working: pinned to now.
                "ALTER TABLE native_flows ADD COLUMN user_epoch INTEGER",
                "UPDATE native_flows SET user_epoch = (SELECT session_epoch FROM users WHERE users.id = native_flows.user_id) WHERE user_id IS NOT NULL",
            ]
        ),
        Migration(
            version: 18,
            name: "addresses the old system handed over",
            statements: [
                // Every address a lazy migration or an import made an account of: the migrate-user function is not
                // asked about it again once its account moved away, was deleted or got a password
                // (EmailPasswordService.askToMigrate). Kept when the account goes.
                """
                CREATE TABLE migrated_addresses (
                    app_id TEXT NOT NULL,
                    email TEXT NOT NULL,
                    migrated_at INTEGER NOT NULL,
                    PRIMARY KEY (app_id, email)
                )
                """,
                "INSERT INTO migrated_addresses (app_id, email, migrated_at) SELECT app_id, email, created_at FROM email_accounts WHERE from_old_system = 1",
            ]
        ),
    ]
}

/// Applies pending migrations.
struct Migrator {
    let db: any SQLDatabase
    /// The last version to apply (tests of an upgrade stop before the migration they test); all when nil.
    var through: Int? = nil

    /// Applies every migration newer than the recorded version, each in its own transaction.
    /// - Returns: the versions applied now (empty when the schema was current).
    @discardableResult
    func migrate() async throws -> [Int] {
        // A migration may take as long as it needs (an index on a large table): no statement deadline.
        try await PostgresDatabase.$unbounded.withValue(true) { try await apply() }
    }

    private func apply() async throws -> [Int] {
        let dialect = db.dialect
        @Sendable func lock(_ tx: any SQLExecutor) async throws {
            if dialect == .postgres {
                try await tx.query("SELECT pg_advisory_xact_lock($1)", .int(Migrations.advisoryLockKey))
            }
        }
        try await db.transaction { tx in
            try await lock(tx)
            try await tx.query(
                Self.statement(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
                    dialect
                ),
                []
            )
        }
        var applied: [Int] = []
        for migration in Migrations.all(for: dialect) where through.map({ migration.version <= $0 }) ?? true {
            let done = try await db.transaction { tx in
                try await lock(tx)
                let rows = try await tx.query("SELECT version FROM schema_migrations WHERE version = $1", .int(Int64(migration.version)))
                if !rows.isEmpty { return false }
                for statement in migration.statements { try await tx.query(statement, []) }
                try await tx.query(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    .int(Int64(migration.version)), .text(migration.name), SQLValue(Date())
                )
                return true
            }
            if done { applied.append(migration.version) }
        }
        return applied
    }

    private static func statement(_ sql: String, _ dialect: SQLDialect) -> String {
        dialect == .postgres ? Migrations.postgres(sql) : sql
    }
}
