import Foundation
import GatehouseDomain
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Request context of every Gatehouse route: request bodies are capped at 64 KiB.
struct GatehouseRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The address of the connection's peer.
    var peerIP: String?
    /// Who is asking, as ``RequestOriginMiddleware`` found it: what the routes hand to the domain.
    var origin = RequestOrigin()

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerIP = source.channel.remoteAddress?.ipAddress
    }

    /// The largest request body accepted; larger ones answer 413.
    static let maxBodySize = 64 * 1024
    var maxUploadSize: Int { Self.maxBodySize }
}

/// JSON responses with `Content-Type: application/json` exactly: Realm clients compare the header verbatim.
enum JSONResponse {
    static let contentType = "application/json"

    static func make(_ value: some Encodable) throws -> Response {
        try make(.ok, value)
    }

    static func make(_ status: HTTPResponse.Status, _ value: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return make(status, json: try encoder.encode(value))
    }

    /// A JSON body written by the caller (``JSONText``), for answers on hot paths.
    static func make(_ status: HTTPResponse.Status, json bytes: some Sequence<UInt8>) -> Response {
        Response(
            status: status,
            headers: [.contentType: contentType, .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    /// A success with an empty JSON object for a body (routes whose answer clients ignore).
    static func empty(_ status: HTTPResponse.Status = .ok) throws -> Response {
        try make(status, [String: String]())
    }

    static func noContent() -> Response {
        Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }
}


/// Sets the context's ``GatehouseRequestContext/origin`` for the rest of the request: the client's address (the
/// peer's, or the last entry of the configured proxy header) and its user agent.
struct RequestOriginMiddleware: RouterMiddleware {
    typealias Context = GatehouseRequestContext
    /// `server.clientIPHeader`.
    let clientIPHeader: HTTPField.Name?
    /// `server.ipv6PrefixLength`: the network an IPv6 client is counted by (``RequestOrigin/network``).
    var ipv6PrefixLength = ClientNetwork.defaultIPv6PrefixLength

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var ip = context.peerIP
        if let clientIPHeader, let forwarded = request.headers[values: clientIPHeader].last {
            let last = forwarded.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            if !last.isEmpty, last.count <= 64 { ip = last }
        }
        var context = context
        context.origin = RequestOrigin(
            ip: ip, userAgent: request.headers[.userAgent].map { $0.utf8.count <= 256 ? $0 : String($0.prefix(256)) }, ipv6PrefixLength: ipv6PrefixLength
        )
        return try await next(request, context)
    }
}
