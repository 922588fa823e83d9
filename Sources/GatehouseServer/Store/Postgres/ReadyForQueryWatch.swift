import NIOConcurrencyHelpers
import NIOCore

/// Watches a PostgreSQL connection's messages for the one postgres-nio does not report: `ReadyForQuery`, which says
/// that a statement sent on its own has committed.
///
/// Why: in the extended query protocol a statement outside `BEGIN`…`COMMIT` runs in an implicit transaction that
/// PostgreSQL commits when it reaches the `Sync` after the statement — after it has sent the statement's
/// `CommandComplete`. postgres-nio (1.33.2) answers the query at `CommandComplete`. A server that goes away in
/// between (a backend terminated, `pg_ctl stop`, a crash) or that fails the commit (a deferred constraint) rolls the
/// statement back after the caller was told it succeeded: a registration answered 201 and never written, a single-use
/// token spent and then not. libpq, rust-postgres and others wait for `ReadyForQuery` for this reason.
///
/// So ``PostgresDatabase`` asks ``settled()`` after every write it runs on its own, before it answers: the
/// connection's cycles (one per `Sync` or simple `Query` sent) have all ended with `ReadyForQuery`, and whether the
/// last one carried an `ErrorResponse` (then it rolled back), or the connection closed before its end (then whether
/// it committed is unknown). In the usual case the `ReadyForQuery` arrived in the same read as the `CommandComplete`,
/// and the answer is there at once: one lock, no wait.
///
/// It reads only the messages' frames (a type byte and a 32-bit length), both ways, and keeps the body of an
/// `ErrorResponse` only. It sits where the bytes are plain: right after the TLS handler, or first in the pipeline
/// without TLS. The pool adds it as the connection's start-up ends, at the start-up's `ReadyForQuery`: everything
/// written has gone out whole, and the server sends nothing after that `ReadyForQuery` unasked (its `ParameterStatus`
/// messages come before one; notifications need a `LISTEN`), so it starts at a message's start both ways. Should it
/// ever lose its place — a length below four, or more `ReadyForQuery` messages than requests — it closes the
/// connection, which the pool replaces, rather than acknowledge a write before its commit.
///
/// It counts what Gatehouse's statements send: each `Sync` (and simple `Query`) is answered by one `ReadyForQuery`.
/// postgres-nio's `COPY FROM` sends a `Sync` the server ignores during the copy, and `LISTEN` keeps the connection;
/// Gatehouse uses neither, and must not through this pool without counting them here.
final class ReadyForQueryWatch: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// An `ErrorResponse` the server sent, by the fields that matter here.
    struct ServerError: Error, Sendable, Equatable, CustomStringConvertible {
        /// `ERROR`, `FATAL` or `PANIC` (the field that is never translated, `V`).
        var severity: String
        var sqlState: String
        var message: String
        var description: String { "\(severity) \(sqlState): \(message)" }
    }

    /// How the statements sent on the connection ended.
    enum Outcome: Sendable, Equatable {
        /// Every cycle ended with `ReadyForQuery`; the last one failed with this error, if any.
        case ready(ServerError?)
        /// The connection closed before the last cycle ended, after this error, if the server sent one.
        case closed(ServerError?)
    }

    private struct State {
        /// `Sync` and simple `Query` messages sent: each is answered by one `ReadyForQuery`.
        var requested = 0
        var answered = 0
        /// The first error since the last `ReadyForQuery`, and the error of the cycle that last ended.
        var cycleError: ServerError?
        var lastCycleError: ServerError?
        var closed = false
        var waiters: [CheckedContinuation<Outcome, Never>] = []

        var outcome: Outcome? {
            if answered >= requested { return .ready(lastCycleError) }
            if closed { return .closed(cycleError) }
            return nil
        }
    }

    private let state = NIOLockedValueBox(State())
    // Read and written on the channel's event loop only.
    private var inbound = FrameReader()
    private var outbound = FrameReader()

    /// The outcome if every cycle sent so far has ended or the connection has closed, else nil.
    var outcome: Outcome? { state.withLockedValue { $0.outcome } }

    /// How many callers of ``settled()`` wait (for tests).
    var waiting: Int { state.withLockedValue { $0.waiters.count } }

    /// The outcome once every cycle sent so far has ended or the connection has closed; at once when they have.
    func settled() async -> Outcome {
        if let outcome { return outcome }
        return await withCheckedContinuation { continuation in
            let now = state.withLockedValue { state -> Outcome? in
                if let outcome = state.outcome { return outcome }
                state.waiters.append(continuation)
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        var surplus = false
        let inStep = inbound.read(buffer, keeping: { $0 == UInt8(ascii: "E") }) { type, body in
            switch type {
            case UInt8(ascii: "E"):
                let error = Self.error(from: body ?? [])
                state.withLockedValue { if $0.cycleError == nil { $0.cycleError = error } }
            case UInt8(ascii: "Z"):
                update { state in
                    guard state.answered < state.requested else {
                        // An answer to nothing sent: the count cannot be trusted any more.
                        surplus = true
                        return
                    }
                    state.answered += 1
                    state.lastCycleError = state.cycleError
                    state.cycleError = nil
                }
            default:
                break
            }
        }
        context.fireChannelRead(data)
        if !inStep || surplus { lostStep(context) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        var cycles = 0
        // Counted before the bytes leave: the answer to them cannot come first.
        let inStep = outbound.read(buffer, keeping: { _ in false }) { type, _ in
            if type == UInt8(ascii: "S") || type == UInt8(ascii: "Q") { cycles += 1 }
        }
        if cycles > 0 { state.withLockedValue { $0.requested += cycles } }
        context.write(data, promise: promise)
        if !inStep { lostStep(context) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        update { $0.closed = true }
        context.fireChannelInactive()
    }

    /// Changes the state, and answers the callers waiting in ``settled()`` if that settles it.
    private func update(_ change: (inout State) -> Void) {
        let (waiters, outcome) = state.withLockedValue { state -> ([CheckedContinuation<Outcome, Never>], Outcome?) in
            change(&state)
            guard let outcome = state.outcome else { return ([], nil) }
            defer { state.waiters = [] }
            return (state.waiters, outcome)
        }
        if let outcome { for waiter in waiters { waiter.resume(returning: outcome) } }
    }

    private func lostStep(_ context: ChannelHandlerContext) {
        context.close(promise: nil)
    }

    /// The fields of an `ErrorResponse`'s body: pairs of a field type and a NUL-terminated string, then a NUL.
    static func error(from body: [UInt8]) -> ServerError {
        var error = ServerError(severity: "", sqlState: "", message: "")
        var index = 0
        while index < body.count, body[index] != 0 {
            let field = body[index]
            let start = index + 1
            let end = body[start...].firstIndex(of: 0) ?? body.count
            let value = String(decoding: body[start..<end], as: UTF8.self)
            switch field {
            case UInt8(ascii: "V"): error.severity = value
            case UInt8(ascii: "S") where error.severity.isEmpty: error.severity = value
            case UInt8(ascii: "C"): error.sqlState = value
            case UInt8(ascii: "M"): error.message = value
            default: break
            }
            index = end + 1
        }
        return error
    }
}

/// Splits a stream of PostgreSQL protocol messages (a type byte, then a big-endian 32-bit length that counts itself
/// and the body) into messages, however the bytes are cut into reads.
struct FrameReader {
    /// The bodies kept are cut at this length (an `ErrorResponse`'s fields that matter come first).
    static let longestKeptBody = 8192

    /// The bytes of a header cut by a read's end, and how many.
    private var partial: UInt64 = 0
    private var partialCount = 0
    private var inBody = false
    private var type: UInt8 = 0
    private var remaining = 0
    private var body: [UInt8]?

    /// Calls `message` for every message that ends in `buffer`, with its type and, if `keeping` says so for its type,
    /// its body. False when a length is impossible (below four): the stream cannot be followed further.
    mutating func read(_ buffer: ByteBuffer, keeping: (UInt8) -> Bool, _ message: (UInt8, [UInt8]?) -> Void) -> Bool {
        buffer.withUnsafeReadableBytes { bytes in
            var index = 0
            while index < bytes.count {
                if !inBody {
                    // A header is five bytes: read at once when the read holds them all, else gathered across reads.
                    let length: Int
                    if partialCount == 0, bytes.count - index >= 5 {
                        type = bytes[index]
                        length = Int(bytes[index + 1]) << 24 | Int(bytes[index + 2]) << 16 | Int(bytes[index + 3]) << 8 | Int(bytes[index + 4])
                        index += 5
                    } else {
                        partial = partial << 8 | UInt64(bytes[index])
                        partialCount += 1
                        index += 1
                        guard partialCount == 5 else { continue }
                        type = UInt8(truncatingIfNeeded: partial >> 32)
                        length = Int(UInt32(truncatingIfNeeded: partial))
                        (partial, partialCount) = (0, 0)
                    }
                    guard length >= 4 else { return false }
                    remaining = length - 4
                    body = keeping(type) ? [] : nil
                    if remaining == 0 {
                        message(type, body)
                        body = nil
                    } else {
                        inBody = true
                    }
                } else {
                    let take = min(remaining, bytes.count - index)
                    if let kept = body?.count, kept < Self.longestKeptBody {
                        body?.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + min(take, Self.longestKeptBody - kept))]))
                    }
                    index += take
                    remaining -= take
                    if remaining == 0 {
                        inBody = false
                        message(type, body)
                        body = nil
                    }
                }
            }
            return true
        }
    }
}
