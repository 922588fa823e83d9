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
        let expect = JWTExpectations(issuers: settings.issuers, audiences: settings.audiences, maxLifetime: TimeInterval(settings.maxLifetime))
        var verified: VerifiedJWT?
        // The configured keys first, with no network: a key set that cannot be fetched never blocks a token one of
        // them signed. The key set is asked only when none of them could have signed the token.
        var staticRefusal: ExternalTokenError?
        if !keys.isEmpty {
            do {
                verified = try ExternalJWT.verify(token, keys: keys, expect: expect, now: clock.now)
            } catch where settings.jwksURL != nil && (error == .unknownKey || error == .badSignature) {
                staticRefusal = error
            } catch {
                throw .invalidCredential("invalid custom auth token: \(error)")
            }
        }
        if verified == nil, let url = settings.jwksURL {
            let fetched = try await jwks.keys(at: url, kid: header.kid)
            do {
                verified = try ExternalJWT.verify(token, keys: fetched, expect: expect, now: clock.now)
            } catch {
                // No key of the set fits either: the configured keys' answer says more ("signature is invalid").
                throw .invalidCredential("invalid custom auth token: \(error == .unknownKey ? staticRefusal ?? error : error)")
            }
        }
        guard let verified else { throw .invalidCredential("invalid custom auth token: \(ExternalTokenError.unknownKey)") }
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
