import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request as the SDK sends it.
public struct TransportRequest: Sendable, Hashable {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    public var method: String
    /// Where it goes.
    public var url: URL
    /// Its headers, by name.
    public var headers: [String: String]
    /// Its body, if any.
    public var body: Data?
    /// Seconds before giving up.
    public var timeout: TimeInterval

    /// A request with these parts.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil, timeout: TimeInterval = 60) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// One HTTP response.
public struct TransportResponse: Sendable, Hashable {
    /// The HTTP status.
    public var statusCode: Int
    /// Header names lowercased.
    public var headers: [String: String]
    /// The body (empty when there was none).
    public var body: Data

    /// A response with these parts; header names are lowercased.
    public init(statusCode: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.statusCode = statusCode
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }
}

/// Sends HTTP requests. The default is ``URLSessionTransport``; inject your own to add headers, log, or test.
public protocol NetworkTransport: Sendable {
    /// Sends the request. Throws only when no HTTP answer arrived; any status is a response.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}

/// ``NetworkTransport`` over `URLSession`.
public struct URLSessionTransport: NetworkTransport {
    private let session: URLSession

    /// A transport over `session`.
    public init(session: URLSession = .shared) { self.session = session }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.timeoutInterval = request.timeout
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else { throw ClientError.transport("not an HTTP response") }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return TransportResponse(statusCode: http.statusCode, headers: headers, body: data)
    }
}
