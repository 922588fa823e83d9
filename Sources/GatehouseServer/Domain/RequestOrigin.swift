/// Who is asking: the client's address and user agent, for rate limits and the audit log.
///
/// ``RequestOriginMiddleware`` sets it for the duration of each request as a task-local value, so that domain code
/// deep in a flow can read it without every operation taking it as a parameter. Outside a request (the command
/// line, tests calling services directly) both are nil.
struct RequestOrigin: Sendable, Hashable {
    /// The client's IP address: the connection's peer, or the address a trusted proxy reports (`server.clientIPHeader`).
    var ip: String?
    /// The `User-Agent` header, cut to 256 characters.
    var userAgent: String?

    @TaskLocal static var current = RequestOrigin()
}
