import Foundation
import GatehouseDomain
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Connection hygiene below the router: how long a client may take, how many may be connected, and what a request
/// that cannot be parsed gets back. Hummingbird offers an idle timeout that raw bytes do not reset; these handlers
/// add the deadlines a production server needs (see docs/operations.md, "Operations: timeouts, limits and faults"):
///
/// - a new connection, or one between requests, must start a request within `server.idleTimeout` seconds;
/// - once the first byte of a request arrives its head (request line and headers) must be complete within
///   `server.headerTimeout` — a client dripping one byte at a time does not hold a connection for ever;
/// - once the head arrived, the whole body within `server.bodyTimeout`; past it the request fails as
///   ``RequestBodyTimeout`` (408) and the connection closes;
/// - a request the HTTP parser refuses gets the JSON envelope: 431 for headers too large, 400 otherwise; HTTP/1.0
///   with `Transfer-Encoding` (a framing that proxies disagree on) is refused as malformed, and a transfer coding
///   other than `chunked` alone (`gzip, chunked`: the parser would frame it and hand on compressed bytes) gets 501.
enum Connections {
    /// The channel handlers added to every connection, fresh for each.
    static func handlers(_ settings: ServerSettings) -> [any RemovableChannelHandler] {
        let timers = ConnectionTimers(
            idle: .seconds(Int64(settings.idleTimeout)), head: .seconds(Int64(settings.headerTimeout)), body: .seconds(Int64(settings.bodyTimeout))
        )
        return [MalformedRequestHandler(), RequestPartTimer(timers: timers)]
    }
}

/// The request body did not arrive within `server.bodyTimeout`: 408, and the connection closes.
struct RequestBodyTimeout: Error {}

/// The HTTP parser refused the request while its body was being read: 400.
struct MalformedRequest: Error {
    var reason: String
}

/// The deadlines of one connection, shared by the handler that sees its raw bytes (first in the pipeline) and the one
/// that sees its decoded requests. Both run on the connection's event loop.
final class ConnectionTimers {
    enum Phase { case idle, head, body, answering }

    let idle: TimeAmount
    let head: TimeAmount
    let body: TimeAmount
    /// How long the answer to a request whose body timed out may take before the connection closes without it.
    static let answerGrace: TimeAmount = .seconds(5)
    private(set) var phase = Phase.idle
    /// A body timed out: the connection closes once its 408 is written.
    private(set) var closeAfterAnswer = false
    private var timer: Scheduled<Void>?

    init(idle: TimeAmount, head: TimeAmount, body: TimeAmount) {
        self.idle = idle
        self.head = head
        self.body = body
    }

    /// Enters `phase` and starts its deadline (none while a request is being answered: the database has its own).
    /// Once a body timed out nothing changes: the connection closes after that answer, or at the grace period's end.
    func enter(_ phase: Phase, context: ChannelHandlerContext) {
        guard !closeAfterAnswer else { return }
        self.phase = phase
        timer?.cancel()
        timer = nil
        let limit: TimeAmount
        switch phase {
        case .idle: limit = idle
        case .head: limit = head
        case .body: limit = body
        case .answering: return
        }
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: limit) { [weak self] in
            guard let self, self.phase == phase else { return }
            self.timer = nil
            guard phase == .body else { return context.close(promise: nil) }
            // The body's reader must fail, not see a body that merely ended early; its 408 is written before the
            // connection closes (``RequestPartTimer``), or the connection closes without it after a grace period.
            self.phase = .answering
            self.closeAfterAnswer = true
            self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.answerGrace) { context.close(promise: nil) }
            context.fireErrorCaught(RequestBodyTimeout())
        }
    }

    func stop() {
        timer?.cancel()
        timer = nil
    }
}

/// First in the pipeline: the first raw byte of a request starts its head deadline.
final class RawByteTimer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let timers: ConnectionTimers

    init(timers: ConnectionTimers) { self.timers = timers }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if timers.phase == .idle { timers.enter(.head, context: context) }
        context.fireChannelRead(data)
    }
}

/// After the HTTP codec: a request's head ends its head deadline and starts its body deadline; its end stops the
/// clock until the answer is written, after which the connection is idle again.
final class RequestPartTimer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    let timers: ConnectionTimers
    /// Requests whose answer has not ended yet.
    private var inFlight = 0

    init(timers: ConnectionTimers) { self.timers = timers }

    func handlerAdded(context: ChannelHandlerContext) {
        // The raw-byte watcher goes first, before the HTTP decoder.
        try? context.pipeline.syncOperations.addHandler(RawByteTimer(timers: timers), position: .first)
        timers.enter(.idle, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) { timers.stop() }

    func channelInactive(context: ChannelHandlerContext) {
        timers.stop()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            inFlight += 1
            timers.enter(.body, context: context)
        case .body:
            break
        case .end:
            // Answered already (a refusal before the body was read): idle; else the clock stops until the answer.
            timers.enter(inFlight == 0 ? .idle : .answering, context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if timers.closeAfterAnswer, case .head(var response) = unwrapOutboundIn(data) {
            response.headerFields[.connection] = "close"
            return context.write(wrapOutboundOut(.head(response)), promise: promise)
        }
        if case .end = unwrapOutboundIn(data) {
            inFlight -= 1
            if timers.closeAfterAnswer {
                // The 408 of a body that timed out: written, then the connection closes.
                let written = promise ?? context.eventLoop.makePromise()
                context.writeAndFlush(data, promise: written)
                written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
                return
            }
            // Answered before its body was read (a refusal): the body deadline goes on.
            if inFlight == 0, timers.phase == .answering { timers.enter(.idle, context: context) }
        }
        context.write(data, promise: promise)
    }
}

/// Answers requests the HTTP parser refuses in the JSON envelope, where Hummingbird would send a bare 400: 431 when
/// the headers are too large, 400 otherwise. A parse error in the middle of a body fails the body's reader instead
/// (``MalformedRequest``), so that a truncated body is never taken for a whole one. Also refuses HTTP/1.0 requests
/// with `Transfer-Encoding`, which HTTP/1.0 does not have (RFC 9112 §6.1: treat the framing as faulty), and answers 501
/// to a transfer coding it does not implement (§6.1: anything but `chunked` alone).
final class MalformedRequestHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    private var readingBody = false
    private var inFlight = 0
    private var failed = false

    func handlerAdded(context: ChannelHandlerContext) {
        // The HTTP/1.0 check needs the request's version, which the conversion to HTTP types drops: it goes before it.
        if let codec = try? context.pipeline.syncOperations.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? context.pipeline.syncOperations.addHandler(FramingCheck(), position: .before(codec))
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        switch unwrapInboundIn(data) {
        case .head:
            readingBody = true
            inFlight += 1
        case .end:
            readingBody = false
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { inFlight -= 1 }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let parse: HTTPParserError
        var unknownCoding = false
        switch error {
        case let error as HTTPParserError: parse = error
        case let refused as FramingCheck.Refused:
            parse = .invalidConstant
            unknownCoding = refused == .unknownCoding
        default: return context.fireErrorCaught(error)
        }
        // Whatever the parser says after its first error is noise.
        guard !failed else { return }
        failed = true
        if readingBody {
            // A request is being served and its body broke: its reader fails; the connection closes after the answer.
            // A client that went away in the middle of its body looks like this too (an early end of input).
            context.fireErrorCaught(MalformedRequest(reason: parse == .invalidEOFState ? "the request body ended early" : "\(parse)"))
            return
        }
        if inFlight > 0 {
            // Answered already, the rest of its body is unreadable: nothing more to say.
            context.close(promise: nil)
            return
        }
        let tooLarge = parse == .headerOverflow
        let (status, envelope): (HTTPResponse.Status, String) =
            tooLarge
            ? (.requestHeaderFieldsTooLarge, #"{"error":"the request's headers are too large","error_code":"RequestHeaderFieldsTooLarge"}"#)
            : unknownCoding
                ? (.notImplemented, #"{"error":"the request's Transfer-Encoding is not implemented: send chunked alone","error_code":"NotImplemented"}"#)
                : (.badRequest, #"{"error":"the request is not valid HTTP/1.1","error_code":"BadRequest"}"#)
        let body = context.channel.allocator.buffer(string: envelope)
        let head = HTTPResponse(
            status: status,
            headerFields: [
                .contentType: "application/json", .contentLength: String(body.readableBytes), .connection: "close",
                HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            ]
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}

/// Before the conversion to HTTP types, a request's framing: an HTTP/1.0 request with `Transfer-Encoding` is refused
/// as malformed, and one whose transfer codings are anything but `chunked` alone as not implemented (nothing of either
/// goes on). The parser frames `gzip, chunked` by its last coding and would hand on the compressed bytes as the body.
final class FramingCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    enum Refused: Error {
        /// Faulty framing: `Transfer-Encoding` in HTTP/1.0, or `chunked` twice or not last (400).
        case faultyFraming
        /// A transfer coding other than `chunked` alone (501).
        case unknownCoding
    }
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data), let problem = Self.problem(head) {
            refused = true
            context.fireErrorCaught(problem)
            return
        }
        guard !refused else { return }
        context.fireChannelRead(data)
    }

    static func problem(_ head: HTTPRequestHead) -> Refused? {
        let codings = head.headers["transfer-encoding"]
        guard !codings.isEmpty else { return nil }
        if head.version.major == 1, head.version.minor == 0 { return .faultyFraming }
        let named = codings.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if named == ["chunked"] { return nil }
        // chunked twice, or not last, is faulty framing (RFC 9112 6.3: a sender must not), not a coding to implement.
        let chunked = named.filter { $0 == "chunked" }.count
        return chunked > 1 || (chunked == 1 && named.last != "chunked") ? .faultyFraming : .unknownCoding
    }
}

/// Past `server.maxConnections` the server stops accepting: new connections wait in the kernel's listen backlog until
/// one closes. Says so in the log once each time the limit is reached.
struct ConnectionLimit: AvailableConnectionsDelegate {
    let maximum: Int
    let logger: Logger
    private var count = 0
    private var full = false

    init(maximum: Int, logger: Logger) {
        self.maximum = maximum
        self.logger = logger
    }

    mutating func connectionOpened() {
        count += 1
        if count >= maximum, !full {
            full = true
            logger.warning(
                "connection limit reached: new connections wait until one closes", metadata: ["max_connections": "\(maximum)"]
            )
        }
    }

    mutating func connectionClosed() {
        count -= 1
        // A tenth below the limit before saying it again, so that a server at its limit does not log every connection.
        if full, count < maximum - max(1, maximum / 10) {
            full = false
            logger.notice("connections below the limit again", metadata: ["connections": "\(count)", "max_connections": "\(maximum)"])
        }
    }

    func isAcceptingNewConnections() -> Bool { count < maximum }
}

/// On the listening socket: when `accept` fails for want of file descriptors (EMFILE, ENFILE) or memory, stop
/// accepting for half a second. SwiftNIO leaves the socket registered for reading after such an error and epoll is
/// level-triggered, so without this the event loop retries `accept` in a tight loop at 100% CPU until a descriptor
/// frees up (NIO's `AcceptBackoffHandler` only delays reads that are never issued in this state).
final class AcceptFailurePause: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    let logger: Logger
    private var paused = false

    init(logger: Logger) { self.logger = logger }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? IOError, [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error.errnoCode), !paused {
            paused = true
            logger.warning(
                "cannot accept connections: out of file descriptors or memory; pausing accepts for 0.5 s",
                metadata: ["error": "\(error)"]
            )
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(500)) {
                self.paused = false
                context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
            }
        }
        context.fireErrorCaught(error)
    }
}

/// The process's soft limit on open files, raised to its hard limit (at most 1,048,576): each connection is a file.
enum FileLimit {
    /// Raises the soft limit and returns it.
    @discardableResult
    static func raise() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        let target = min(limit.rlim_max, 1_048_576)
        if limit.rlim_cur < target {
            var raised = limit
            raised.rlim_cur = target
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return Int(target) }
        }
        return Int(limit.rlim_cur)
    }

    /// The current soft limit.
    static var current: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(min(limit.rlim_cur, 1 << 30))
    }

    /// Connections the server takes when `server.maxConnections` is not set: the soft file limit less 256 descriptors
    /// for the database pool, mail, logs and files, at most 16,384, at least 32.
    static func defaultMaxConnections(softLimit: Int = current) -> Int {
        max(32, min(16_384, softLimit - 256))
    }
}

/// The descriptors of Swift concurrency's timers, opened when the server opens (`AuthServer.open`), before it takes
/// connections.
///
/// On Linux every `Task.sleep` is a libdispatch timer, and libdispatch opens its descriptors (an epoll instance, an
/// eventfd, a timerfd per clock) at the first timer on each clock — and when it cannot, traps with no message
/// (`SIGILL`) or leaves the sleep that asked never to end. A server whose connections have used every descriptor it
/// may open (a `server.maxConnections` above the process's limit, or a limit never raised) and whose first sleep on
/// some clock came only then would end there: a background service that started late under load did, once, in the
/// fault suite. One short sleep on each clock Swift's sleeps use (continuous and suspending; the server's own sleeps
/// are on the continuous one) opens them while descriptors are free; they stay open for the life of the process.
/// (Checked by hand with a small program that uses up its descriptors and then sleeps: its first `Task.sleep` on a
/// clock trapped or never returned in most runs; after these sleeps, 30 of 30 runs slept and woke on both clocks.)
enum TimerDescriptors {
    static func open() async {
        try? await Task.sleep(for: .milliseconds(1), clock: .continuous)
        try? await Task.sleep(for: .milliseconds(1), clock: .suspending)
    }
}

extension Connections {
    /// What a request whose connection or framing failed under it answers (each envelope renders it): a body that
    /// came too slowly 408, a malformed or abandoned one 400. Never 500, and logged at debug only: the client, not the
    /// server, is at fault, and a client that went away will not read the answer anyway.
    static func clientFault(_ error: any Error) -> (status: HTTPResponse.Status, message: String)? {
        switch error {
        case is RequestBodyTimeout:
            (.requestTimeout, "the request body did not arrive in time")
        case let error as MalformedRequest:
            (.badRequest, "the request body is malformed: \(error.reason)")
        case is HTTPParserError:
            (.badRequest, "the request is not valid HTTP/1.1")
        case is IOError, is ChannelError:
            (.badRequest, "the connection ended before the request body did")
        default:
            nil
        }
    }
}
