import Foundation
import GatehouseWire

/// An HTTP request Gatehouse makes: a JWKS download, a token exchange, a Graph API call, a webhook.
package struct OutboundRequest: Sendable {
    package var method: String = "GET"
    package var url: String
    package var headers: [(String, String)] = []
    package var body: Data? = nil
    /// The whole exchange, connecting included.
    package var timeout: TimeInterval = 5

    package init(
        method: String = "GET", url: String, headers: [(String, String)] = [], body: Data? = nil,
        timeout: TimeInterval = 5
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

package struct OutboundResponse: Sendable {
    package var status: Int
    /// Header names lowercased.
    package var headers: [String: String]
    package var body: Data

    /// The body as a JSON object, or nil.
    package var jsonObject: [String: JSONValue]? {
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: body) else { return nil }
        return object
    }

    package init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why an outbound request got no usable answer. Names the host, never the query (which may carry tokens).
package struct OutboundError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Makes outbound HTTP requests. One implementation over AsyncHTTPClient; tests use the same one against servers on
/// loopback.
package protocol OutboundHTTP: Sendable {
    func send(_ request: OutboundRequest) async throws(OutboundError) -> OutboundResponse
}

