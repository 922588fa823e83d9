import AsyncHTTPClient
import Foundation
import GatehouseWire
import NIOCore
import NIOHTTP1

/// An HTTP request Gatehouse makes: a JWKS download, a token exchange, a Graph API call, a webhook.
struct OutboundRequest: Sendable {
    var method: String = "GET"
    var url: String
    var headers: [(String, String)] = []
    var body: Data? = nil
    /// The whole exchange, connecting included.
    var timeout: TimeInterval = 5
}

struct OutboundResponse: Sendable {
    var status: Int
    /// Header names lowercased.
    var headers: [String: String]
    var body: Data

    /// The body as a JSON object, or nil.
    var jsonObject: [String: JSONValue]? {
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: body) else { return nil }
        return object
    }
}

/// Why an outbound request got no usable answer. Names the host, never the query (which may carry tokens).
struct OutboundError: Error, Hashable, Sendable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Makes outbound HTTP requests. One implementation over AsyncHTTPClient; tests use the same one against servers on
/// loopback.
protocol OutboundHTTP: Sendable {
    func send(_ request: OutboundRequest) async throws(OutboundError) -> OutboundResponse
}

/// ``OutboundHTTP`` over AsyncHTTPClient's shared client, with a deadline per request and a cap on answer size.
struct HTTPClientOutbound: OutboundHTTP {
    var client: HTTPClient = .shared
    /// Answers larger than this are refused (a JWKS or a token answer is a few KiB).
    var maxResponseBytes = 1 << 20

    func send(_ request: OutboundRequest) async throws(OutboundError) -> OutboundResponse {
        let host = URL(string: request.url)?.host ?? "the server"
        var outbound = HTTPClientRequest(url: request.url)
        outbound.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outbound.headers.add(name: name, value: value) }
        if let body = request.body { outbound.body = .bytes(ByteBuffer(bytes: body)) }
        do {
            let response = try await client.execute(outbound, timeout: .nanoseconds(Int64(request.timeout * 1_000_000_000)))
            let body = try await response.body.collect(upTo: maxResponseBytes)
            var headers: [String: String] = [:]
            for header in response.headers { headers[header.name.lowercased()] = header.value }
            return OutboundResponse(status: Int(response.status.code), headers: headers, body: Data(body.readableBytesView))
        } catch is NIOTooManyBytesError {
            throw OutboundError("\(host) answered with more than \(maxResponseBytes) bytes")
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            throw OutboundError("\(host) did not answer within \(Int(request.timeout)) s")
        } catch {
            throw OutboundError("cannot reach \(host): \(Self.reason(error))")
        }
    }

    /// A short reason. Connection errors name at most the host and port, never the URL (whose query may carry a
    /// token).
    private static func reason(_ error: any Error) -> String {
        if error is HTTPClientError || error is IOError || String(describing: type(of: error)).contains("ConnectionError") {
            return String(String(describing: error).prefix(200))
        }
        return String(describing: type(of: error))
    }
}
