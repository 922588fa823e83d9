import Foundation
import GatehouseDomain
import Logging
import ServiceLifecycle

/// Writes the rate-limit hits this instance admitted on its own (``RateLimiter``) to the shared counts every
/// `interval`, so that other instances see them within about that long. The last flush is ``AuthServer/close()``'s.
struct RateLimitFlusher: Service {
    let env: AuthEnvironment
    var interval: Duration = .seconds(1)

    func run() async throws {
        // Its sleeps end at a graceful shutdown too, so that it never holds the server's exit back.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                do {
                    try await env.rateLimiter.flush(now: env.clock.now)
                } catch {
                    env.logger.warning("rate limits: writing this instance's counts failed; the next flush tries again", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
