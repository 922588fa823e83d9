import Foundation
import Hummingbird
import Logging
import NIOCore

/// Request context of every Gatehouse route: request bodies are capped at 64 KiB.
struct GatehouseRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
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
        let data = try encoder.encode(value)
        return Response(
            status: status,
            headers: [.contentType: contentType, .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
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

