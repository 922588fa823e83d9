import Foundation
import GatehouseDomain
import HTTPTypes
import Hummingbird
import Logging

/// One log line per request — `request` with `request_id`, `method`, `route` (the route's template, such as
/// `/api/client/v2.0/app/{appId}/auth/providers/local-userpass/login`: never the path or query, which may carry a token),
/// `status`, `ms` and `app` — and the request's id in `X-Request-Id` on the answer and on the lines logged through the
/// request's logger (the routes'). The domain logs through the server's logger, whose lines do not carry it. An incoming `X-Request-Id` of up to 128 letters, digits, `-`, `_`, `.` and `:` is kept (a proxy's id then
/// ties its logs to Gatehouse's); anything else is replaced by a new one.
///
/// The same facts feed the request metrics (`gatehouse_http_requests_total`, `gatehouse_http_request_duration_seconds`),
/// labelled by route template, method and status only: their values are bounded by the routes Gatehouse has, whatever
/// paths clients send. (Hummingbird's `MetricsMiddleware` would report to the process-wide `MetricsSystem`, not to the
/// server's own registry.)
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    var metrics: GatehouseMetrics? = nil

    static var header: HTTPField.Name { HTTPField.Name("X-Request-Id")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // Runs outside ClientAPIErrorMiddleware, which turns every error into a response, so it sees only responses.
        let start = ContinuousClock.now
        let id = request.headers[Self.header].flatMap(Self.acceptable) ?? Self.makeID()
        var context = context
        context.logger[metadataKey: "request_id"] = .string(id)
        var response = try await next(request, context)
        response.headers[Self.header] = id
        let elapsed = ContinuousClock.now - start
        // Hummingbird names the endpoint of a path no route has `NotFound`.
        let route = context.endpointPath.flatMap { $0 == "NotFound" ? nil : Self.template($0) } ?? "unmatched"
        metrics?.request(method: request.method, route: route, status: response.status.code, elapsed: elapsed)
        // The line's metadata is made only when the line is logged: a server run at `notice` or above (the
        // benchmarks run at `warning`) does not pay for formatting it, a few per cent of a request.
        if context.logger.logLevel <= .info {
            let ms = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
            var metadata: Logger.Metadata = [
                "method": .string(request.method.rawValue), "route": .string(route),
                "status": .stringConvertible(response.status.code), "ms": .string(String(format: "%.1f", ms)),
            ]
            if let app = context.parameters.get("appId"), app.utf8.count <= 64 { metadata["app"] = .string(app) }
            context.logger.info("request", metadata: metadata)
        }
        return response
    }

    /// `/native/:appId/oauth2/v2.0/token` → `/native/{appId}/oauth2/v2.0/token`.
    static func template(_ path: String) -> String {
        // Most routes have no parameter: their template is their path.
        if !path.utf8.contains(UInt8(ascii: ":")) { return path.utf8.first == UInt8(ascii: "/") ? path : "/" + path }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
        let joined = parts.joined(separator: "/")
        return joined.hasPrefix("/") ? joined : "/" + joined
    }

    static func acceptable(_ id: String) -> String? {
        guard (1...128).contains(id.utf8.count),
            id.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || [45, 95, 46, 58].contains($0) })
        else { return nil }
        return id
    }

    /// 16 random bytes as hex.
    static func makeID() -> String { Secrets.hex(Secrets.randomBytes(16)) }
}
