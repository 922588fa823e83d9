import NIOCore
import NIOEmbedded
import Testing

@testable import GatehouseServer

/// ``ReadyForQueryWatch`` on the PostgreSQL protocol's bytes as postgres-nio writes and the server answers them,
/// cut into reads anywhere: a write counts as committed only once its cycle's `ReadyForQuery` came without an error.
@Suite struct ReadyForQueryWatchTests {
    /// A protocol message: its type, its length (counting itself), its body.
    static func message(_ type: Character, _ body: [UInt8] = []) -> [UInt8] {
        let length = UInt32(body.count + 4)
        return [type.asciiValue!] + withUnsafeBytes(of: length.bigEndian, Array.init) + body
    }

    static func text(_ string: String) -> [UInt8] { Array(string.utf8) + [0] }

    /// What postgres-nio sends for a statement with one value: Parse, Bind, Describe, Execute, Sync.
    static let statement = message("P", text("") + text("INSERT INTO t VALUES ($1)") + [0, 0])
        + message("B", text("") + text("") + [0, 0, 0, 1, 0, 0, 0, 1, 0x31, 0, 0]) + message("D", [UInt8(ascii: "P")] + text(""))
        + message("E", text("") + [0, 0, 0, 0]) + message("S")
    static let commandComplete = message("1") + message("2") + message("n") + message("C", text("INSERT 0 1"))
    static let ready = message("Z", [UInt8(ascii: "I")])
    static func error(_ severity: String, _ code: String, _ text: String) -> [UInt8] {
        message("E", [UInt8(ascii: "S")] + Self.text(severity) + [UInt8(ascii: "V")] + Self.text(severity)
            + [UInt8(ascii: "C")] + Self.text(code) + [UInt8(ascii: "M")] + Self.text(text) + [0])
    }

    private func connected() async throws -> (EmbeddedChannel, ReadyForQueryWatch) {
        let watch = ReadyForQueryWatch()
        let channel = EmbeddedChannel(handler: watch)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 5432)).get()
        return (channel, watch)
    }

    /// A connection whose statement has been sent and reported complete, its ReadyForQuery not yet come: where
    /// postgres-nio answers the query.
    private func completedStatement() async throws -> (EmbeddedChannel, ReadyForQueryWatch) {
        let (channel, watch) = try await connected()
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        try receive(Self.commandComplete, in: 4, channel)
        return (channel, watch)
    }

    /// A caller of ``ReadyForQueryWatch/settled()``, once it waits.
    private func waitingCaller(_ watch: ReadyForQueryWatch) async throws -> Task<ReadyForQueryWatch.Outcome, Never> {
        #expect(watch.outcome == nil, "nothing to wait for")
        let caller = Task { await watch.settled() }
        for _ in 0..<100_000 where watch.waiting == 0 { await Task.yield() }
        try #require(watch.waiting == 1, "the caller did not wait")
        return caller
    }

    /// Feeds `bytes` in pieces of `size`.
    private func receive(_ bytes: [UInt8], in size: Int, _ channel: EmbeddedChannel) throws {
        for start in stride(from: 0, to: bytes.count, by: size) {
            try channel.writeInbound(ByteBuffer(bytes: bytes[start..<min(start + size, bytes.count)]))
        }
    }

    @Test(arguments: [1, 2, 3, 7, 1000])
    func aStatementSettlesAtItsReadyForQueryHoweverTheBytesAreCut(size: Int) async throws {
        let (channel, watch) = try await connected()
        #expect(watch.outcome == .ready(nil), "nothing sent: nothing to wait for")
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        #expect(watch.outcome == nil)
        // The CommandComplete, where postgres-nio answers the query, and the last byte before the ReadyForQuery's end.
        let answer = Self.commandComplete + Self.ready
        try receive(Array(answer.dropLast()), in: size, channel)
        #expect(watch.outcome == nil, "not committed before its ReadyForQuery has come whole")
        try receive(Array(answer.suffix(1)), in: size, channel)
        #expect(watch.outcome == .ready(nil))
        _ = try channel.finish()
    }

    @Test func anErrorAfterTheCommandCompleteIsTheStatementsOutcome() async throws {
        let (channel, watch) = try await connected()
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        // A deferred unique constraint fails at the commit, after the statement was reported complete.
        try receive(Self.commandComplete + Self.error("ERROR", "23505", "duplicate key value") + Self.ready, in: 5, channel)
        #expect(watch.outcome == .ready(.init(severity: "ERROR", sqlState: "23505", message: "duplicate key value")))
        // The next statement's cycle starts clean.
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        try receive(Self.commandComplete + Self.ready, in: 100, channel)
        #expect(watch.outcome == .ready(nil))
        _ = try channel.finish()
    }

    @Test func aConnectionClosedBeforeTheReadyForQuerySaysWhatItKnows() async throws {
        // Terminated before the commit: the session's FATAL error came, then the close.
        var (channel, watch) = try await connected()
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        try receive(Self.commandComplete + Self.error("FATAL", "57P01", "terminating connection due to administrator command"), in: 9, channel)
        #expect(watch.outcome == nil)
        try await channel.close().get()
        #expect(watch.outcome == .closed(.init(severity: "FATAL", sqlState: "57P01", message: "terminating connection due to administrator command")))

        // Gone without a word (a crash, `pg_ctl stop -m immediate`): unknown.
        (channel, watch) = try await completedStatement()
        try await channel.close().get()
        #expect(watch.outcome == .closed(nil))

        // Closed after the ReadyForQuery: committed.
        (channel, watch) = try await completedStatement()
        try receive(Self.ready, in: 4, channel)
        try await channel.close().get()
        #expect(watch.outcome == .ready(nil))
    }

    /// A connection comes back to the pool when its last statement's CommandComplete has come; the next statement may
    /// be sent before the previous ReadyForQuery arrives, and its outcome is its own cycle's, not the one before.
    @Test func anEarlierCycleStillOpenIsWaitedForAndItsErrorIsNotTheStatements() async throws {
        let (channel, watch) = try await completedStatement()
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        try receive(Self.error("ERROR", "40001", "could not serialize") + Self.ready, in: 100, channel)
        #expect(watch.outcome == nil, "one cycle of two has ended")
        try receive(Self.commandComplete + Self.ready, in: 100, channel)
        #expect(watch.outcome == .ready(nil))
        _ = try channel.finish()
    }

    @Test func aCallerWaitingIsAnsweredWhenTheReadyForQueryComes() async throws {
        let (channel, watch) = try await completedStatement()
        let waiter = try await waitingCaller(watch)
        try receive(Self.ready, in: 100, channel)
        #expect(await waiter.value == .ready(nil))
        _ = try channel.finish()
    }

    /// The work deadline ends a statement whose server stopped answering by closing its connection: a caller waiting
    /// for the commit is answered by the close.
    @Test func aCallerWaitingIsAnsweredWhenTheConnectionCloses() async throws {
        let (channel, watch) = try await completedStatement()
        let waiter = try await waitingCaller(watch)
        try await channel.close().get()
        #expect(await waiter.value == .closed(nil))
    }

    /// What a client chose (an address, a name) comes back inside rows: bytes there that look like a ReadyForQuery or
    /// an ErrorResponse are a value, never a message, however the reads cut them.
    @Test(arguments: [1, 3, 64])
    func messagesInsideARowAreNotCounted(size: Int) async throws {
        let (channel, watch) = try await connected()
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        let forged = Self.ready + Self.error("ERROR", "23505", "forged") + Self.ready
        let row = Self.message("D", [0, 1] + withUnsafeBytes(of: UInt32(forged.count).bigEndian, Array.init) + forged)
        try receive(Self.message("1") + Self.message("2") + Self.message("T", [0, 0]) + row, in: size, channel)
        #expect(watch.outcome == nil, "a ReadyForQuery inside a row ended the cycle")
        #expect(channel.isActive)
        try receive(Self.message("C", Self.text("INSERT 0 1")) + Self.ready, in: size, channel)
        #expect(watch.outcome == .ready(nil))
        _ = try channel.finish()
    }

    @Test func aReadyForQueryNothingAskedForClosesTheConnection() async throws {
        let (channel, watch) = try await completedStatement()
        try receive(Self.ready, in: 100, channel)
        #expect(channel.isActive)
        // One more than was asked for: the counts no longer say which cycle is whose.
        try receive(Self.ready, in: 100, channel)
        #expect(!channel.isActive)
        #expect(watch.outcome == .ready(nil), "what was answered before stays answered")
    }

    @Test func aFrameItCannotReadClosesTheConnection() async throws {
        let (channel, watch) = try await connected()
        try channel.writeOutbound(ByteBuffer(bytes: Self.statement))
        // A length of two cannot be: the watch has lost its place in the stream.
        try channel.writeInbound(ByteBuffer(bytes: [UInt8(ascii: "C"), 0, 0, 0, 2]))
        #expect(!channel.isActive)
        #expect(watch.outcome == .closed(nil))
    }
}
