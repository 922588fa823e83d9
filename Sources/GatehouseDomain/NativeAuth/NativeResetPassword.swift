import Foundation
import GatehouseWire
import Logging

/// Self-service password reset: `resetpassword/v1.0/start` → `challenge` (code emailed) → `continue` with the
/// code → `submit` the new password → `poll_completion` → `/token grant_type=continuation_token`.
///
/// The password is set at `submit`, in the transaction that moves the flow on (and that also confirms the address
/// and revokes every session of the user, as the Client API's reset does), so `poll_completion` answers
/// `succeeded` at once.
extension NativeAuthService {
    /// Seconds a client waits between polls; the first poll already succeeds.
    package static let pollInterval = 1

    /// `resetpassword/v1.0/start`.
    package func resetPasswordStart(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let types = try challengeTypes(request)
        let email = try username(request)
        // Counted before anything is answered: each start writes a flow and an audit row.
        try await env.checkRateLimit(.flow, app: client.app, account: email.normalized)
        let passwords = EmailPasswordService(env: env)
        // An address of the old system that Gatehouse does not know yet is migrated (without a password) first, so
        // that its owner gets the code and sets a password; the answer is the same either way.
        let account = try await passwords.migrateForReset(
            app: client.app, email: email, account: try await env.store.emailAccount(appId: client.app.id, email: email.normalized)
        )
        if client.app.revealUserExistence {
            guard let account else { throw NativeFlowError.userNotFound }
            // Without revealUserExistence a code-only account may reset, which gives it its first password; so may
            // every account of an app that migrates users (a migrated user has no password until its first reset).
            if account.passwordHash.isEmpty, !passwords.migrates(client.app) { throw NativeFlowError.userHasNoPassword }
        }
        guard types.contains(.oob) else {
            return redirect("a password reset needs a one-time code, and the client does not take codes (oob)", client: client)
        }
        let token = try await startFlow(.resetPassword, client: client, email: email, userId: account?.userId, challengeTypes: types)
        await env.audit(.resetRequested, app: client.app.id, user: account?.userId, detail: ["via": "native auth"])
        return .next(continuationToken: token.encoded)
    }

    /// `resetpassword/v1.0/challenge`: emails a code (first or again).
    package func resetPasswordChallenge(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let types = try challengeTypes(request)
        let (flow, token) = try await loadFlow(request, client: client, kinds: [.resetPassword], steps: [.started, .codeSent])
        guard types.contains(.oob) else {
            return redirect("a password reset needs a one-time code, and the client does not take codes (oob)", client: client)
        }
        return try await sendCode(flow, token: token, client: client)
    }

    /// `resetpassword/v1.0/continue` with `grant_type=oob`.
    package func resetPasswordContinue(client: Client, request: NativeAuthRequest) async throws -> NativeStep {
        let grant = try request.required(\.grantType, "grant_type")
        guard grant == NativeAuthGrantType.oob.rawValue else {
            throw NativeFlowError.invalidContinuationToken("grant_type '\(grant.prefix(64))' does not continue a password reset")
        }
        var (flow, token) = try await loadFlow(request, client: client, kinds: [.resetPassword], steps: [.codeSent])
        try await checkCode(flow, token: token, client: client, request: request)
        guard flow.userId != nil else { throw NativeFlowError.invalidCode() }
        flow.verified = true
        flow.codeHash = nil
        let (_, next) = try await advance(flow, from: token, to: .newPassword, client: client)
        return .next(continuationToken: next.encoded, expiresIn: client.settings.continuationTokenTTL)
    }

    /// `resetpassword/v1.0/submit`: sets the new password.
    package func resetPasswordSubmit(client: Client, request: NativeAuthRequest) async throws -> NativeResetSubmitted {
        let (flow, token) = try await loadFlow(request, client: client, kinds: [.resetPassword], steps: [.newPassword])
        let hash = try await hashNewPassword(try request.required(\.newPassword, "new_password"), email: flow.username, client: client)
        guard let userId = flow.userId else { throw NativeFlowError.invalidContinuationToken() }
        let (_, next) = try await advance(flow, from: token, to: .submitted, client: client, effects: [.resetPassword(userId: userId, email: flow.username, passwordHash: hash)])
        env.logger.info("password reset", metadata: ["app": "\(client.app.id)", "user": "\(userId)", "via": "native auth"])
        await env.audit(.resetCompleted, app: client.app.id, user: userId, detail: ["via": "native auth"])
        return NativeResetSubmitted(continuationToken: next.encoded, pollInterval: Self.pollInterval)
    }

    /// `resetpassword/v1.0/poll_completion`: always `succeeded`, with the token for sign-in after reset.
    package func resetPasswordPollCompletion(client: Client, request: NativeAuthRequest) async throws -> NativeResetCompleted {
        let (flow, token) = try await loadFlow(request, client: client, kinds: [.resetPassword], steps: [.submitted])
        let (_, next) = try await advance(flow, from: token, to: .completed, client: client)
        return NativeResetCompleted(continuationToken: next.encoded, expiresIn: client.settings.continuationTokenTTL)
    }
}
