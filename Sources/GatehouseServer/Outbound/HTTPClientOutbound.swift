import AsyncHTTPClient
import Foundation
import GatehouseDomain
import GatehouseWire
import NIOCore
import NIOHTTP1

/// ``OutboundHTTP`` over an AsyncHTTPClient of its own: redirects are not followed (a redirect could carry a
/// webhook's token and signature, or a key set, to another host or to plain HTTP), every request has a deadline,
/// and answers are capped in size. ``shutdown()`` when the server closes.
final class HTTPClientOutbound: OutboundHTTP {
    private let client: HTTPClient
    /// Answers larger than this are refused (a JWKS or a token answer is a few KiB).
    let maxResponseBytes = 1 << 20

    init() {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.httpVersion = .automatic
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    func shutdown() async {
        try? await client.shutdown()
    }

    /// Errors say what went wrong in general terms: they reach clients, so they name no host, address or port.
    func send(_ request: OutboundRequest) async throws(OutboundError) -> OutboundResponse {
        // The configuration loader refuses such URLs already; this covers configurations built in code.
        guard Loopback.outboundProblem(request.url) == nil else { throw OutboundError("plain http is allowed to loopback hosts only") }
        var outbound = HTTPClientRequest(url: request.url)
        outbound.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outbound.headers.add(name: name, value: value) }
        if let body = request.body { outbound.body = .bytes(ByteBuffer(bytes: body)) }
        let (client, limit, timeout, prepared) = (client, maxResponseBytes, request.timeout, outbound)
        do {
            // The deadline covers the whole exchange, body included: a server that sends its head and then stalls
            // (or whose connection half-closes) cannot hold the request past it.
            return try await withThrowingTaskGroup(of: OutboundResponse.self) { group in
                group.addTask {
                    let response = try await client.execute(prepared, timeout: .nanoseconds(Int64(timeout * 1_000_000_000)))
                    let body = try await response.body.collect(upTo: limit)
                    var headers: [String: String] = [:]
                    for header in response.headers { headers[header.name.lowercased()] = header.value }
                    return OutboundResponse(status: Int(response.status.code), headers: headers, body: Data(body.readableBytesView))
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))
                    throw HTTPClientError.deadlineExceeded
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else { throw HTTPClientError.deadlineExceeded }
                return first
            }
        } catch is NIOTooManyBytesError {
            throw OutboundError("the answer was larger than \(maxResponseBytes) bytes")
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            throw OutboundError("no answer within \(Int(request.timeout)) s")
        } catch {
            throw OutboundError("the server could not be reached")
        }
    }
}
