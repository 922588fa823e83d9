import Foundation
import GatehouseWire

/// JSON Web Key Sets fetched from providers (Google, Apple, an app's own JWKS URL), cached per URL.
///
/// A set is kept for `maxAge` seconds. A token naming a `kid` the cached set lacks triggers a refetch (providers
/// rotate keys). Fetches of one URL, successful or not, are at least `refetchInterval` apart, so that tokens with
/// made-up `kid`s, or a provider that is down, cannot make every login wait on a fetch. When a refetch fails, the
/// keys already known go on being used for up to `maxStale` seconds.
package final class JWKSCache: Sendable {
    private struct Entry {
        package var keys: [JWTVerificationKey]
        package var fetchedAt: Date
    }

    private struct State {
        package var entries: [String: Entry] = [:]
        package var lastAttempt: [String: Date] = [:]
        /// The fetch under way per URL: concurrent callers wait for it instead of starting their own.
        package var inFlight: [String: Task<[JWTVerificationKey], any Error>] = [:]
    }

    private let http: any OutboundHTTP
    private let clock: GatehouseClock
    private let state = LockedValue(State())
    package let maxAge: TimeInterval
    package let refetchInterval: TimeInterval
    package let maxStale: TimeInterval

    package init(
        http: any OutboundHTTP, clock: GatehouseClock, maxAge: TimeInterval = 3600, refetchInterval: TimeInterval = 30,
        maxStale: TimeInterval = 86_400
    ) {
        self.http = http
        self.clock = clock
        self.maxAge = maxAge
        self.refetchInterval = refetchInterval
        self.maxStale = maxStale
    }

    private enum Plan {
        case use([JWTVerificationKey])
        case unavailable
        case wait(Task<[JWTVerificationKey], any Error>, fallback: [JWTVerificationKey]?)
    }

    /// The keys at `url` that may have signed a token with `kid`.
    package func keys(at url: String, kid: String?) async throws(AuthError) -> [JWTVerificationKey] {
        let now = clock.now
        let maxAge = maxAge, refetchInterval = refetchInterval, maxStale = maxStale
        // Decided under the lock: use the cache, join the fetch under way, or start one (at most one per interval).
        let plan: Plan = state.withLockedValue { state in
            let cached = state.entries[url].flatMap { now.timeIntervalSince($0.fetchedAt) < maxStale ? $0 : nil }
            if let cached, now.timeIntervalSince(cached.fetchedAt) < maxAge, kid == nil || cached.keys.contains(where: { $0.kid == kid }) {
                return .use(cached.keys)
            }
            if let running = state.inFlight[url] { return .wait(running, fallback: cached?.keys) }
            if let last = state.lastAttempt[url], now.timeIntervalSince(last) < refetchInterval {
                return cached.map { .use($0.keys) } ?? .unavailable
            }
            state.lastAttempt[url] = now
            let task = Task { [self] in
                defer { self.state.withLockedValue { _ = $0.inFlight.removeValue(forKey: url) } }
                let keys = try await self.fetch(url)
                self.state.withLockedValue { $0.entries[url] = Entry(keys: keys, fetchedAt: now) }
                return keys
            }
            state.inFlight[url] = task
            return .wait(task, fallback: cached?.keys)
        }
        switch plan {
        case .use(let keys):
            return keys
        case .unavailable:
            throw .providerUnavailable("the provider's signing keys are unavailable; try again shortly")
        case .wait(let task, let fallback):
            do {
                return try await task.value
            } catch {
                if let fallback { return fallback }
                throw (error as? AuthError) ?? .providerUnavailable("the provider's signing keys are unavailable; try again shortly")
            }
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
            throw .providerUnavailable("the provider's signing keys answered HTTP \(response.status) without a JSON Web Key Set")
        }
        // Public keys only: a shared secret has no business in a published key set.
        return keys.compactMap { if case .object(let jwk) = $0 { JWTVerificationKey(jwk: jwk) } else { nil } }.filter {
            if case .hmac = $0.material { false } else { true }
        }
    }
}
