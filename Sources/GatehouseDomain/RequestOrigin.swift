/// Who is asking: the client's address and user agent, for rate limits and the audit log.
///
/// ``RequestOriginMiddleware`` sets it for the duration of each request as a task-local value, so that domain code
/// deep in a flow can read it without every operation taking it as a parameter. Outside a request (the command
/// line, tests calling services directly) both are nil.
package struct RequestOrigin: Sendable, Hashable {
    /// The client's IP address: the connection's peer, or the address a trusted proxy reports (`server.clientIPHeader`).
    package var ip: String?
    /// The `User-Agent` header, cut to 256 characters.
    package var userAgent: String?

    @TaskLocal package static var current = RequestOrigin()

    package init(ip: String? = nil, userAgent: String? = nil) {
        self.ip = ip
        self.userAgent = userAgent
    }
}
