import Foundation
import GatehouseWire

/// `custom-token`: a JWT signed by the app's own backend (HS256, RS256 or ES256), with keys from the
/// configuration or a JWKS URL. The identity is the token's `sub`; `metadataFields` copy claims into the profile.
package struct CustomTokenProvider: Sendable {
    package static let providerType = "custom-token"

    package let settings: CustomTokenSettings
    /// `settings.keys`, parsed (once, when the server opened).
    package let keys: [JWTVerificationKey]
    package let jwks: JWKSCache
    package let clock: GatehouseClock

    package func identity(token: String) async throws(AuthError) -> ExternalIdentity {
        let header: (alg: String, kid: String?)
        do { header = try ExternalJWT.header(token) } catch { throw .invalidCredential("invalid custom auth token: \(error)") }
        var keys = self.keys
        if let url = settings.jwksURL {
            keys += try await jwks.keys(at: url, kid: header.kid)
        }
        let verified: VerifiedJWT
        do {
            verified = try ExternalJWT.verify(
                token, keys: keys, expect: JWTExpectations(issuers: settings.issuers, audiences: settings.audiences), now: clock.now
            )
        } catch {
            throw .invalidCredential("invalid custom auth token: \(error)")
        }
        guard let subject = verified.subject, !subject.isEmpty else { throw .invalidCredential("invalid custom auth token: \(ExternalTokenError.missingSubject)") }
        var data: [String: JSONValue] = [:]
        for field in settings.metadataFields {
            if let value = Self.claim(field.name, in: verified.claims)?.profileString {
                data[field.field] = .string(value)
            } else if field.required {
                throw .invalidCredential("invalid custom auth token: required metadata field \"\(field.name)\" is missing")
            }
        }
        return ExternalIdentity(providerType: Self.providerType, externalId: subject, data: data)
    }

    /// The claim at a dotted path: `user.name` is `claims["user"]["name"]`.
    package static func claim(_ path: String, in claims: [String: JSONValue]) -> JSONValue? {
        if let direct = claims[path] { return direct }
        var current: JSONValue = .object(claims)
        for part in path.split(separator: ".") {
            guard case .object(let object) = current, let next = object[String(part)] else { return nil }
            current = next
        }
        return current
    }

    package init(settings: CustomTokenSettings, keys: [JWTVerificationKey], jwks: JWKSCache, clock: GatehouseClock) {
        self.settings = settings
        self.keys = keys
        self.jwks = jwks
        self.clock = clock
    }
}
