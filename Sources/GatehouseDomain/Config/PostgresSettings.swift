import Foundation

/// A parsed `postgres://user:pass@host:port/db?sslmode=…` URL, with the pool settings.
public struct PostgresSettings: Sendable, Hashable, CustomStringConvertible {
    public enum SSLMode: String, Sendable, Hashable, CaseIterable {
        /// Plain TCP (loopback or a private network only).
        case disable
        /// TLS without checking the certificate.
        case require
        /// TLS with the certificate checked against the system roots and the host name.
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var sslMode: SSLMode
    /// Connections in the pool. Default 10.
    public var poolSize: Int
    /// Seconds to wait for a connection. Default 10.
    public var connectTimeout: Int
    /// Seconds one statement or transaction may take once it has its connection (`query_timeout`). Default 10. Past
    /// it PostgreSQL cancels the statement (`statement_timeout`, `lock_timeout`); a server that stopped answering
    /// altogether loses the connection 2 s later. Either way the request answers 503. Migrations run without it.
    public var queryTimeout: Int

    /// Parses the URL; `sslmode` defaults to `verify-full`, except on loopback hosts where it defaults to `disable`.
    public init(parsing text: String, key: String) throws(ConfigurationError) {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme?.lowercased() ?? ""),
            let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
        else {
            throw ConfigurationError(key: key, message: "expected postgres://user[:password]@host[:port]/database[?sslmode=disable|require|verify-full]")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else { throw ConfigurationError(key: key, message: "the URL names no database (…/DATABASE)") }
        self.host = host
        port = components.port ?? 5432
        username = user.removingPercentEncoding ?? user
        password = components.password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database
        let loopback = ["127.0.0.1", "localhost", "::1"].contains(host)
        var mode: SSLMode = loopback ? .disable : .verifyFull
        var poolSize = 10, connectTimeout = 10, queryTimeout = 10
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let parsed = SSLMode(rawValue: value) else {
                    throw ConfigurationError(key: key, message: "sslmode must be disable, require or verify-full")
                }
                mode = parsed
            case "pool":
                guard let value = item.value.flatMap(Int.init), (1...200).contains(value) else {
                    throw ConfigurationError(key: key, message: "pool must be 1…200")
                }
                poolSize = value
            case "connect_timeout":
                guard let value = item.value.flatMap(Int.init), (1...300).contains(value) else {
                    throw ConfigurationError(key: key, message: "connect_timeout must be 1…300 seconds")
                }
                connectTimeout = value
            case "query_timeout":
                guard let value = item.value.flatMap(Int.init), (1...300).contains(value) else {
                    throw ConfigurationError(key: key, message: "query_timeout must be 1…300 seconds")
                }
                queryTimeout = value
            default:
                throw ConfigurationError(
                    key: key, message: "unknown URL parameter \(item.name); expected sslmode, pool, connect_timeout or query_timeout"
                )
            }
        }
        sslMode = mode
        self.poolSize = poolSize
        self.connectTimeout = connectTimeout
        self.queryTimeout = queryTimeout
    }

    /// The URL without the password, for logs and banners.
    public var description: String {
        "postgres://\(username)@\(host):\(port)/\(database)?sslmode=\(sslMode.rawValue)"
    }
}
