import CoreMetrics
import Foundation
import GatehouseArgon2
@_exported import GatehouseDomain
import GatehouseWire
import HTTPTypes
public import Hummingbird
public import Logging
import ServiceLifecycle
import UnixSignals
import NIOConcurrencyHelpers
import NIOPosix

/// A Gatehouse server built from a configuration: its database open and migrated, its signing keys loaded.
///
/// ```swift
/// let gatehouse = try await AuthServer.open(configuration: config, logger: logger)
/// try await gatehouse.makeApplication().runService()
/// try await gatehouse.close()
/// ```
/// Tests use the same builder with an in-memory database and a ``ManualClock``.
public final class AuthServer: Sendable {
    /// The server's version (`gatehouse --version`); CHANGELOG.md says what each brought.
    public static let version = "0.1.0"

    public let configuration: GatehouseConfiguration
    let env: AuthEnvironment
    /// Internal for the fault tests, which set SQLite pragmas on its connection.
    let database: any SQLDatabase
    private let publicURL: PublicURL

    /// Where the outbox goes: SMTP when `mail.smtp` is set, else the dev mailbox when on, else nowhere yet.
    private let mailTransport: (any MailTransport)?
    private let readiness: DatabaseReadiness
    private let retry: RetrySchedule
    /// This server's metrics (`/metrics`): a registry of its own, never the process-wide `MetricsSystem`.
    let metrics: GatehouseMetrics

    private init(
        configuration: GatehouseConfiguration,
        env: AuthEnvironment,
        database: any SQLDatabase,
        publicURL: PublicURL,
        mailTransport: (any MailTransport)?,
        readiness: DatabaseReadiness,
        retry: RetrySchedule,
        metrics: GatehouseMetrics
    ) {
        self.configuration = configuration
        self.env = env
        self.database = database
        self.publicURL = publicURL
        self.mailTransport = mailTransport
        self.readiness = readiness
        self.retry = retry
        self.metrics = metrics
    }

    /// Opens the configured database, applies pending migrations, and loads (or creates) the signing keys.
    ///
    /// First it checks `configuration` (``GatehouseConfiguration/validate()``): one built in code meets the rules, keys
    /// and messages of one loaded from a file, and a ``ConfigurationError`` stops it before anything is opened.
    ///
    /// - Parameters:
    ///   - waitForDatabase: when a PostgreSQL server cannot be reached, return anyway: the application then listens,
    ///     reports not-ready on `/readyz`, answers 503 elsewhere, and retries on `retry`'s schedule until the
    ///     database answers. Without it (the default) an unreachable database throws.
    ///   - retry: the delays between those attempts.
    ///   - functions: Swift closures standing in for the confirmation, reset and custom-function webhooks.
    public static func open(
        configuration: GatehouseConfiguration,
        clock: GatehouseClock = .system,
        logger: Logger = Logger(label: "gatehouse"),
        waitForDatabase: Bool = false,
        retry: RetrySchedule = RetrySchedule(),
        functions: FunctionHandlers = FunctionHandlers()
    ) async throws -> AuthServer {
        // Every configuration, loaded from a file or built in code by an embedding program, meets the same rules.
        try configuration.validate()
        if let exposure = configuration.plainHTTPExposure { logger.warning("\(exposure)") }
        // Configuration that needs files (templates) or closures is checked before anything is opened.
        var templates: [String: MailTemplates] = [:]
        for (index, app) in configuration.apps.enumerated() {
            templates[app.id] = try MailTemplates.load(folder: app.emailTemplates, key: "apps[\(index)].emailTemplates")
            try checkFunctions(app, functions, path: "apps[\(index)].providers")
        }
        // Files read on first use are read now: a server that first needs them while out of file descriptors (or
        // after its working directory went away) must not fail then.
        CommonPasswords.load()
        _ = OpenAPIDocument.bytes
        // So are the descriptors of Swift concurrency's timers (``TimerDescriptors``).
        await TimerDescriptors.open()
        let metrics = GatehouseMetrics(enabled: configuration.server.metrics.enabled)
        let database = try await openDatabase(configuration.database.url, logger: logger, connect: !waitForDatabase, metrics: metrics.database)
        do {
            let store = SQLStore(db: database)
            let keys = SigningKeys(keys: [], verifiedCapacity: configuration.server.verifiedTokenCache)
            let readiness = DatabaseReadiness(ready: false)
            do {
                try await initialize(database, keys: keys, clock: clock, logger: logger)
                readiness.ready()
            } catch StoreError.unavailable(let reason) where waitForDatabase {
                readiness.waiting(because: reason)
            }
            let hasher = Argon2PasswordHasher(metrics: metrics.hashing)
            for app in configuration.apps { try await hasher.prepare(app.passwordHash) }
            // The warm-up hashes are not traffic: their matrix need not wait for the trim service to go.
            Argon2.releaseIdleMemory(force: true)
            let publicURL = PublicURL(configuration.server.resolvedPublicURL())
            var transport: (any MailTransport)?
            if configuration.mail.smtpURL != nil {
                transport = try SMTPMailer(settings: configuration.mail, logger: logger)
            } else if configuration.dev.mailbox {
                transport = DevMailboxTransport()
            }
            // Made last: nothing below throws, and close() shuts it down.
            let outbound = HTTPClientOutbound()
            // custom-token keys are parsed once here, not at every login (the loader already checked them).
            var customTokenKeys: [String: [JWTVerificationKey]] = [:]
            for app in configuration.apps {
                if let settings = app.customToken { customTokenKeys[app.id] = try settings.verificationKeys() }
            }
            var env = AuthEnvironment(
                store: store, clock: clock, hasher: hasher, keys: keys, configuration: configuration,
                publicURLBox: publicURL, logger: logger, templates: templates,
                outbound: outbound, jwks: JWKSCache(http: outbound, clock: clock), customTokenKeys: customTokenKeys, functions: functions,
                auditWriter: AuditWriter(store: store)
            )
            env.metrics = AuthEventCounters(metrics.factory)
            return AuthServer(
                configuration: configuration, env: env, database: database, publicURL: publicURL, mailTransport: transport,
                readiness: readiness, retry: retry, metrics: metrics
            )
        } catch {
            try? await database.close()
            throw error
        }
    }

    /// Every function an app uses has a webhook or a closure.
    private static func checkFunctions(_ app: AppSettings, _ functions: FunctionHandlers, path: String) throws(ConfigurationError) {
        if let local = app.localUserpass {
            if local.confirmation == .function, local.confirmationFunction == nil, functions.confirmation == nil {
                throw ConfigurationError(key: path + ".local-userpass.confirmationFunction", message: "required with confirmation: function")
            }
            if local.reset == .function, local.resetFunction == nil, functions.reset == nil {
                throw ConfigurationError(key: path + ".local-userpass.resetFunction", message: "required with reset: function")
            }
        }
        if case .some(.none) = app.customFunction, functions.customLogin == nil {
            throw ConfigurationError(key: path + ".custom-function.webhook", message: "required (or give a customLogin closure when embedding)")
        }
    }

    /// The start-up work that needs the database: pending migrations, then the signing keys.
    private static func initialize(_ database: any SQLDatabase, keys: SigningKeys, clock: GatehouseClock, logger: Logger) async throws {
        let applied = try await Migrator(db: database).migrate()
        if !applied.isEmpty { logger.info("database migrated", metadata: ["versions": "\(applied)"]) }
        keys.replace(with: try await SigningKeys.load(from: SQLStore(db: database), clock: clock))
    }

    /// False while a server opened with `waitForDatabase` has not reached its database yet.
    public var isReady: Bool { readiness.isReady }

    /// Applies pending migrations to the configured database and closes it. Returns the versions applied.
    public static func migrate(configuration: GatehouseConfiguration, logger: Logger = Logger(label: "gatehouse")) async throws -> [Int] {
        try await withMigratedDatabase(configuration, logger: logger) { _, applied in applied }
    }

    /// Writes the users of the configured database as a `gatehouse export` file (JSON lines; see docs/operations.md's
    /// "Moving to PostgreSQL"): their identities, email/password accounts with their password hashes and, with
    /// `includeSessions`, their live sessions and the signing keys their refresh tokens are signed with.
    ///
    /// - Parameters:
    ///   - apps: the apps to export; all apps with users when nil.
    ///   - write: called with each line, without its newline.
    public static func exportUsers(
        configuration: GatehouseConfiguration,
        apps: [String]? = nil,
        includeSessions: Bool = false,
        clock: GatehouseClock = .system,
        logger: Logger = Logger(label: "gatehouse"),
        write: @escaping @Sendable (String) throws -> Void
    ) async throws -> TransferSummary {
        // Administration, as migrations are: one transaction as long as the file takes, not the request deadline
        // (`query_timeout`) that bounds a statement of the running server.
        try await PostgresDatabase.$unbounded.withValue(true) {
            try await withMigratedDatabase(configuration, logger: logger) { database, _ in
                try await UserTransfer(db: database).export(apps: apps, sessions: includeSessions, now: clock.now, write: write)
            }
        }
    }

    /// Reads a `gatehouse export` file line by line from `next` (nil at its end) into the configured database, in
    /// one transaction: all of it or, with a ``TransferError`` naming the line, nothing. Every user's app must be
    /// in the configuration, and none of the users, emails or identities may exist in the database yet.
    public static func importUsers(
        configuration: GatehouseConfiguration,
        logger: Logger = Logger(label: "gatehouse"),
        next: @escaping @Sendable () throws -> String?
    ) async throws -> TransferSummary {
        // All of the file in one transaction, however long it takes to read: no request deadline (see exportUsers).
        try await PostgresDatabase.$unbounded.withValue(true) {
            try await withMigratedDatabase(configuration, logger: logger) { database, _ in
                try await UserTransfer(db: database).importLines(
                    apps: Set(configuration.apps.map(\.id)),
                    ownParameters: Dictionary(configuration.apps.map { ($0.id, $0.passwordHash) }, uniquingKeysWith: { first, _ in first }),
                    next: next
                )
            }
        }
    }

    /// `gatehouse import --from`: reads another system's export from `read` (chunks of the file, nil at its end) and
    /// writes its users into app `appId` in batches of one transaction each (see ``ForeignExportFormat``). Records it
    /// cannot or need not import (no address, an unreadable hash, an address the app has) go to `skipped` with the
    /// reason; `progress` is called after each batch. With `dryRun` nothing is written.
    ///
    /// - Throws: ``ImportSetupError`` when the app is not configured or the file is not of the format at all (the
    ///   batches before that stay written; running the import again skips them).
    public static func importForeignUsers(
        configuration: GatehouseConfiguration,
        format: ForeignExportFormat,
        appId: String,
        firebase: FirebaseHashParameters? = nil,
        dryRun: Bool = false,
        clock: GatehouseClock = .system,
        logger: Logger = Logger(label: "gatehouse"),
        read: @escaping () throws -> [UInt8]?,
        progress: (ImportProgress) -> Void = { _ in },
        skipped: (SkippedRecord) -> Void
    ) async throws -> ForeignImportSummary {
        guard configuration.apps.contains(where: { $0.id == appId }) else {
            throw ImportSetupError(message: "the configuration has no app \"\(appId)\" (add it under apps, then import again)")
        }
        let now = clock.now
        var reader: ForeignExportReader
        do {
            reader = try ForeignExportReader(format: format, input: ByteInput(read: read), firebase: firebase, now: now)
        } catch let error as ExportFileError {
            throw ImportSetupError(message: error.message)
        }
        return try await withMigratedDatabase(configuration, logger: logger) { database, _ in
            do {
                return try await ForeignImport(db: database, appId: appId, format: format, dryRun: dryRun).run(
                    &reader, now: now, progress: progress, skipped: skipped
                )
            } catch let error as ExportFileError {
                throw ImportSetupError(message: error.message)
            }
        }
    }

    /// Why `gatehouse import --from` could not start or go on.
    public struct ImportSetupError: Error, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The newest `limit` audit events, oldest first, of one app and one user when given (`gatehouse audit tail`);
    /// with `afterSeq`, only those recorded after that one (to follow the log).
    public static func auditEvents(
        configuration: GatehouseConfiguration, appId: String?, userId: String?, afterSeq: Int64? = nil, limit: Int,
        logger: Logger = Logger(label: "gatehouse")
    ) async throws -> [AuditEvent] {
        try await withMigratedDatabase(configuration, logger: logger) { database, _ in
            try await SQLStore(db: database).auditEvents(appId: appId, userId: userId, afterSeq: afterSeq, limit: limit)
        }
    }

    /// Opens the configured database, applies pending migrations, runs `body`, and closes it. The configuration is
    /// validated first, as ``open(configuration:clock:logger:waitForDatabase:retry:functions:)`` does.
    static func withMigratedDatabase<T: Sendable>(
        _ configuration: GatehouseConfiguration,
        logger: Logger,
        _ body: (any SQLDatabase, _ applied: [Int]) async throws -> T
    ) async throws -> T {
        try configuration.validate()
        let database = try await openDatabase(configuration.database.url, logger: logger)
        do {
            let result = try await body(database, try await Migrator(db: database).migrate())
            try await database.close()
            return result
        } catch {
            try? await database.close()
            throw error
        }
    }

    static func openDatabase(
        _ url: DatabaseURL, logger: Logger, connect: Bool = true, metrics: QueuedWorkMetrics = .none
    ) async throws -> any SQLDatabase {
        switch url {
        case .sqliteFile, .sqliteMemory:
            try await SQLiteDatabase.open(url, logger: logger, metrics: metrics)
        case .postgres(let settings):
            try await PostgresDatabase.open(settings, logger: logger, connect: connect, metrics: metrics)
        }
    }

    /// The HTTP application: every route, the error envelope, and the outbox delivery service.
    /// - Parameter onServerRunning: called once the server listens, with the bound port.
    public func makeApplication(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol {
        // Every GET route answers HEAD too (RFC 9110 §9.3.2: load balancers and uptime checks probe with it): the
        // GET's status and headers, no body.
        let router = Router(context: GatehouseRequestContext.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: RequestLogMiddleware(metrics: metrics))
        router.add(middleware: NoSniffMiddleware())
        router.add(
            middleware: RequestOriginMiddleware(
                clientIPHeader: configuration.server.clientIPHeader.flatMap { HTTPField.Name($0) },
                ipv6PrefixLength: configuration.server.ipv6PrefixLength
            )
        )
        // Outside the error middleware: refusals carry the CORS headers too, so browser clients can read them.
        router.add(middleware: CORSMiddleware(configuration: configuration))
        router.add(middleware: ClientAPIErrorMiddleware(publicURL: publicURL))
        // Inside the error middleware: a refusal is answered in the route's envelope.
        router.add(middleware: CrossSiteGuard(configuration: configuration, publicURL: publicURL))
        router.add(middleware: ReadinessMiddleware(readiness: readiness))
        ClientAPIRoutes(env: env).register(on: router)
        NativeAuthRoutes(env: env).register(on: router)
        ServiceRoutes(env: env, readiness: readiness, probe: ReadinessProbe(write: { [store = SQLStore(db: database)] in try await store.probeWrite() })).register(on: router)
        HostedPages(env: env).register(on: router)
        if configuration.server.metrics.enabled {
            MetricsRoutes(
                metrics: metrics, settings: configuration.server.metrics,
                clientIPHeader: configuration.server.clientIPHeader.flatMap { HTTPField.Name($0) },
                outboxDepth: OutboxDepth(gauge: metrics.outboxPending) { [store = SQLStore(db: database)] in try await store.pendingMailCount() }
            ).register(on: router)
        }
        if configuration.dev.mailbox {
            DevMailboxRoutes(store: env.store).register(on: router)
        }

        var services: [any Service] = [HashMemoryTrimService(), RateLimitFlusher(env: env)]
        if configuration.retention.enabled { services.append(RetentionRunner(env: env)) }
        if let transport = mailTransport {
            var delivery = OutboxDeliveryService(store: env.store, transport: transport, clock: env.clock, logger: env.logger)
            delivery.metrics = metrics
            services.append(delivery)
        } else {
            env.logger.notice("no mail transport is configured (mail.smtp or dev.mailbox): emails wait in the outbox")
        }
        if !readiness.isReady {
            // Not connected yet: keep trying, and start the services that need the database once it answers.
            let (database, keys, clock, logger) = (self.database, env.keys, env.clock, env.logger)
            services = [
                DatabaseWaiter(readiness: readiness, schedule: retry, logger: logger, initialize: {
                    try await Self.initialize(database, keys: keys, clock: clock, logger: logger)
                }, then: services)
            ]
        }

        let configured = configuration.server
        let publicURL = self.publicURL
        let logger = env.logger
        let maxConnections = configured.maxConnections ?? FileLimit.defaultMaxConnections()
        var app = Application(
            router: router,
            server: .http1(configuration: .init(additionalChannelHandlers: Connections.handlers(configured))),
            configuration: .init(
                address: .hostname(configured.host, port: configured.port), serverName: "Gatehouse",
                availableConnectionsDelegate: ConnectionLimit(maximum: maxConnections, logger: logger)
            ),
            services: services,
            onServerRunning: { channel in
                // The listening socket pauses accepting while the process is out of file descriptors.
                try? await channel.eventLoop.submit {
                    try channel.pipeline.syncOperations.addHandler(AcceptFailurePause(logger: logger), position: .first)
                }.get()
                let port = channel.localAddress?.port ?? configured.port
                publicURL.set(configured.resolvedPublicURL(boundPort: port))
                await onServerRunning(port)
            },
            logger: env.logger
        )
        app.logger.logLevel = env.logger.logLevel
        return app
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully and closes the database: requests in flight have
    /// `server.shutdownTimeout` seconds to finish, after which they are cancelled (and the process ends at most 5 s
    /// later whatever they do). First raises the process's soft limit on open files to its hard limit: every
    /// connection is a file, and `server.maxConnections` defaults to that limit less 256.
    public func run(onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let files = FileLimit.raise()
        env.logger.info(
            "connection limits",
            metadata: [
                "open_files": "\(files)", "max_connections": "\(configuration.server.maxConnections ?? FileLimit.defaultMaxConnections(softLimit: files))",
            ]
        )
        do {
            var group = ServiceGroupConfiguration(
                services: [makeApplication(onServerRunning: onServerRunning)], gracefulShutdownSignals: [.sigterm, .sigint], logger: env.logger
            )
            group.maximumGracefulShutdownDuration = .seconds(Int64(configuration.server.shutdownTimeout))
            group.maximumCancellationDuration = .seconds(5)
            let services = ServiceGroup(configuration: group)
            try await Self.onEventLoops { try await services.run() }
        } catch {
            try? await close()
            throw error
        }
        try await close()
    }

    /// Runs `body`, and every task it starts, on NIO's event loops (``EventLoopTaskExecutor``): ``run(onServerRunning:)``
    /// serves under it, and so do the end-to-end tests, so that they run requests as production does.
    /// - Parameter group: the loops (tests); the server's are NIO's singleton group, which HTTP and PostgreSQL use.
    package static func onEventLoops<T: Sendable>(
        group: MultiThreadedEventLoopGroup = .singleton, _ body: () async throws -> T
    ) async throws -> T {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) {
            let executor = group === MultiThreadedEventLoopGroup.singleton ? EventLoopTaskExecutor.shared : EventLoopTaskExecutor(group: group)
            return try await withTaskExecutorPreference(executor) { try await body() }
        } else {
            return try await body()
        }
    }

    /// Deletes what has aged out (``RetentionSettings``) once, now: `gatehouse purge`. Returns the rows deleted and
    /// the rows left, per table.
    public func purge() async throws(AdminError) -> [(table: String, deleted: Int, left: Int)] {
        do {
            let deleted = try await RetentionService(env: env).run()
            let left = try await SQLStore(db: database).retainedTableSizes()
            return RetentionTarget.allCases.map { ($0.rawValue, deleted[$0] ?? 0, left[$0] ?? 0) }
        } catch {
            throw AdminError("the database refused: \(error)")
        }
    }

    /// The base URL clients are sent to and emailed links start with.
    public var resolvedPublicURL: String { publicURL.value }

    /// Closes the database. Call after the application has stopped.
    public func close() async throws {
        await env.background.drain()
        // The rate-limit hits admitted since the last flush, so that a restart forgets none.
        do {
            try await env.rateLimiter.flush(now: env.clock.now)
        } catch {
            env.logger.warning("rate limits: this instance's last counts were not written", metadata: ["error": "\(error)"])
        }
        if let outbound = env.outbound as? HTTPClientOutbound { await outbound.shutdown() }
        try await database.close()
    }
}

/// `X-Content-Type-Options: nosniff` on every answer: JSON, YAML and error bodies that echo input are never read as
/// HTML or script by a browser that guesses types.
struct NoSniffMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        return response
    }
}

