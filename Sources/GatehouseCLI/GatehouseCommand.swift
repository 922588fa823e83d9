import ArgumentParser
import Foundation
import GatehouseServer
import Logging

/// `gatehouse`: the Gatehouse server's command line. Thin by design: it reads the configuration and hands it
/// to GatehouseServer.
@main
struct GatehouseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted authentication server for Swift apps.",
        subcommands: [Serve.self, Migrate.self, Users.self],
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

    /// The validated configuration, or a clear message on standard error and exit code 78 (EX_CONFIG).
    func load() throws -> GatehouseConfiguration {
        do {
            return try ConfigurationLoader().load(file: config, overrides: .init(host: host, port: port, database: database))
        } catch {
            FileHandle.standardError.write(Data("gatehouse: configuration error: \(error)\n".utf8))
            throw ExitCode(78)
        }
    }

    func logger() throws -> Logger {
        guard let level = Logger.Level(rawValue: logLevel.lowercased()) else {
            FileHandle.standardError.write(Data("gatehouse: configuration error: --log-level: unknown level \"\(logLevel)\"\n".utf8))
            throw ExitCode(78)
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
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
    static let configuration = CommandConfiguration(abstract: "Manage users.", subcommands: [SetData.self])

    struct SetData: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-data",
            abstract: "Replace a user's custom user data (a JSON object, carried in the user_data claim of access tokens)."
        )

        @OptionGroup var options: ConfigOptions
        @Option(name: .long, help: "App id.") var app: String
        @Option(name: .long, help: "User id (24 hex digits).") var user: String
        @Argument(help: "The custom data, a JSON object, e.g. '{\"plan\":\"pro\"}'.") var json: String

        func run() async throws {
            let config = try options.load()
            let logger = try options.logger()
            let gatehouse = try await AuthServer.open(configuration: config, logger: logger)
            do {
                try await gatehouse.setCustomData(appId: app, userId: user, json: json)
                try await gatehouse.close()
            } catch {
                try? await gatehouse.close()
                FileHandle.standardError.write(Data("gatehouse: \(error)\n".utf8))
                throw ExitCode(65)
            }
            print("custom data of user \(user) set")
        }
    }
}
