import Foundation
import GatehouseWire
import Logging

/// What a signed-in user does with their own account: see and end their sessions, prove their password again,
/// change it, unlink an identity. Both protocols' sessions reach it (a native session's access token is a Client API
/// access token), through the Client API's extension routes.
///
/// The rules, each enforced here once:
/// - Only a session that may manage the account (``SessionService/Caller/manager(to:)``) gets anywhere: an API-key
///   session may not list, end, prove or change anything.
/// - Changing a credential (the password, an identity) needs a recent proof: a session proven within the app's
///   `recentProofWindow` (``SessionGate/isRecentlyProven(_:)``, after a login or ``reauthenticate(_:password:)``); a
///   password change also takes the current password in the request instead. Ending sessions needs none: it only
///   ever takes access away.
/// - A password change ends every other session of the user, keeps the caller's (proven now), and mails the
///   account's address a notice.
/// - An identity is unlinked only while the user keeps a way to sign in (``keepsAWayIn(_:_:)``), decided in the same
///   transaction as the removal.
package struct AccountService: Sendable {
    package let env: AuthEnvironment

    package init(env: AuthEnvironment) { self.env = env }

    /// A session as its user sees it.
    package struct Session: Sendable, Hashable {
        package var record: SessionRecord
        /// Whether it is the caller's own.
        package var isCurrent: Bool
    }

    // MARK: Sessions

    /// `GET auth/sessions`: the user's live sessions, newest first.
    package func sessions(_ manager: AccountManager) async throws -> [Session] {
        let caller = manager.caller
        return try await env.store.liveSessions(userId: caller.user.id, now: env.clock.now)
            .map { Session(record: $0, isCurrent: $0.id == caller.session.id) }
    }

    /// `DELETE auth/sessions/{id}`: ends one live session of the caller's user (its own too).
    package func endSession(_ manager: AccountManager, id: String) async throws {
        let caller = manager.caller
        guard let session = try await env.store.session(id: id), session.userId == caller.user.id, session.revokedAt == nil,
            session.expiresAt > env.clock.now
        else { throw AuthError.sessionNotFound }
        try await SessionRefresh(env: env).end(
            session, app: caller.app.id, via: "self-service", audited: .sessionEnded, detail: ["by": caller.session.id]
        )
    }

    /// `DELETE auth/sessions?except=current`: ends every session of the caller's user but the caller's.
    package func endOtherSessions(_ manager: AccountManager) async throws {
        let caller = manager.caller
        let ended = try await env.store.revokeAllSessions(userId: caller.user.id, keeping: caller.session.id, now: env.clock.now)
        env.logger.info("other sessions ended", metadata: ["app": "\(caller.app.id)", "user": "\(caller.user.id)", "sessions": "\(ended)"])
        await env.audit(.sessionEnded, app: caller.app.id, user: caller.user.id, detail: ["kept": caller.session.id, "sessions": "\(ended)"])
    }

    // MARK: Credentials

    /// `POST auth/reauthenticate`: proves the account's password in the caller's session.
    package func reauthenticate(_ manager: AccountManager, password: String) async throws {
        try await SessionGate(env: env).reauthenticate(manager, password: password)
    }

    /// `POST auth/password`: the signed-in user's new password, with a recent proof or `currentPassword`.
    package func changePassword(_ manager: AccountManager, to password: String, currentPassword: String?) async throws {
        let caller = manager.caller
        guard let account = try await changeableAccount(of: caller) else {
            throw AuthError.accountChangeRefused("the user has no password; link an email/password identity to add one")
        }
        guard let local = caller.app.localUserpass else { throw AuthError.providerNotEnabled(EmailPasswordService.providerType) }
        // The new password is checked before the current one is: a refusal of the policy costs no login attempt.
        try local.password.check(password, email: account.email)
        let backoff = try await requireRecentProof(caller, currentPassword: currentPassword)
        let methods = currentPassword == nil ? caller.session.methods : SessionGate.adding(.password, to: caller.session.methods)
        let hash = try await env.hasher.hash(password, parameters: caller.app.passwordHash)
        let notice = env.mail(.passwordChanged, app: caller.app, recipient: account.recipient, MailVariables(appName: caller.app.name, email: account.recipient))
        guard try await env.store.changePassword(
            userId: caller.user.id, newPasswordHash: hash, session: caller.session.id, methods: methods, mail: notice, now: env.clock.now
        ) else { throw AuthError.invalidSession("invalid session") }
        try await backoff?.succeeded()
        env.logger.info("password changed", metadata: ["app": "\(caller.app.id)", "user": "\(caller.user.id)"])
        await env.audit(.passwordChanged, app: caller.app.id, user: caller.user.id, detail: ["session": caller.session.id])
    }

    /// `DELETE auth/identities/{id}`: unlinks the identity whose profile id is `id` (of `providerType` when given),
    /// with a recent proof, while the user keeps a way to sign in.
    package func unlink(_ manager: AccountManager, identityId: String, providerType: String?) async throws {
        let caller = manager.caller
        try await SessionGate(env: env).requireRecentProof(caller)
        let identities = try await env.store.identities(userId: caller.user.id)
        guard let identity = identities.first(where: { SessionService.profileId(of: $0) == identityId && (providerType ?? $0.providerType) == $0.providerType })
        else { throw AuthError.identityNotFound }
        guard identity.providerType != APIKeyService.providerType else {
            throw AuthError.accountChangeRefused("API keys are removed with DELETE auth/api_keys/{id}")
        }
        switch try await env.store.removeIdentity(id: identity.id, userId: caller.user.id, keepsAWayIn: Self.keepsAWayIn) {
        case .removed:
            env.logger.info("identity unlinked", metadata: ["app": "\(caller.app.id)", "user": "\(caller.user.id)", "provider": "\(identity.providerType)"])
            await env.audit(.identityUnlinked, app: caller.app.id, user: caller.user.id, detail: ["provider": identity.providerType])
            let label = identity.providerType == EmailPasswordService.providerType ? identity.externalId : nil
            await notify(.credentialRemoved, what: Self.describe(providerType: identity.providerType, detail: label), user: caller.user.id, app: caller.app)
            // The address that was unlinked hears of it too: it no longer signs in to this account.
            if let label, let address = EmailAddress(label) {
                var variables = MailVariables(appName: caller.app.name, email: address.display)
                variables.what = Self.describe(providerType: identity.providerType, detail: label)
                try? await env.store.enqueue(env.mail(.credentialRemoved, app: caller.app, recipient: address.display, variables))
            }
        case .notFound:
            throw AuthError.identityNotFound
        case .lastWayIn:
            throw AuthError.accountChangeRefused("this is the user's last way to sign in; link another before unlinking it")
        }
    }

    /// Whether a user with these identities and email accounts can still sign in: with a confirmed email account
    /// (its password, or native auth's emailed code), or an identity an identity provider, a custom JWT or the custom
    /// function vouches for. An API key cannot manage the account, and an anonymous identity cannot be logged in to again, so neither
    /// counts.
    package static func keepsAWayIn(_ identities: [IdentityRecord], _ accounts: [EmailAccountRecord]) -> Bool {
        let mailbox = accounts.contains { $0.confirmedAt != nil }
        let federated = identities.contains {
            ![EmailPasswordService.providerType, APIKeyService.providerType, AnonymousService.providerType].contains($0.providerType)
        }
        return mailbox || federated
    }

    // MARK: Notices

    /// Mails the account's addresses (its confirmed email accounts') that a signed-in session added or removed a way
    /// in, `what` in words ("A Google sign-in"). A user without a confirmed address is not mailed. Sent after the
    /// change, through the outbox; a failure to queue it is logged, never undoes the change.
    package func notify(_ kind: MailKind, what: String, user userId: String, app: AppSettings) async {
        do {
            for mail in try await notices(kind, what: what, user: userId, app: app) { try await env.store.enqueue(mail) }
        } catch {
            env.logger.error("credential notice not queued", metadata: ["app": "\(app.id)", "user": "\(userId)", "error": "\(error)"])
        }
    }

    /// The notices of `kind` to the user's confirmed addresses, not yet queued.
    package func notices(_ kind: MailKind, what: String = "", user userId: String, app: AppSettings) async throws -> [OutboxMessage] {
        try await env.store.emailAccounts(userId: userId).filter { $0.confirmedAt != nil }.map { account in
            var variables = MailVariables(appName: app.name, email: account.recipient)
            variables.what = what
            return env.mail(kind, app: app, recipient: account.recipient, variables)
        }
    }

    /// A credential in words, for a notice.
    package static func describe(providerType: String, detail: String? = nil) -> String {
        switch providerType {
        case EmailPasswordService.providerType: "The email address \(detail ?? "")"
        case APIKeyService.providerType: "An API key named \(detail ?? "")"
        case AnonymousService.providerType: "An anonymous sign-in"
        case "oauth2-google": "A Google sign-in"
        case "oauth2-apple": "A Sign in with Apple"
        case "oauth2-facebook": "A Facebook sign-in"
        case CustomTokenProvider.providerType: "A sign-in through the app's own service (custom JWT)"
        case FunctionRunner.providerType: "A sign-in through the app's own service (custom function)"
        default: "A sign-in (\(providerType))"
        }
    }

    // MARK: Callers

    /// The caller behind an access token, as one who may manage the account (`action`, for the refusal of an API-key
    /// session). Every operation here takes one.
    package func manager(_ accessToken: String, to action: String) async throws -> AccountManager {
        try await SessionService(env: env).authenticate(accessToken, as: .access).manager(to: action)
    }
}
