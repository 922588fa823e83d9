import Crypto
import Foundation
import Logging

/// Refresh, rotation with reuse detection, and ending a session: written once, for both protocols.
///
/// A refresh token is a session's secret. The Client API hands it out inside a JWT (`jti`) and never rotates it, as
/// Realm clients expect; native auth hands it out as an opaque token that rotates at every `/token` refresh. Both
/// protocols take both kinds (the Client API's refresh-token routes accept a native session's current token), and
/// every presentation passes ``accept(_:session:user:app:mode:via:)``: the secret is classified first, then the
/// session's state, the limits, and last the rotation or the record of its use. A secret a rotation spent, presented
/// after the app's reuse window, ends the whole session wherever it is presented: a thief who rotated ahead loses it
/// as surely as the owner.
package struct SessionRefresh: Sendable {
    package let env: AuthEnvironment

    package init(env: AuthEnvironment) { self.env = env }

    /// A presented refresh secret: the SHA-256 the session stores, and for an opaque token the secret itself (a
    /// rotation derives the next secret from it).
    package struct Presented: Sendable {
        package var hash: [UInt8]
        package var secret: [UInt8]?

        /// The secret of a Client API refresh token (its `jti`).
        package init(clientAPISecret jti: String) {
            hash = Secrets.sha256(jti)
            secret = nil
        }

        /// The secret of a native refresh token.
        package init(_ token: OpaqueToken) {
            hash = token.hash
            secret = token.secret
        }
    }

    /// What a presentation does to a current secret.
    package enum Mode: Sendable {
        /// The native `/token` refresh: the secret rotates, and the previous one may be retried within the window.
        case rotate
        /// Every other use (the Client API's session and API-key routes): only the current secret is accepted, it
        /// does not rotate, and the session's last use is recorded (at most once per ``touchGranularity(_:)``).
        case keep
        /// Signing out (the Client API's `DELETE auth/session`): any secret of the session, current or spent by a
        /// rotation, is accepted, and the presentation ends the session (``signOut(_:presenting:app:via:)``: a
        /// secret spent longer than the window ago is audited as the replay it is). Refusing a spent one within the
        /// reuse window would leave alive a session a thief rotated ahead, while the owner's client, told 401,
        /// forgets its token and never presents it again. (The native revoke ends the session for any of its
        /// secrets the same way.)
        case signOut
    }

    /// A presentation that was accepted: the session, its user, and after a rotation the secret to hand out.
    package struct Accepted: Sendable {
        package var session: SessionRecord
        package var user: UserRecord
        package var nextSecret: [UInt8]?
    }

    /// Why a presented refresh token was refused. Each façade answers it in its own envelope.
    package enum Refusal: Error, Sendable, Hashable {
        /// Not a secret of this session, or not a session this caller may use.
        case notValid
        /// A spent secret within the reuse window: a client's late retry of a race it already won.
        case alreadyUsed
        /// A spent secret after the window: someone holds a copy, and the session has ended.
        case replayed
        /// The session may not be used now.
        case ended(SessionService.Problem)

        /// For the audit log.
        package var reason: String {
            switch self {
            case .notValid: "not valid"
            case .ended(.clientRemoved): "client removed"
            case .alreadyUsed: "already used"
            case .replayed: "replayed"
            case .ended(let problem): "\(problem)"
            }
        }
    }

    /// Accepts `presented` for `session` (of `user`, nil when gone) of `app`, or refuses it. A session whose only
    /// problem is that its client is no longer configured (``SessionService/Problem/clientRemoved``, said only once
    /// the secret is known good) is refused for every use but signing out: its holder must be able to end it.
    package func accept(
        _ presented: Presented, session: SessionRecord, user: UserRecord?, app: AppSettings, mode: Mode, via: String
    ) async throws -> Accepted {
        var session = session
        let now = env.clock.now
        // The secret first: a session id alone (access tokens carry it in `sid`) tells nothing about the session.
        let classified = try await classify(presented.hash, in: session)
        guard classified != .unknown else { throw Refusal.notValid }
        // Counted once the secret is known to be the session's: a session id alone must not let anyone use up the
        // session's refresh allowance. And counted before the secret rotates: a refresh refused with 429 leaves the
        // client's token as it was, or the retry after Retry-After (longer than the reuse window) would look like a
        // replay and end the session.
        try await env.checkRateLimit(.refresh, app: app, identifier: session.id)
        if let problem = SessionService.problem(with: session, user: user, app: app, now: now, refreshing: true),
            problem != .clientRemoved || mode != .signOut
        {
            throw Refusal.ended(problem)
        }
        guard let user else { throw Refusal.ended(.userGone) }
        switch (classified, mode) {
        case (_, .signOut):
            try await signOut(session, presenting: classified, app: app, via: via)
            return Accepted(session: session, user: user, nextSecret: nil)
        case (.spent, _), (.previous, .keep):
            if isReplay(classified, session: session, app: app) { try await endReplayed(session, app: app.id, via: via) }
            throw Refusal.alreadyUsed
        case (.current, .keep):
            // Busy sessions are written at most once per granularity: the read above says whether this use is news.
            let granularity = Self.touchGranularity(app)
            if now.timeIntervalSince(session.lastActiveAt) >= granularity {
                try await env.store.touchSession(id: session.id, now: now, notBefore: now.addingTimeInterval(-granularity))
            }
            return Accepted(session: session, user: user, nextSecret: nil)
        case (.current, .rotate), (.previous, .rotate):
            guard let secret = presented.secret else { throw Refusal.notValid }
            if classified == .current {
                let salt = Secrets.randomBytes(16)
                let next = Self.derive(secret, salt: salt)
                if try await env.store.rotateSessionSecret(id: session.id, from: presented.hash, to: Self.sha256(next), salt: salt, now: now) {
                    return Accepted(session: session, user: user, nextSecret: next)
                }
                // A racing refresh rotated it first: answer as a retry of the previous secret.
                guard let reloaded = try await env.store.session(id: session.id) else { throw Refusal.notValid }
                session = reloaded
            }
            // The previous secret within the window answers the same next secret (a client that lost the answer, or
            // two racing refreshes); later, or once the session rotated again, it is a copy.
            guard let previous = session.previousSecretHash, Secrets.constantTimeEquals(presented.hash, previous),
                let salt = session.rotationSalt, let rotatedAt = session.rotatedAt
            else { throw Refusal.notValid }
            let next = Self.derive(secret, salt: salt)
            guard withinReuseWindow(since: rotatedAt, app: app), Secrets.constantTimeEquals(Self.sha256(next), session.secretHash),
                session.revokedAt == nil
            else { try await endReplayed(session, app: app.id, via: via) }
            return Accepted(session: session, user: user, nextSecret: next)
        case (.unknown, _):
            throw Refusal.notValid
        }
    }

    /// Records a refused presentation, once: it counts against the address's refresh limit unless it was counted
    /// with its session (``accept(_:session:user:app:mode:via:)`` counts every known secret), and it
    /// is audited unless it was a replay (audited as one). `app`: the app the token was issued for once that is known
    /// (a verified signature or a stored session), else nil: audited server-wide, an unverified token's claims being
    /// anyone's words.
    package func refused(_ reason: String, counted: Bool, app: AppSettings?, via: String?) async throws {
        if let app, !counted { try await env.checkRateLimit(.refresh, app: app) }
        var detail = ["reason": reason]
        if let via { detail["via"] = via }
        await env.audit(.refreshTokenInvalid, app: app?.id ?? AuthEnvironment.serverWideApp, detail: detail)
    }

    /// Ends `session` at once, at the user's or client's request: its refresh token stops working, and so do its
    /// access tokens at every Gatehouse endpoint. Audited once, as `kind` (`logout`: the session's own client ended
    /// it; `session_ended`: the user ended it from another session, named in `detail`).
    package func end(
        _ session: SessionRecord, app: String, via: String?, audited kind: AuditKind = .logout, detail more: [String: String] = [:]
    ) async throws {
        try await env.store.revokeSession(id: session.id, now: env.clock.now)
        var detail = more.merging(["session": session.id]) { _, own in own }
        if let via { detail["via"] = via }
        env.logger.info("signed out", metadata: ["app": "\(app)", "user": "\(session.userId)", "via": "\(via ?? "client api")"])
        await env.audit(kind, app: app, user: session.userId, detail: detail)
    }

    /// Ends `session` for a sign-out that presented `classified`, any of its secrets (a sign-out answers alike
    /// whatever it was given): as ``end(_:app:via:audited:detail:)`` does, or, for a secret spent longer than the
    /// reuse window ago, as the replay it is, so that the audit log still shows that someone held a copy.
    package func signOut(_ session: SessionRecord, presenting classified: Classified, app: AppSettings, via: String) async throws {
        if isReplay(classified, session: session, app: app) {
            try await recordReplay(session, app: app.id, via: via)
        } else {
            try await end(session, app: app.id, via: via)
        }
    }

    /// A spent secret came back after its window: someone holds a copy. The whole session ends.
    private func endReplayed(_ session: SessionRecord, app: String, via: String) async throws -> Never {
        try await recordReplay(session, app: app, via: via)
        throw Refusal.replayed
    }

    private func recordReplay(_ session: SessionRecord, app: String, via: String) async throws {
        try await env.store.revokeSession(id: session.id, now: env.clock.now)
        env.logger.warning(
            "refresh token reused after rotation; session revoked",
            metadata: ["app": "\(app)", "user": "\(session.userId)", "session": "\(session.id)", "via": "\(via)"]
        )
        await env.audit(.refreshTokenReused, app: app, user: session.userId, detail: ["session": session.id, "via": via])
    }

    // MARK: Secrets

    /// The current secret, the one before it (which may be retried within the reuse window), one a rotation spent
    /// earlier (and when), or none of the session's.
    package enum Classified: Equatable, Sendable {
        case current, previous, spent(at: Date), unknown
    }

    /// Compared in constant time; the store is asked only for a secret that is neither of the first two.
    package func classify(_ hash: [UInt8], in session: SessionRecord) async throws -> Classified {
        if Secrets.constantTimeEquals(hash, session.secretHash) { return .current }
        if let previous = session.previousSecretHash, Secrets.constantTimeEquals(hash, previous) { return .previous }
        if let spentAt = try await env.store.spentRefreshSecret(sessionId: session.id, secretHash: hash) { return .spent(at: spentAt) }
        return .unknown
    }

    /// Whether presenting a spent or previous secret now is a replay: later than the app's reuse window after it was
    /// spent.
    private func isReplay(_ presented: Classified, session: SessionRecord, app: AppSettings) -> Bool {
        guard session.revokedAt == nil else { return false }
        switch presented {
        case .spent(let at): return !withinReuseWindow(since: at, app: app)
        case .previous: return session.rotatedAt.map { !withinReuseWindow(since: $0, app: app) } ?? true
        case .current, .unknown: return false
        }
    }

    /// Whether a secret spent at `spentAt` may be presented now without being a replay: within the app's reuse
    /// window. A window of 0 means none at all: a secret is spent the moment it rotates, so a refresh that raced the
    /// rotating one (and started no later than it: the clock is read when a request starts) is a replay too, and
    /// ends the session, rather than answering the same new secret to both.
    private func withinReuseWindow(since spentAt: Date, app: AppSettings) -> Bool {
        let window = Self.reuseWindow(app)
        return window > 0 && env.clock.now.timeIntervalSince(spentAt) <= window
    }

    /// The app's native-auth reuse window (the default when native auth has since been removed from the app).
    package static func reuseWindow(_ app: AppSettings) -> TimeInterval {
        TimeInterval(app.nativeAuth?.refreshTokenReuseWindow ?? NativeAuthSettings(clientIds: []).refreshTokenReuseWindow)
    }

    /// How stale a session's recorded last use may be: a minute, or a tenth of the idle timeout when that is shorter.
    package static func touchGranularity(_ app: AppSettings) -> TimeInterval {
        app.sessionIdleTimeout > 0 ? min(60, TimeInterval(app.sessionIdleTimeout) / 10) : 60
    }

    private static func derive(_ secret: [UInt8], salt: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: salt, using: SymmetricKey(data: secret)))
    }

    private static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }
}
