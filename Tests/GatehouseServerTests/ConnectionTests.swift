import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import Testing

/// Below the router: requests the HTTP parser refuses get the JSON envelope, and the connection deadlines close slow and
/// idle clients. The malformed requests go byte for byte over a real socket to a live server; the deadlines run on an
/// embedded event loop whose clock the test advances.
@Suite struct ConnectionTests {
    /// Sends `bytes` on a fresh connection and returns everything the server sends until it closes.
    static func exchange(port: Int, _ bytes: String, within limit: Duration = .seconds(30)) async throws -> String {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
        }
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                try await channel.executeThenClose { inbound, outbound in
                    try await outbound.write(ByteBuffer(string: bytes))
                    var received = ""
                    for try await chunk in inbound { received += String(buffer: chunk) }
                    return received
                }
            }
            group.addTask {
                try await Task.sleep(for: limit)
                channel.channel.close(promise: nil)
                return nil
            }
            defer { group.cancelAll() }
            guard let answer = try await group.next(), let answer else { throw SMTPTestSetupError(description: "the server did not close the connection") }
            return answer
        }
    }

    static func body(of answer: String) -> String { answer.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n") }

    @Test func requestsTheParserRefusesGetTheEnvelope() async throws {
        let gatehouse = try await AuthServer.open(configuration: testConfiguration(), logger: quietLogger)
        do {
            try await gatehouse.makeApplication().test(.live) { client in
                let port = try #require(client.port)
                // Headers past the decoder's limit: 431, in JSON.
                let huge = try await Self.exchange(port: port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 100_000))\r\n\r\n")
                #expect(huge.hasPrefix("HTTP/1.1 431"))
                #expect(huge.lowercased().contains("content-type: application/json"))
                #expect(huge.lowercased().contains("x-content-type-options: nosniff"))
                let envelope = try JSONDecoder().decode(ClientAPIErrorBody.self, from: Data(Self.body(of: huge).utf8))
                #expect(envelope.errorCode?.rawValue == "RequestHeaderFieldsTooLarge")

                // Garbage instead of a request line, and a chunk size that overflows: 400 in JSON, never 500.
                for bad in [
                    "NOT HTTP AT ALL\r\n\r\n",
                    "POST /api/client/v2.0/app/test-app/auth/providers/local-userpass/register HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n{}\r\n0\r\n\r\n",
                    // HTTP/1.0 has no Transfer-Encoding: a framing proxies may read differently.
                    "POST /api/client/v2.0/app/test-app/auth/providers/local-userpass/register HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                ] {
                    let answer = try await Self.exchange(port: port, bad)
                    #expect(answer.hasPrefix("HTTP/1.1 400"), "\(bad.prefix(60)) → \(answer.prefix(80))")
                    #expect(answer.lowercased().contains("content-type: application/json"), "\(bad.prefix(60))")
                    #expect(!answer.contains(" 500 "))
                }

                // A transfer coding other than chunked alone: 501 in JSON (chunked twice, faulty framing: 400),
                // and nothing of the request is served.
                for (coding, status) in [("gzip, chunked", 501), ("x-custom, chunked", 501), ("chunked, chunked", 400), ("chunked, gzip", 400), ("identity", 501)] {
                    let request = "POST /api/client/v2.0/app/test-app/auth/providers/local-userpass/register HTTP/1.1\r\nHost: x\r\n"
                        + "Transfer-Encoding: \(coding)\r\nContent-Type: application/json\r\n\r\n"
                        + "30\r\n{\"email\":\"te@example.com\",\"password\":\"pw123456\"}\r\n0\r\n\r\n"
                    let answer = try await Self.exchange(port: port, request)
                    #expect(answer.hasPrefix("HTTP/1.1 \(status)"), "\(coding) → \(answer.prefix(80))")
                    #expect(answer.lowercased().contains("content-type: application/json"), "\(coding)")
                }
                let chunked = try await Self.exchange(
                    port: port,
                    "POST /api/client/v2.0/app/test-app/auth/providers/local-userpass/register HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n"
                        + "Content-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
                )
                #expect(chunked.hasPrefix("HTTP/1.1 501"), "\(chunked.prefix(80))")
                #expect(try JSONDecoder().decode(ClientAPIErrorBody.self, from: Data(Self.body(of: chunked).utf8)).errorCode?.rawValue == "NotImplemented")
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "te@example.com") == nil)
                // chunked alone, in any case, is served.
                let served = try await Self.exchange(
                    port: port,
                    "POST /api/client/v2.0/app/test-app/auth/providers/local-userpass/register HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n"
                        + "Content-Type: application/json\r\nConnection: close\r\n\r\n30\r\n{\"email\":\"te@example.com\",\"password\":\"pw123456\"}\r\n0\r\n\r\n"
                )
                #expect(served.hasPrefix("HTTP/1.1 201"), "\(served.prefix(200))")

                // A client that sends half its body and goes away: the request fails as the client's fault and
                // nothing is written.
                let half = "POST /api/client/v2.0/app/test-app/auth/providers/local-userpass/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"email\":\"half@example.com\""
                let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get()
                try await channel.writeAndFlush(ByteBuffer(string: half))
                try await channel.close()
                // The server still serves, and the half request left no account.
                #expect(try await client.call("/healthz", .get).status == .ok)
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "half@example.com") == nil)
            }
            try await gatehouse.close()
        } catch {
            try? await gatehouse.close()
            throw error
        }
    }

    @Test func abandonedAndMalformedBodiesAreTheClientsFaultNot500() {
        #expect(Connections.clientFault(RequestBodyTimeout())?.status == .requestTimeout)
        #expect(Connections.clientFault(MalformedRequest(reason: "x"))?.status == .badRequest)
        #expect(Connections.clientFault(HTTPParserError.invalidEOFState)?.status == .badRequest)
        #expect(Connections.clientFault(IOError(errnoCode: ECONNRESET, reason: "read"))?.status == .badRequest)
        #expect(Connections.clientFault(StoreError.unavailable("x")) == nil)
    }

    // MARK: Deadlines, on an embedded event loop

    /// A connection's pipeline as the server builds it, on an embedded channel.
    static func connection(idle: Int64 = 60, head: Int64 = 10, body: Int64 = 30) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        var settings = ServerSettings()
        (settings.idleTimeout, settings.headerTimeout, settings.bodyTimeout) = (Int(idle), Int(head), Int(body))
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: false)
        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try channel.pipeline.syncOperations.addHandlers(Connections.handlers(settings))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    @Test func aClientThatDripsItsHeadIsClosedAtTheHeadDeadline() throws {
        let channel = try Self.connection(idle: 60, head: 10)
        // Nine bytes, then one more every 5 s: each byte would reset an idle timer, not this one.
        try channel.writeInbound(ByteBuffer(string: "GET /heal"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        try channel.writeInbound(ByteBuffer(string: "t"))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(!channel.isActive)
    }

    @Test func anIdleConnectionIsClosedAtTheIdleDeadlineAndAQuietOneWithin() throws {
        let channel = try Self.connection(idle: 60, head: 10)
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
    }

    @Test func aBodyThatStallsFailsTheRequestAtTheBodyDeadline() throws {
        let channel = try Self.connection(idle: 60, head: 10, body: 30)
        try channel.writeInbound(ByteBuffer(string: "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"))
        // The head arrived: the body has 30 s whatever trickles in.
        channel.embeddedEventLoop.advanceTime(by: .seconds(20))
        try channel.writeInbound(ByteBuffer(string: "67"))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        // The reader of the body sees the timeout as an error (not a body that merely ended); its answer (the 408) is
        // written, and then the connection closes.
        #expect(throws: RequestBodyTimeout.self) { try channel.throwIfErrorCaught() }
        #expect(channel.isActive)
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .requestTimeout, headerFields: [.contentLength: "0"])))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: written).hasPrefix("HTTP/1.1 408"))
        #expect(String(buffer: written).lowercased().contains("connection: close"))
        #expect(!channel.isActive)
    }

    /// A request whose body timed out and whose answer never comes does not hold the connection: it closes after the
    /// grace period, even if the rest of the body arrives meanwhile.
    @Test func aBodyThatStallsClosesTheConnectionEvenWithoutAnAnswer() throws {
        let channel = try Self.connection(idle: 60, head: 10, body: 30)
        try channel.writeInbound(ByteBuffer(string: "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(30))
        #expect(throws: RequestBodyTimeout.self) { try channel.throwIfErrorCaught() }
        // The rest of the body, arriving late, changes nothing.
        try channel.writeInbound(ByteBuffer(string: "67890"))
        channel.embeddedEventLoop.advanceTime(by: ConnectionTimers.answerGrace - .seconds(1))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
    }

    @Test func whileARequestIsAnsweredNoDeadlineRunsAndAfterItTheIdleOneDoes() throws {
        let channel = try Self.connection(idle: 60, head: 10, body: 30)
        try channel.writeInbound(ByteBuffer(string: "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"))
        // The handler takes its time (the database has deadlines of its own): the connection stays.
        channel.embeddedEventLoop.advanceTime(by: .seconds(120))
        #expect(channel.isActive)
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: "0"])))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
    }

    @Test func theDefaultConnectionCapStaysBelowTheFileLimit() {
        #expect(FileLimit.defaultMaxConnections(softLimit: 1024) == 768)
        #expect(FileLimit.defaultMaxConnections(softLimit: 100) == 32)
        #expect(FileLimit.defaultMaxConnections(softLimit: 1_048_576) == 16_384)
        // Raising never lowers it.
        let before = FileLimit.current
        #expect(FileLimit.raise() >= before)
    }
}
