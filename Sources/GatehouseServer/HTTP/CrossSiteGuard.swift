import Foundation
import GatehouseDomain
import HTTPTypes
import Hummingbird
import Logging

/// Refuses requests a web page on another site makes through a visitor's browser, on the API routes.
///
/// The APIs take no cookies, so such a request carries no one's session; what it does carry is the visitor's network
/// address. A page could make the visitor's browser send wrong passwords for the visitor's own account (a JSON body
/// sent as `text/plain`, or the native auth API's form, needs no CORS preflight), and the login delay would then
/// fall on the address the owner signs in from — the one lock the delays are built never to hand an attacker. Or it
/// could spend the visitor's address's mail allowance. CORS keeps the answer from the page, not the request from the
/// server.
///
/// So on the Client API and native auth routes, a request that changes anything (any method but `GET`, `HEAD` and
/// `OPTIONS`) and that a browser marked as coming from elsewhere is refused with 403 in the route's envelope, before
/// it is read, counted or limited:
/// - with an `Origin` header (browsers send it on every cross-origin `POST`, `fetch` in `no-cors` mode and forms
///   included; `null` from sandboxed frames and `data:` URLs), unless it is one of the app's `cors.allowedOrigins`
///   (``CORSMiddleware/allowedOrigins(for:)``) or the server's own public origin;
/// - without one, when `Sec-Fetch-Site` says `cross-site` or `same-site`.
///
/// Native apps and servers send neither header and are never refused here; a page on the server's own origin, or
/// one the app lists, is let through. Pages cannot set either header themselves (both are forbidden header names).
struct CrossSiteGuard<Context: RequestContext>: RouterMiddleware {
    let configuration: GatehouseConfiguration
    let publicURL: PublicURL

    static var fetchSite: HTTPField.Name { HTTPField.Name("Sec-Fetch-Site")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        switch request.method {
        case .get, .head, .options:
            return try await next(request, context)
        default:
            break
        }
        let origin = request.headers[.origin]
        let fetchSite = request.headers[Self.fetchSite]
        // Apps and servers send neither header: nothing more to look at.
        if origin == nil, fetchSite == nil { return try await next(request, context) }
        if let refusal = refusal(origin: origin, fetchSite: fetchSite, path: request.uri.path) {
            context.logger.info("cross-site request refused", metadata: ["reason": "\(refusal)"])
            throw HTTPError(.forbidden, message: refusal)
        }
        return try await next(request, context)
    }

    /// Why a state-changing request with these headers is refused on `path`, or nil to serve it.
    func refusal(origin: String?, fetchSite: String?, path: String) -> String? {
        guard let allowed = CORSMiddleware<Context>(configuration: configuration).allowedOrigins(for: path) else { return nil }
        if let origin {
            let spelled = origin.lowercased()
            if allowed.contains(spelled) || spelled == BrowserOrigin.of(publicURL.value) { return nil }
            return "a web page at origin \(origin.prefix(200)) may not call this API; list it in the app's cors.allowedOrigins to allow it"
        }
        switch fetchSite?.lowercased() {
        case "cross-site", "same-site":
            return "a web page on another site may not call this API; list its origin in the app's cors.allowedOrigins to allow it"
        default:
            return nil
        }
    }
}

/// The origin of a URL as browsers write it in `Origin`: `scheme://host[:port]`, lowercased, the scheme's default port
/// left out. The server's public URL and the configured `cors.allowedOrigins` are compared in this form.
enum BrowserOrigin {
    static func of(_ url: String) -> String? {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), let host = parts.host?.lowercased() else { return nil }
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        if let port = parts.port, port != defaultPort { return "\(scheme)://\(host):\(port)" }
        return "\(scheme)://\(host)"
    }
}
