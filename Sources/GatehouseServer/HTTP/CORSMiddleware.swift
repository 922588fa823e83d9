import GatehouseDomain
import Hummingbird

/// CORS for browser clients, per app: a request whose `Origin` is in the app's `cors.allowedOrigins` gets
/// `Access-Control-Allow-Origin` with that origin; preflights (`OPTIONS` with `Access-Control-Request-Method`) are
/// answered here. The app comes from the path (`/api/client/v2.0/app/{appId}/…`, `/native/{appId}/…`); the routes
/// that find the app from the token (`/api/client/v2.0/auth/…`) accept the origins of every app, since a preflight
/// carries no token. Other origins get no CORS headers, so browsers keep the answers from them. Hosted pages and
/// service routes are never opened to other origins.
struct CORSMiddleware<Context: RequestContext>: RouterMiddleware {
    let configuration: GatehouseConfiguration

    static var allowedHeaders: String { "authorization, content-type, accept, client-request-id, x-client-sku, x-client-ver, x-client-os, x-client-cpu" }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], let allowed = allowedOrigins(for: request.uri.path), allowed.contains(origin.lowercased()) else {
            return try await next(request, context)
        }
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            var response = Response(status: .noContent)
            response.headers[.accessControlAllowMethods] = "GET, POST, PUT, DELETE"
            response.headers[.accessControlAllowHeaders] = Self.allowedHeaders
            response.headers[.accessControlMaxAge] = "600"
            Self.allow(origin, in: &response)
            return response
        }
        var response = try await next(request, context)
        Self.allow(origin, in: &response)
        return response
    }

    private static func allow(_ origin: String, in response: inout Response) {
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.vary] = "Origin"
    }

    /// The origins the path's app allows; nil for routes that are never cross-origin.
    func allowedOrigins(for path: String) -> Set<String>? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        if parts.count >= 5, parts[0] == "api", parts[1] == "client", parts[2] == "v2.0", parts[3] == "app" {
            return configuration.app(id: String(parts[4]))?.corsOrigins
        }
        if parts.count >= 4, parts[0] == "api", parts[1] == "client", parts[2] == "v2.0", parts[3] == "auth" {
            return configuration.apps.reduce(into: Set<String>()) { $0.formUnion($1.corsOrigins) }
        }
        if parts.count >= 2, parts[0] == "native" {
            return configuration.app(id: String(parts[1]))?.corsOrigins
        }
        return nil
    }
}
