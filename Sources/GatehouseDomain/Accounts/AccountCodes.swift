import Foundation
import GatehouseWire

/// Codes mailed to a signed-in user: one to the account's address that proves the session again, one to a new
/// address that proves an email change. Each is good in the session that asked for it only (its token's requester
/// is that session), for ``lifetime``, for ``maxAttempts`` guesses, once; a newer one of the same kind for the same
/// session supersedes it. Stored, as every secret, as a SHA-256 (of the token id and the code), compared in constant
/// time; every guess is counted before it is compared, so racing guesses cannot pass the allowance.
package struct AccountCodes: Sendable {
    package let env: AuthEnvironment

    package init(env: AuthEnvironment) { self.env = env }

    /// Decimal digits per code.
    package static let length = 8
    /// How long a code works.
    package static let lifetime: TimeInterval = 600
    /// Guesses per code, wrong or right: the next one spends it.
    package static let maxAttempts = 5

    /// The requester key of a session's codes.
    package static func requester(_ session: SessionRecord) -> String { "session:\(session.id)" }

    /// A new code of `kind` for the caller's session, to `address` (`email`: its normalized form), with its mail
    /// (nil: the token alone, an inert stand-in for one that is not sent).
    package func make(
        _ kind: OneTimeTokenKind, for caller: SessionService.Caller, email: String, address: String
    ) -> (token: OneTimeTokenRecord, code: String) {
        let now = env.clock.now
        let id = Secrets.objectID(at: now)
        let code = OneTimeCode.generate(length: Self.length)
        let token = OneTimeTokenRecord(
            id: id, appId: caller.app.id, kind: kind, userId: caller.user.id, secretHash: Self.hash(id: id, code: code), createdAt: now,
            expiresAt: now.addingTimeInterval(Self.lifetime), email: email, requester: Self.requester(caller.session), address: address
        )
        return (token, code)
    }

    /// The code mail to `recipient`.
    package func mail(code: String, app: AppSettings, recipient: String) -> OutboxMessage {
        env.mail(
            .oneTimeCode, app: app, recipient: recipient,
            MailVariables(appName: app.name, email: recipient, code: code, expiresInMinutes: Int(Self.lifetime / 60))
        )
    }

    /// The live code of `kind` the caller's session asked for, if `code` is it: counted against the app's `code`
    /// limit (per session) and the code's own guesses first. Not spent: the caller spends it with what it proves.
    /// Anything else is ``AuthError/invalidCode``.
    package func check(_ kind: OneTimeTokenKind, code: String, caller: SessionService.Caller) async throws -> OneTimeTokenRecord {
        try await env.checkRateLimit(.code, app: caller.app, identifier: caller.session.id)
        let now = env.clock.now
        guard code.utf8.count <= 64,
            let token = try await env.store.liveToken(userId: caller.user.id, kind: kind, requester: Self.requester(caller.session), now: now),
            try await env.store.countGuess(tokenId: token.id, limit: Self.maxAttempts, now: now)
        else { throw AuthError.invalidCode }
        guard Secrets.constantTimeEquals(Self.hash(id: token.id, code: code), token.secretHash) else {
            await env.audit(.codeFailed, app: caller.app.id, user: caller.user.id, detail: ["kind": kind.rawValue])
            throw AuthError.invalidCode
        }
        return token
    }

    private static func hash(id: String, code: String) -> [UInt8] { Secrets.sha256("\(id):\(code)") }
}
