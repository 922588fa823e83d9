import Foundation
import GatehouseDomain
import Hummingbird
import Logging

/// Operational routes: health, readiness, the JWKS and the OpenAPI description.
struct ServiceRoutes {
    let env: AuthEnvironment
    let readiness: DatabaseReadiness
    let probe: ReadinessProbe

    func register(on router: Router<GatehouseRequestContext>) {
        router.get("healthz") { _, _ in try JSONResponse.make(["status": "ok"]) }
        router.get("readyz") { [readiness] _, context in
            guard readiness.isReady else {
                return try JSONResponse.make(
                    .serviceUnavailable, ["status": "starting", "reason": "database unreachable; retrying: \(readiness.reason.prefix(300))"]
                )
            }
            guard let reason = await probe.check() else { return try JSONResponse.make(["status": "ready"]) }
            context.logger.warning("readiness check failed", metadata: ["reason": "\(reason)"])
            var response = try JSONResponse.make(.serviceUnavailable, ["status": "unavailable", "reason": reason])
            response.headers[.retryAfter] = String(StoreError.retryAfterSeconds)
            return response
        }
        router.get(".well-known/jwks.json") { _, _ in
            await env.keys.refreshIfNeeded(from: env.store, now: env.clock.now)
            var response = try JSONResponse.make(env.keys.jwks)
            response.headers[.cacheControl] = "public, max-age=300"
            return response
        }
        router.get("openapi.yaml") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/yaml"],
                body: .init(byteBuffer: .init(bytes: OpenAPIDocument.bytes))
            )
        }
    }
}

/// The bundled `openapi.yaml` (the repository root's file links to it).
enum OpenAPIDocument {
    static let bytes: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"), let data = try? Data(contentsOf: url) else {
            return Array("openapi.yaml is missing from the build\n".utf8)
        }
        return Array(data)
    }()
}
