import Foundation
import GatehouseDomain
import Logging
import ServiceLifecycle

/// Runs the retention service (``RetentionService``) every `retention.interval` seconds, the first run a random
/// part of an interval after start, so that instances started together spread their runs out.
struct RetentionRunner: Service {
    let env: AuthEnvironment

    func run() async throws {
        let interval = Double(env.configuration.retention.interval)
        // Its sleeps end at a graceful shutdown too, so that it never holds the server's exit back.
        try? await cancelWhenGracefulShutdown {
            var wait = Double.random(in: 0.1...1) * interval
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(wait))
                do {
                    try await RetentionService(env: env).run()
                } catch {
                    env.logger.warning("retention: a run failed; the next one tries again", metadata: ["error": "\(error)"])
                }
                wait = interval
            }
        }
    }
}
