import Foundation
import GatehouseDomain
import GatehouseWire
import Hummingbird
import Logging

/// Operational routes: health, readiness, the JWKS, OpenID discovery and the OpenAPI description.
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
        router.get(".well-known/openid-configuration") { _, _ in
            var response = try JSONResponse.make(OpenIDConfiguration(issuer: env.publicURL, appId: nil))
            response.headers[.cacheControl] = "public, max-age=300"
            return response
        }
        router.get("native/:appId/.well-known/openid-configuration") { _, context in
            let appId = try context.parameters.require("appId")
            guard env.configuration.apps.contains(where: { $0.id == appId && $0.nativeAuth != nil }) else {
                return try JSONResponse.make(.notFound, ["error": "not_found", "error_description": "no app with native auth has this id"])
            }
            var response = try JSONResponse.make(OpenIDConfiguration(issuer: env.publicURL, appId: appId))
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

/// The OpenID Provider Metadata of Gatehouse's token issuer (OpenID Connect Discovery 1.0), so that a resource server
/// verifies Gatehouse's tokens with a standard library from the issuer alone.
///
/// Every app's tokens share one issuer, the server's public URL: the document at `/.well-known/openid-configuration`
/// is the issuer's (keys, algorithms, claims, scopes, grant types), and an app is told apart by the tokens' `aud`
/// (the app id in access tokens, the client id in ID tokens). The native auth token and revocation endpoints belong to
/// one app each, so they are in that app's copy of the document, `/native/{appId}/.well-known/openid-configuration`.
/// There is no authorization endpoint: native auth never redirects to a browser.
struct OpenIDConfiguration: Encodable {
    var issuer: String
    var jwksURI: String
    var tokenEndpoint: String?
    var revocationEndpoint: String?
    var responseTypesSupported: [String] = []
    var subjectTypesSupported = ["public"]
    var idTokenSigningAlgValuesSupported = ["ES256"]
    var tokenEndpointAuthMethodsSupported = ["none"]
    var grantTypesSupported = ["password", "refresh_token", "oob", "continuation_token"]
    var scopesSupported = ["openid", "profile", "offline_access"]
    var claimsSupported = ["iss", "sub", "aud", "exp", "iat", "email", "name", "preferred_username", "oid", "tid", "amr", "auth_time", "sid"]

    init(issuer: String, appId: String?) {
        self.issuer = issuer
        jwksURI = issuer + "/.well-known/jwks.json"
        if let appId {
            tokenEndpoint = issuer + NativeAuthEndpoint.token.path(appId: appId)
            revocationEndpoint = issuer + NativeAuthEndpoint.revoke.path(appId: appId)
        }
    }

    enum CodingKeys: String, CodingKey {
        case issuer
        case jwksURI = "jwks_uri"
        case tokenEndpoint = "token_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case responseTypesSupported = "response_types_supported"
        case subjectTypesSupported = "subject_types_supported"
        case idTokenSigningAlgValuesSupported = "id_token_signing_alg_values_supported"
        case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
        case grantTypesSupported = "grant_types_supported"
        case scopesSupported = "scopes_supported"
        case claimsSupported = "claims_supported"
    }
}

/// `Resources/openapi.yaml`, compiled in (the repository root's file links to it).
enum OpenAPIDocument {
    static let bytes: [UInt8] = Array(EmbeddedResources.openapi.utf8)
}
