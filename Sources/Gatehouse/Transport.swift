import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request as the SDK sends it. Its description names method and URL only: headers and body may carry a
/// password or a token (a transport that logs what it sends prints no secret by accident).
public struct TransportRequest: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
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

    public var description: String { "\(method) \(url.absoluteString)" }
    public var debugDescription: String { "TransportRequest(\(description), headers: \(headers.keys.sorted()), body: \(body?.count ?? 0) bytes)" }
    public var customMirror: Mirror {
        Mirror(self, children: ["method": method, "url": url, "headers": headers.keys.sorted(), "body": "\(body?.count ?? 0) bytes"])
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

/// ``NetworkTransport`` over `URLSession`, following no redirect.
///
/// Every request the SDK sends may carry a password, an access token or a refresh token, and `URLSession` would
/// follow a `3xx` to wherever its `Location` points — another host, or plain `http` — with the same headers (on
/// Linux, the `Authorization` header too). Gatehouse never answers the Client API or native auth with a redirect, so
/// one comes from something in between (a misconfigured proxy, an open redirect, someone on the network path): the
/// answer is handed back as it is, and the SDK reports it as ``ClientError/unexpectedResponse(status:body:)``
/// naming where it pointed. The `/location` answer is how a server moves an app to another address
/// (``AppConfiguration``), under its own checks.
public struct URLSessionTransport: NetworkTransport {
    private let session: URLSession

    /// A transport over a session of its own (one per process, the default configuration) that refuses redirects.
    public init() { self.session = Self.refusingRedirects }

    /// A transport over `session`, refusing redirects whatever `session`'s own delegate would do: on Apple platforms
    /// each request carries a task delegate that refuses them. FoundationNetworking (Linux) asks only a session's own
    /// delegate, so there the transport makes a session of its own from `session.configuration` (its timeouts,
    /// cache, cookies and headers; not `session`'s delegate or queue), kept for the transport's life: make one
    /// transport and reuse it.
    public init(session: URLSession) {
        #if canImport(FoundationNetworking)
        self.session = URLSession(configuration: session.configuration, delegate: RedirectRefusal.shared, delegateQueue: nil)
        #else
        self.session = session
        #endif
    }

    private static let refusingRedirects = URLSession(configuration: .default, delegate: RedirectRefusal.shared, delegateQueue: nil)

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.timeoutInterval = request.timeout
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        let (data, response) = try await session.data(for: urlRequest, delegate: RedirectRefusal.shared)
        guard let http = response as? HTTPURLResponse else { throw ClientError.transport("not an HTTP response") }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return TransportResponse(statusCode: http.statusCode, headers: headers, body: data)
    }
}

/// Answers every redirection with "do not follow": the `3xx` itself becomes the response.
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    static let shared = RedirectRefusal()

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
