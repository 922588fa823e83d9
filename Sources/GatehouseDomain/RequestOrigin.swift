/// Who is asking: the client's address and user agent, for rate limits and the audit log.
///
/// The façade reads it from the request and hands it to the domain with the environment it builds the request's
/// services from (``AuthEnvironment/serving(_:)``): an argument, never ambient state. Outside a request (the command
/// line, tests calling services directly) both are nil.
package struct RequestOrigin: Sendable, Hashable {
    /// The client's IP address: the connection's peer, or the address a trusted proxy reports (`server.clientIPHeader`).
    package var ip: String?
    /// The `User-Agent` header, cut to 256 characters.
    package var userAgent: String?

    package init(ip: String? = nil, userAgent: String? = nil) {
        self.ip = ip
        self.userAgent = userAgent
    }
}
