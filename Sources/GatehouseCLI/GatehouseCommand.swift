import ArgumentParser
import Foundation
import GatehouseDomain
import GatehouseServer
import Logging

/// `gatehouse`: the Gatehouse server's command line. Thin by design: it reads the configuration and hands it
/// to GatehouseServer.
@main
struct GatehouseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted authentication server for Swift apps.",
        version: AuthServer.version,
        subcommands: [Serve.self, Migrate.self, Users.self, APIKeys.self, Keys.self, Audit.self, Export.self, Import.self, Purge.self, Mail.self],
        defaultSubcommand: Serve.self
    )
}

/// Options shared by every subcommand that reads the configuration.
struct ConfigOptions: ParsableArguments {
    @Option(name: .long, help: "Configuration file (YAML or JSON). Without it: the development defaults.")
    var config: String?

    @Option(name: .long, help: "Address to listen on (overrides server.host and GATEHOUSE_HOST).")
    var host: String?

    @Option(name: .long, help: "Port to listen on (overrides server.port and GATEHOUSE_PORT).")
    var port: String?

    @Option(name: .long, help: "Database URL, e.g. sqlite:.gatehouse/gatehouse.sqlite (overrides database.url and GATEHOUSE_DATABASE_URL).")
    var database: String?

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = ProcessInfo.processInfo.environment["GATEHOUSE_LOG_LEVEL"] ?? "info"

    @Option(name: .long, help: "Log format: text, or json (one JSON object per line, for log collectors). Also GATEHOUSE_LOG_FORMAT.")
    var logFormat: String = ProcessInfo.processInfo.environment["GATEHOUSE_LOG_FORMAT"] ?? "text"

    /// The validated configuration, or a clear message on standard error and exit code 78 (EX_CONFIG).
    func load() throws -> GatehouseConfiguration {
        do {
            return try ConfigurationLoader().load(file: config, overrides: .init(host: host, port: port, database: database))
        } catch {
            FileHandle.standardError.write(Data("gatehouse: configuration error: \(error)\n".utf8))
            throw ExitCode(78)
        }
    }

    /// Opens the server, runs `body`, closes it; any error is a message on standard error and exit code 65
    /// (EX_DATAERR).
    func withServer<T>(_ body: (AuthServer) async throws -> T) async throws -> T {
        let gatehouse = try await AuthServer.open(configuration: try load(), logger: try logger())
        do {
            let result = try await body(gatehouse)
            try await gatehouse.close()
            return result
        } catch {
            try? await gatehouse.close()
            FileHandle.standardError.write(Data("gatehouse: \(error)\n".utf8))
            throw ExitCode(65)
        }
    }

    func logger() throws -> Logger {
        guard let level = Logger.Level(rawValue: logLevel.lowercased()) else {
            FileHandle.standardError.write(Data("gatehouse: configuration error: --log-level: unknown level \"\(logLevel)\"\n".utf8))
            throw ExitCode(78)
        }
        switch logFormat.lowercased() {
        case "text":
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        case "json":
            LoggingSystem.bootstrap { label in
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
        default:
            FileHandle.standardError.write(Data("gatehouse: configuration error: --log-format: \"\(logFormat)\" is neither text nor json\n".utf8))
            throw ExitCode(78)
        }
        var logger = Logger(label: "gatehouse")
        logger.logLevel = level
        return logger
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the server (applies pending migrations first).")

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let config = try options.load()
        let logger = try options.logger()
        let gatehouse: AuthServer
        do {
            // A PostgreSQL server that is down at start is waited for (with backoff), not fatal: the process listens,
            // reports not-ready on /readyz, and serves once the database answers.
            gatehouse = try await AuthServer.open(configuration: config, logger: logger, waitForDatabase: true)
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data("gatehouse: configuration error: \(error)\n".utf8))
            throw ExitCode(78)
        } catch {
            FileHandle.standardError.write(Data("gatehouse: cannot open the database \(config.database.url): \(error)\n".utf8))
            throw ExitCode(69)
        }
        if !gatehouse.isReady {
            FileHandle.standardError.write(
                Data("gatehouse: the database \(config.database.url) is unreachable; listening anyway and retrying with backoff (/readyz says when it is ready)\n".utf8)
            )
        }
        try await gatehouse.run { _ in
            let base = gatehouse.resolvedPublicURL
            var lines = ["Gatehouse is listening on \(base)"]
            for app in config.apps {
                lines.append("  app id:       \(app.id)")
                if let native = app.nativeAuth, native.enabled {
                    lines.append("  native auth:  \(base)/native/\(app.id)/ (client ids: \(native.clientIds.joined(separator: ", ")))")
                }
            }
            lines.append("  database:     \(config.database.url)")
            if config.dev.mailbox { lines.append("  dev mailbox:  \(base)/_dev/mailbox") }
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
            #if canImport(Glibc)
            StartupPages.release()
            #endif
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and exit.")

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let config = try options.load()
        let logger = try options.logger()
        let applied = try await AuthServer.migrate(configuration: config, logger: logger)
        print(applied.isEmpty ? "database is up to date" : "applied migrations \(applied.map(String.init).joined(separator: ", "))")
    }
}

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage users.", subcommands: [Credentials.self, SetData.self, LogOut.self, Disable.self, Enable.self]
    )

    /// The options every user command takes.
    struct Target: ParsableArguments {
        @OptionGroup var options: ConfigOptions
        @Option(name: .long, help: "App id.") var app: String
        @Option(name: .long, help: "User id (24 hex digits).") var user: String

        func run<T>(_ action: (AuthServer) async throws -> T) async throws -> T { try await options.withServer(action) }
    }

    struct Credentials: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a user's credentials (addresses, passwords, identities, API keys) and who added each."
        )
        @OptionGroup var target: Target

        func run() async throws {
            let credentials = try await target.run { gatehouse in try await gatehouse.credentials(appId: target.app, userId: target.user) }
            for credential in credentials {
                var line = "\(credential.kind)\t\(credential.id)\t\(credential.label)\tadded \(credential.addedAt.ISO8601Format())"
                if let session = credential.addedBySession {
                    line += " by session \(session) (\(credential.addedWith.joined(separator: " ")))"
                }
                if let proven = credential.proven { line += proven ? "\tproven" : "\tnot proven" }
                print(line)
            }
        }
    }

    struct LogOut: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "logout", abstract: "End every session of a user (log out everywhere).")
        @OptionGroup var target: Target

        func run() async throws {
            let count = try await target.run { gatehouse in try await gatehouse.logOutEverywhere(appId: target.app, userId: target.user) }
            print("ended \(count) sessions of user \(target.user)")
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable a user: every session ends, and logins are refused.")
        @OptionGroup var target: Target

        func run() async throws {
            try await target.run { gatehouse in try await gatehouse.setUserDisabled(appId: target.app, userId: target.user, disabled: true) }
            print("user \(target.user) disabled")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled user again.")
        @OptionGroup var target: Target

        func run() async throws {
            try await target.run { gatehouse in try await gatehouse.setUserDisabled(appId: target.app, userId: target.user, disabled: false) }
            print("user \(target.user) enabled")
        }
    }

    struct SetData: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-data",
            abstract: "Replace a user's custom user data (a JSON object, carried in the user_data claim of access tokens)."
        )

        @OptionGroup var target: Target
        @Argument(help: "The custom data, a JSON object, e.g. '{\"plan\":\"pro\"}'.") var json: String

        func run() async throws {
            try await target.run { gatehouse in try await gatehouse.setCustomData(appId: target.app, userId: target.user, json: json) }
            print("custom data of user \(target.user) set")
        }
    }
}

struct APIKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apikeys",
        abstract: "Manage server API keys (logins with one are refused unless the app has providers.api-key on).",
        discussion: """
            A login with a server API key logs in as a user that exists only for that key; deleting the key deletes \
            that user and ends its sessions. Gatehouse keeps only the SHA-256 of a key: `create` prints it once.
            """,
        subcommands: [Create.self, List.self, Delete.self, Enable.self, Disable.self]
    )

    /// The options every command on one key takes.
    struct KeyTarget: ParsableArguments {
        @OptionGroup var options: ConfigOptions
        @Option(name: .long, help: "App id.") var app: String
        @Option(name: .long, help: "Key id (24 hex digits).") var id: String
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a server API key and print it (the only time it is shown).")

        @OptionGroup var options: ConfigOptions
        @Option(name: .long, help: "App id.") var app: String
        @Option(name: .long, help: "Key name: 1 to 64 letters, digits, '_' or '-', unique in the app.") var name: String

        func run() async throws {
            let app = self.app, name = self.name
            try await options.withServer { gatehouse in
                let key = try await gatehouse.createServerAPIKey(appId: app, name: name)
                print("id:      \(key.id)")
                print("name:    \(key.name)")
                print("user id: \(key.userId ?? "")")
                print("key:     \(key.key ?? "")")
                var note = "gatehouse: store the key now; only its hash is kept and it cannot be shown again\n"
                if gatehouse.configuration.app(id: app)?.apiKeys == false {
                    note += "gatehouse: note: app \(app) has providers.api-key off; logins with the key are refused until it is on\n"
                }
                FileHandle.standardError.write(Data(note.utf8))
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List an app's server API keys: id, state, created, name.")

        @OptionGroup var options: ConfigOptions
        @Option(name: .long, help: "App id.") var app: String

        func run() async throws {
            let app = self.app
            try await options.withServer { gatehouse in
                let formatter = ISO8601DateFormatter()
                for key in try await gatehouse.serverAPIKeys(appId: app) {
                    print("\(key.id)  \(key.disabled ? "disabled" : "enabled ")  \(formatter.string(from: key.createdAt))  \(key.name)")
                }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a server API key, its user and that user's sessions.")

        @OptionGroup var key: KeyTarget

        func run() async throws {
            try await key.options.withServer { gatehouse in
                try await gatehouse.deleteServerAPIKey(appId: key.app, id: key.id)
                print("server API key \(key.id) deleted")
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled server API key.")

        @OptionGroup var key: KeyTarget

        func run() async throws {
            try await key.options.withServer { gatehouse in
                try await gatehouse.setServerAPIKeyDisabled(appId: key.app, id: key.id, disabled: false)
                print("server API key \(key.id) enabled")
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable a server API key and end the sessions logged in with it.")

        @OptionGroup var key: KeyTarget

        func run() async throws {
            try await key.options.withServer { gatehouse in
                try await gatehouse.setServerAPIKeyDisabled(appId: key.app, id: key.id, disabled: true)
                print("server API key \(key.id) disabled")
            }
        }
    }
}

struct Mail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Emails the outbox gave up on: list them, send them again.", subcommands: [Failed.self, Retry.self]
    )

    struct Failed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List emails kept as failed (refused by the mail server, or retried for a day): id, time, app, kind, recipient, attempts, last error."
        )
        @OptionGroup var options: ConfigOptions
        @Option(name: .long, help: "Only this app's.") var app: String?
        @Option(name: [.customShort("n"), .long], help: "How many (1–10000).") var lines = 100

        func validate() throws {
            guard (1...10_000).contains(lines) else { throw ValidationError("--lines must be 1…10000") }
        }

        func run() async throws {
            let mails = try await options.withServer { try await $0.failedMail(appId: app, limit: lines) }
            let formatter = ISO8601DateFormatter()
            for mail in mails {
                print([
                    mail.id, formatter.string(from: mail.createdAt), mail.appId, mail.kind, mail.recipient, "attempts=\(mail.attempts)",
                    "error=\"\(mail.lastError ?? "")\"",
                ].joined(separator: "  "))
            }
            if mails.isEmpty { FileHandle.standardError.write(Data("no failed emails\n".utf8)) }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send failed emails again, now, with a fresh day of retries: the ids given, or --all."
        )
        @OptionGroup var options: ConfigOptions
        @Argument(help: "Ids from `gatehouse mail failed`.") var ids: [String] = []
        @Flag(name: .long, help: "Every failed email.") var all = false

        func validate() throws {
            guard all != !ids.isEmpty else { throw ValidationError("give ids or --all (not both)") }
        }

        func run() async throws {
            let count = try await options.withServer { try await $0.retryFailedMail(ids: all ? nil : ids) }
            print("\(count) email\(count == 1 ? "" : "s") queued again")
        }
    }
}

struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete what has aged out (expired flows and tokens, ended sessions, old counters, sent mail, old audit events) once, now.",
        discussion: """
            The server does this by itself every retention.interval seconds unless retention.enabled is false; this \
            command is for a scheduler, or for a first clean-up. Safe while servers run. Prints, per table, the rows \
            deleted and the rows left.
            """
    )

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let rows = try await options.withServer { try await $0.purge() }
        let width = rows.map(\.table.count).max() ?? 0
        for row in rows {
            print("\(row.table.padding(toLength: width, withPad: " ", startingAt: 0))  deleted \(row.deleted)  left \(row.left)")
        }
    }
}

struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read the audit log: logins, refreshes, logouts, resets, key and API key changes, rate limits.",
        subcommands: [Tail.self]
    )

    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the newest events, oldest first: time, app, event, user, address, user agent, details."
        )
        @OptionGroup var options: ConfigOptions
        @Option(name: .long, help: "Only this app's events (`*` for server-wide ones: signing keys).") var app: String?
        @Option(name: .long, help: "Only this user's events.") var user: String?
        @Option(name: [.customShort("n"), .long], help: "How many events (1–10000).") var lines = 50
        @Flag(name: [.short, .long], help: "Keep printing new events as they are recorded (every second), until interrupted.")
        var follow = false

        func validate() throws {
            guard (1...10_000).contains(lines) else { throw ValidationError("--lines must be 1…10000") }
        }

        func run() async throws {
            let config = try options.load()
            let logger = try options.logger()
            var last: Int64?
            repeat {
                let events = try await AuthServer.auditEvents(
                    configuration: config, appId: app, userId: user, afterSeq: last, limit: last == nil ? lines : 10_000, logger: logger
                )
                for event in events { print(Self.line(event)) }
                last = events.last?.seq ?? last ?? 0
                if follow { try await Task.sleep(for: .seconds(1)) }
            } while follow
        }

        /// `2026-11-22T10:00:00.123Z  app  login_failed  user=…  ip=…  ua="…"  provider=local-userpass`
        static func line(_ event: AuditEvent) -> String {
            var fields = [
                event.at.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)), event.appId, event.kind,
                "user=\(event.userId ?? "-")", "ip=\(event.ip ?? "-")",
            ]
            if let agent = event.userAgent { fields.append("ua=\(String(reflecting: agent))") }
            fields += event.detail.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return fields.joined(separator: "  ")
        }
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the users of the configured database as JSON lines (for `gatehouse import`, e.g. SQLite to PostgreSQL).",
        discussion: """
            The file holds every exported user's identities, email/password accounts and password hashes (Argon2id, as \
            stored), and the SHA-256 hashes of their API keys: keep it as private as the database. With --sessions it also holds the live sessions and the \
            private signing keys, so that users stay signed in after the move; anyone with such a file can mint tokens.
            """
    )

    @OptionGroup var options: ConfigOptions
    @Option(name: .long, help: "Export only this app's users (repeatable). Default: every app.") var app: [String] = []
    @Flag(name: .long, help: "Include live sessions and the signing keys (users stay signed in after the move).") var sessions = false
    @Option(name: [.short, .long], help: "Write to this file (created readable by its owner only) instead of standard output.") var output: String?

    func run() async throws {
        let config = try options.load()
        let logger = try options.logger()
        let sink: FileHandle
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil, attributes: [.posixPermissions: 0o600]),
                let handle = FileHandle(forWritingAtPath: output)
            else {
                FileHandle.standardError.write(Data("gatehouse: cannot create \(output)\n".utf8))
                throw ExitCode(73)  // EX_CANTCREAT
            }
            sink = handle
        } else {
            sink = FileHandle.standardOutput
        }
        let writer = LineWriter(sink)
        do {
            let summary = try await AuthServer.exportUsers(
                configuration: config, apps: app.isEmpty ? nil : app, includeSessions: sessions, logger: logger, write: writer.write
            )
            try writer.flush()
            FileHandle.standardError.write(Data("gatehouse: exported \(summary)\n".utf8))
        } catch {
            // A partial file must not pass for an export (import would refuse it anyway: it has no end line).
            if let output { try? FileManager.default.removeItem(atPath: output) }
            FileHandle.standardError.write(Data("gatehouse: export failed: \(error)\n".utf8))
            throw ExitCode(69)
        }
    }
}

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load users into the configured database: a `gatehouse export` file, or another system's export (--from).",
        discussion: """
            Without --from: a `gatehouse export` file, all of it or nothing. Every user's app must be in the \
            configuration, and none of the users, emails or identities may be in the database yet. A malformed or \
            truncated file is refused with the line at fault, and nothing is written.

            With --from firebase|supabase|auth0|keycloak|csv and --app: another system's export, streamed and written \
            in batches. Passwords keep working (their hashes are verified as they are and replaced by Argon2id at \
            the first login); unverified addresses stay pending, disabled users stay disabled, and the source's user \
            id is kept as `source_user_id` in the identity's data. Running it again skips the addresses the app has. \
            Each record not imported is reported with its reason (to --report, or standard error). See \
            docs/migrating.md.
            """
    )

    @OptionGroup var options: ConfigOptions
    @Argument(help: "The file to import; standard input when omitted or -.") var file: String?
    @Option(name: .long, help: "Read another system's export: firebase, supabase, auth0, keycloak or csv.") var from: String?
    @Option(name: .long, help: "With --from: the app the users join.") var app: String?
    @Flag(name: .long, help: "With --from: read and check everything against the database, write nothing.") var dryRun = false
    @Option(name: .long, help: "With --from: write the records not imported, with their reasons, to this file instead of standard error.") var report: String?
    @Option(name: .long, help: "Firebase: the project's hash algorithm (SCRYPT, HMAC_SHA256, …, PBKDF2_SHA256, BCRYPT).") var hashAlgo: String?
    @Option(name: .long, help: "Firebase: base64 signer key (SCRYPT) or HMAC key.") var hashKey: String?
    @Option(name: .long, help: "Firebase: base64 salt separator (SCRYPT).") var saltSeparator: String?
    @Option(name: .long, help: "Firebase: rounds (SCRYPT's r, PBKDF2's iterations).") var rounds: Int?
    @Option(name: .long, help: "Firebase: memory cost (SCRYPT's log2 N).") var memCost: Int?
    @Option(name: .long, help: "Firebase: SALT_FIRST or PASSWORD_FIRST (HMAC_* with salts).") var hashInputOrder: String?

    func run() async throws {
        if from == nil {
            // An export file is imported whole or not at all, with none of these: refused before anything is read, so
            // that `--dry-run` never writes a file the operator meant to check.
            let foreignOnly: [(String, Bool)] = [
                ("--dry-run", dryRun), ("--report", report != nil), ("--app", app != nil), ("--hash-algo", hashAlgo != nil),
                ("--hash-key", hashKey != nil), ("--salt-separator", saltSeparator != nil), ("--rounds", rounds != nil),
                ("--mem-cost", memCost != nil), ("--hash-input-order", hashInputOrder != nil),
            ]
            let given = foreignOnly.filter(\.1).map(\.0)
            if !given.isEmpty {
                FileHandle.standardError.write(Data("gatehouse: \(given.joined(separator: ", ")) go\(given.count == 1 ? "es" : "") with --from; a `gatehouse export` file is imported whole or not at all (to check one, import it into a scratch database first)\n".utf8))
                throw ExitCode(64)  // EX_USAGE
            }
        }
        let config = try options.load()
        let logger = try options.logger()
        let source: FileHandle
        if let file, file != "-" {
            guard let handle = FileHandle(forReadingAtPath: file) else {
                FileHandle.standardError.write(Data("gatehouse: cannot read \(file)\n".utf8))
                throw ExitCode(66)  // EX_NOINPUT
            }
            source = handle
        } else {
            source = FileHandle.standardInput
        }
        if let from {
            try await importForeign(from, source, config: config, logger: logger)
            return
        }
        do {
            let summary = try await AuthServer.importUsers(configuration: config, logger: logger, next: LineReader(source).next)
            FileHandle.standardError.write(Data("gatehouse: imported \(summary)\n".utf8))
        } catch let error as TransferError {
            FileHandle.standardError.write(Data("gatehouse: import refused, nothing was written: \(error)\n".utf8))
            throw ExitCode(65)  // EX_DATAERR
        } catch {
            FileHandle.standardError.write(Data("gatehouse: import failed, nothing was written: \(error)\n".utf8))
            throw ExitCode(69)
        }
    }

    private func importForeign(_ name: String, _ source: FileHandle, config: GatehouseConfiguration, logger: Logger) async throws {
        func fail(_ message: String, _ code: Int32) -> ExitCode {
            FileHandle.standardError.write(Data("gatehouse: \(message)\n".utf8))
            return ExitCode(code)
        }
        guard let format = ForeignExportFormat(rawValue: name.lowercased()) else {
            throw fail("--from \(name): the formats are \(ForeignExportFormat.allCases.map(\.rawValue).joined(separator: ", "))", 64)
        }
        guard let app else { throw fail("--from needs --app: the app the users join", 64) }
        let firebase = hashAlgo.map {
            FirebaseHashParameters(
                algorithm: $0, key: hashKey, saltSeparator: saltSeparator, rounds: rounds, memoryCost: memCost, inputOrder: hashInputOrder
            )
        }
        var reportSink = FileHandle.standardError
        if let report {
            guard FileManager.default.createFile(atPath: report, contents: nil, attributes: [.posixPermissions: 0o600]),
                let handle = FileHandle(forWritingAtPath: report)
            else { throw fail("cannot create \(report)", 73) }
            reportSink = handle
        }
        let total = (try? source.seekToEnd()).flatMap { end -> Int? in
            (try? source.seek(toOffset: 0)) == nil ? nil : Int(end)
        }
        let bar = ProgressBar(total: total, enabled: isatty(2) == 1)
        let reportsToTerminal = report == nil
        do {
            let summary = try await AuthServer.importForeignUsers(
                configuration: config, format: format, appId: app, firebase: firebase, dryRun: dryRun, logger: logger,
                read: { try source.read(upToCount: 1 << 16).map(Array.init) },
                progress: { bar.show($0) },
                skipped: { record in
                    if reportsToTerminal { bar.clear() }
                    reportSink.write(Data("\(record)\n".utf8))
                }
            )
            bar.finish()
            let verb = dryRun ? "dry run, nothing was written" : "imported"
            FileHandle.standardError.write(Data("gatehouse: \(verb): \(summary)\n".utf8))
        } catch let error as AuthServer.ImportSetupError {
            bar.finish()
            throw fail("import stopped: \(error) (batches before it are written; running the import again skips them)", 65)
        } catch {
            bar.finish()
            throw fail("import failed: \(error) (batches before it are written; running the import again skips them)", 69)
        }
    }
}

/// A one-line progress display on a terminal's standard error: records, rate and, when the file's size is known, the
/// share read and the time left.
final class ProgressBar: @unchecked Sendable {
    private let total: Int?
    private let enabled: Bool
    private let started = ContinuousClock.now
    private var lastDrawn: ContinuousClock.Instant?
    private var shown = false

    init(total: Int?, enabled: Bool) {
        self.total = total
        self.enabled = enabled
    }

    private var latest: ImportProgress?

    /// Draws `progress`, at most ten times a second (``finish()`` draws the last one in any case).
    func show(_ progress: ImportProgress, force: Bool = false) {
        guard enabled else { return }
        latest = progress
        let now = ContinuousClock.now
        if !force, let lastDrawn, now - lastDrawn < .milliseconds(100) { return }
        lastDrawn = now
        let elapsed = max((now - started) / .seconds(1), 0.001)
        let rate = Double(progress.summary.read) / elapsed
        var line = "importing  \(progress.summary.read) records  \(progress.summary.imported) imported  \(Int(rate))/s"
        if let total, total > 0 {
            let share = Double(progress.bytesRead) / Double(total)
            let left = share > 0 ? elapsed * (1 - share) / share : 0
            line += String(format: "  %3.0f%%  ETA %d:%02d", share * 100, Int(left) / 60, Int(left) % 60)
        }
        FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
        shown = true
    }

    func clear() {
        guard shown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        lastDrawn = nil
    }

    func finish() {
        if let latest { show(latest, force: true) }
        latest = nil
        guard shown else { return }
        FileHandle.standardError.write(Data("\n".utf8))
        shown = false
    }
}

/// Lines of a file, read in chunks (an export can be larger than memory should hold at once).
final class LineReader: @unchecked Sendable {
    private let handle: FileHandle
    private let lock = NSLock()
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next line without its newline (a trailing `\r` is dropped too), or nil at the end of the file.
    @Sendable func next() throws -> String? {
        try lock.withLock {
            while true {
                if let newline = buffer[start...].firstIndex(of: 0x0A) {
                    var line = buffer[start..<newline]
                    start = newline + 1
                    if line.last == 0x0D { line = line.dropLast() }
                    return String(decoding: line, as: UTF8.self)
                }
                if atEnd {
                    guard start < buffer.count else { return nil }
                    defer { start = buffer.count }
                    return String(decoding: buffer[start...], as: UTF8.self)
                }
                buffer.removeFirst(start)
                start = 0
                if let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty {
                    buffer.append(contentsOf: chunk)
                } else {
                    atEnd = true
                }
            }
        }
    }
}

/// Lines to a file, written in chunks.
final class LineWriter: @unchecked Sendable {
    private let handle: FileHandle
    private let lock = NSLock()
    private var buffer: [UInt8] = []

    init(_ handle: FileHandle) { self.handle = handle }

    @Sendable func write(_ line: String) throws {
        try lock.withLock {
            buffer.append(contentsOf: line.utf8)
            buffer.append(0x0A)
            if buffer.count >= 1 << 16 { try flushLocked() }
        }
    }

    func flush() throws {
        try lock.withLock { try flushLocked() }
    }

    private func flushLocked() throws {
        try handle.write(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the keys tokens are signed with.",
        discussion: """
            rotate adds a key that signs from then on; older keys still verify. retire makes a key stop verifying: \
            every token it signed stops working, Client API refresh tokens included (their users sign in again; native \
            auth refresh tokens are not signed and keep working), so retire a key \
            once the tokens it signed may expire (refreshTokenTTL after the rotation) or when it may have leaked. \
            Running servers take changes within a minute.
            """,
        subcommands: [List.self, Rotate.self, Retire.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the signing keys, oldest first.")
        @OptionGroup var options: ConfigOptions

        func run() async throws {
            let config = try options.load()
            let keys = try await AuthServer.signingKeys(configuration: config, logger: try options.logger())
            let format = Date.ISO8601FormatStyle()
            for key in keys {
                let state = key.retiredAt.map { "retired \(format.format($0))" } ?? (key.signing ? "signing" : "verifying")
                print("\(key.kid)  created \(format.format(key.createdAt))  \(state)")
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a key that signs new tokens from now on.")
        @OptionGroup var options: ConfigOptions

        func run() async throws {
            let config = try options.load()
            let key = try await AuthServer.rotateSigningKey(configuration: config, logger: try options.logger())
            print("new signing key \(key.kid); older keys still verify until you retire them")
        }
    }

    struct Retire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop accepting tokens signed with a key.")
        @OptionGroup var options: ConfigOptions
        @Argument(help: "The key id (kid), as `gatehouse keys list` shows it.") var kid: String

        func run() async throws {
            let config = try options.load()
            do {
                try await AuthServer.retireSigningKey(configuration: config, kid: kid, logger: try options.logger())
            } catch let error as AdminError {
                FileHandle.standardError.write(Data("gatehouse: \(error)\n".utf8))
                throw ExitCode(65)
            }
            print("retired \(kid): running servers refuse the tokens it signed within a minute, a server started now at once")
        }
    }
}
