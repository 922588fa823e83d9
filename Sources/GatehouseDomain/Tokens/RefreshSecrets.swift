import Crypto
import Foundation
import Logging

/// What a presented native-auth refresh token is to its session, and what a replay of a spent one does. Both
/// protocols take these tokens (the native `/token` grant rotates them; the Client API's refresh-token routes —
/// session, logout, API keys — accept the current one), and both ask here, so a copy of a spent token ends the
/// session wherever it is presented.
package struct RefreshSecrets: Sendable {
    package let env: AuthEnvironment

    package init(env: AuthEnvironment) { self.env = env }

    /// The current secret, the one before it (which may be retried within the reuse window), one a rotation spent
    /// earlier (and when), or none of the session's. Compared in constant time; the store is asked only for a secret
    /// that is neither of the first two.
    package enum Presented: Equatable, Sendable {
        case current, previous, spent(at: Date), unknown
    }

    package func classify(_ hash: [UInt8], in session: SessionRecord) async throws -> Presented {
        if Secrets.constantTimeEquals(hash, session.secretHash) { return .current }
        if let previous = session.previousSecretHash, Secrets.constantTimeEquals(hash, previous) { return .previous }
        if let spentAt = try await env.store.spentRefreshSecret(sessionId: session.id, secretHash: hash) { return .spent(at: spentAt) }
        return .unknown
    }

    /// The app's native-auth reuse window (the default when native auth has since been removed from the app).
    package static func reuseWindow(_ app: AppSettings) -> TimeInterval {
        TimeInterval(app.nativeAuth?.refreshTokenReuseWindow ?? NativeAuthSettings(clientIds: []).refreshTokenReuseWindow)
    }

    /// Whether presenting a spent or previous secret now is a replay: later than the app's reuse window after it was
    /// spent.
    package func isReplay(_ presented: Presented, session: SessionRecord, app: AppSettings) -> Bool {
        let now = env.clock.now
        let window = Self.reuseWindow(app)
        switch presented {
        case .spent(let at): return now.timeIntervalSince(at) > window
        case .previous: return session.rotatedAt.map { now.timeIntervalSince($0) > window } ?? true
        case .current, .unknown: return false
        }
    }

    /// A spent token came back after its window: someone holds a copy. The whole session ends, so that a thief who
    /// rotated ahead loses it as surely as the owner.
    package func endReplayedSession(_ session: SessionRecord, appId: String, via: String) async throws {
        try await env.store.revokeSession(id: session.id, now: env.clock.now)
        env.logger.warning(
            "refresh token reused after rotation; session revoked",
            metadata: ["app": "\(appId)", "user": "\(session.userId)", "session": "\(session.id)", "via": "\(via)"]
        )
        await env.audit(.refreshTokenReused, app: appId, user: session.userId, detail: ["session": session.id, "via": via])
    }
}
