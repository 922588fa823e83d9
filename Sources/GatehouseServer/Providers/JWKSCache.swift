import Foundation
import GatehouseWire
import NIOConcurrencyHelpers

/// JSON Web Key Sets fetched from providers (Google, Apple, an app's own JWKS URL), cached per URL.
///
/// A set is kept for `maxAge` seconds. A token naming a `kid` the cached set lacks triggers a refetch (providers
/// rotate keys), at most once per `refetchInterval` per URL, so that tokens with made-up `kid`s cannot make
/// Gatehouse hammer the provider. When a refetch fails, the keys already known go on being used.
final class JWKSCache: Sendable {
    private struct Entry {
        var keys: [JWTVerificationKey]
        var fetchedAt: Date
    }

    private let http: any OutboundHTTP
    private let clock: GatehouseClock
    private let entries = NIOLockedValueBox<[String: Entry]>([:])
    let maxAge: TimeInterval
    let refetchInterval: TimeInterval

    init(http: any OutboundHTTP, clock: GatehouseClock, maxAge: TimeInterval = 3600, refetchInterval: TimeInterval = 30) {
        self.http = http
        self.clock = clock
        self.maxAge = maxAge
        self.refetchInterval = refetchInterval
    }

    /// The keys at `url` that may have signed a token with `kid`.
    func keys(at url: String, kid: String?) async throws(AuthError) -> [JWTVerificationKey] {
        let now = clock.now
        let cached = entries.withLockedValue { $0[url] }
        if let cached {
            let fresh = now.timeIntervalSince(cached.fetchedAt) < maxAge
            let knowsKid = kid == nil || cached.keys.contains { $0.kid == kid }
            if fresh && knowsKid { return cached.keys }
            if knowsKid == false, fresh, now.timeIntervalSince(cached.fetchedAt) < refetchInterval { return cached.keys }
        }
        do {
            let keys = try await fetch(url)
            entries.withLockedValue { $0[url] = Entry(keys: keys, fetchedAt: now) }
            return keys
        } catch {
            if let cached { return cached.keys }
            throw error
        }
    }

    private func fetch(_ url: String) async throws(AuthError) -> [JWTVerificationKey] {
        let response: OutboundResponse
        do {
            response = try await http.send(OutboundRequest(url: url, headers: [("Accept", "application/json")]))
        } catch {
            throw .providerUnavailable("cannot fetch the signing keys: \(error)")
        }
        guard response.status == 200, case .array(let keys)? = response.jsonObject?["keys"] else {
            throw .providerUnavailable("the signing keys at \(URL(string: url)?.host ?? url) answered \(response.status) without a JSON Web Key Set")
        }
        return keys.compactMap { if case .object(let jwk) = $0 { JWTVerificationKey(jwk: jwk) } else { nil } }
    }
}
