import Foundation
import GatehouseWire

/// Verifies an OpenID Connect ID token against the provider's published keys: signature (RS256 or ES256),
/// issuer, audience (the app's client ids, and for a token of several audiences its `azp`), expiry.
package struct OpenIDTokenVerifier: Sendable {
    package let settings: OpenIDSettings
    package let jwks: JWKSCache
    package let clock: GatehouseClock

    /// The identity a valid ID token names: its `sub`, with the profile claims.
    package func identity(_ token: String, provider: String) async throws(AuthError) -> ExternalIdentity {
        let verified = try await verify(token, provider: provider)
        return ExternalIdentity(providerType: provider, externalId: verified.subject!, data: OpenIDProfile.data(verified))
    }

    package func verify(_ token: String, provider: String) async throws(AuthError) -> VerifiedJWT {
        let header: (alg: String, kid: String?)
        do { header = try ExternalJWT.header(token) } catch { throw .invalidCredential("invalid id token: \(error)") }
        // Provider keys are public keys: an HS256 token could only be "signed" with something public.
        guard header.alg != "HS256" else { throw .invalidCredential("invalid id token: \(ExternalTokenError.unsupportedAlgorithm)") }
        let keys = try await jwks.keys(at: settings.jwksURL, kid: header.kid)
        do {
            let verified = try ExternalJWT.verify(
                token, keys: keys, expect: JWTExpectations(issuers: settings.issuers, audiences: settings.clientIds, authorizedParty: true), now: clock.now
            )
            guard let subject = verified.subject, !subject.isEmpty else { throw ExternalTokenError.missingSubject }
            return verified
        } catch {
            throw .invalidCredential("invalid id token: \(error)")
        }
    }

    package init(settings: OpenIDSettings, jwks: JWKSCache, clock: GatehouseClock) {
        self.settings = settings
        self.jwks = jwks
        self.clock = clock
    }
}

/// `oauth2-google`: a Google ID token (`id_token`), or a server auth code (`authCode`) exchanged at Google's token
/// endpoint for one.
package struct GoogleProvider: Sendable {
    package static let providerType = "oauth2-google"

    package let settings: GoogleSettings
    package let jwks: JWKSCache
    package let http: any OutboundHTTP
    package let clock: GatehouseClock

    package func identity(idToken: String) async throws(AuthError) -> ExternalIdentity {
        try await OpenIDTokenVerifier(settings: settings.openID, jwks: jwks, clock: clock).identity(idToken, provider: Self.providerType)
    }

    package func identity(authCode: String) async throws(AuthError) -> ExternalIdentity {
        guard let clientId = settings.serverClientId, let secret = settings.clientSecret else {
            throw .invalidCredential("server auth codes are not enabled for this app (set oauth2-google.serverClientId and clientSecret)")
        }
        var form = URLComponents()
        form.queryItems = [
            .init(name: "grant_type", value: "authorization_code"), .init(name: "code", value: authCode),
            .init(name: "client_id", value: clientId), .init(name: "client_secret", value: secret),
            .init(name: "redirect_uri", value: settings.redirectURI),
        ]
        let body = (form.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        let response: OutboundResponse
        do {
            response = try await http.send(OutboundRequest(
                method: "POST", url: settings.tokenURL,
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")], body: Data(body.utf8)
            ))
        } catch {
            throw .providerUnavailable("cannot exchange the Google auth code: \(error)")
        }
        let answer = response.jsonObject
        guard response.status == 200, case .string(let idToken)? = answer?["id_token"] else {
            if (400..<500).contains(response.status) {
                let reason = answer?["error"]?.profileString ?? "refused"
                throw .invalidCredential("invalid Google auth code: \(reason)")
            }
            throw .providerUnavailable("Google's token endpoint answered \(response.status)")
        }
        // The ID token of a code exchange is issued to the server client id.
        var openID = settings.openID
        openID.clientIds.append(clientId)
        return try await OpenIDTokenVerifier(settings: openID, jwks: jwks, clock: clock).identity(idToken, provider: Self.providerType)
    }

    package init(settings: GoogleSettings, jwks: JWKSCache, http: any OutboundHTTP, clock: GatehouseClock) {
        self.settings = settings
        self.jwks = jwks
        self.http = http
        self.clock = clock
    }
}

/// `oauth2-apple`: a Sign in with Apple ID token; its audience is one of the app's bundle or service ids.
package struct AppleProvider: Sendable {
    package static let providerType = "oauth2-apple"

    package let settings: AppleSettings
    package let jwks: JWKSCache
    package let clock: GatehouseClock

    package func identity(idToken: String) async throws(AuthError) -> ExternalIdentity {
        try await OpenIDTokenVerifier(settings: settings.openID, jwks: jwks, clock: clock).identity(idToken, provider: Self.providerType)
    }

    package init(settings: AppleSettings, jwks: JWKSCache, clock: GatehouseClock) {
        self.settings = settings
        self.jwks = jwks
        self.clock = clock
    }
}
