import Foundation
import GatehouseWire
import Logging

/// Changing a signed-in user's email address, proving a session with a mailed code, and undoing a change.
///
/// - A change needs a recent proof (or the current password), like every credential change. The new address gets
///   a code; the change happens only when that code comes back in the same session. Existence stays hidden: an
///   address another account has confirmed answers the request as a free one does, its owner is told by mail, and no
///   code is sent, so none can come back. A registration of the new address that no one confirmed is not taken
///   over: proving the mailbox discards it, as a reset would.
/// - Once changed, both protocols see the new address at once (one email account). The old address is mailed a link
///   that works for ``undoLifetime``: it puts the old address back, ends every session, and removes what someone
///   holding the session could have added since (API keys, other identities and addresses, the password; the
///   mailbox owner's trust reset). Undo names the identity, not the address, so it still works after further changes.
extension AccountService {
    /// How long the old address's undo link works.
    package static let undoLifetime: TimeInterval = 7 * 86_400

    // MARK: Reauthentication by code

    /// `POST auth/reauthenticate/send`: mails a code to the account's address that proves the caller's session again.
    package func sendReauthenticationCode(_ manager: AccountManager) async throws {
        let caller = manager.caller
        guard let account = try await changeableAccount(of: caller) else {
            throw AuthError.accountChangeRefused("the user has no confirmed email address to send a code to")
        }
        try await env.checkSendLimit(.oneTimeCode, app: caller.app, address: account.email)
        let codes = AccountCodes(env: env)
        let (token, code) = codes.make(.reauthenticationCode, for: caller, email: account.email, address: account.recipient)
        try await env.store.issueOneTimeToken(token, mail: codes.mail(code: code, app: caller.app, recipient: account.recipient), dryRun: false)
    }

    /// `POST auth/reauthenticate` with `code`.
    package func reauthenticate(_ manager: AccountManager, code: String) async throws {
        try await SessionGate(env: env).reauthenticate(manager, code: code)
    }

    // MARK: Changing the address

    /// `POST auth/email`: asks to change the caller's address to `newEmail`, with a recent proof or
    /// `currentPassword`. A code goes to the new address (or, when another account has it, a notice to its owner).
    package func requestEmailChange(_ manager: AccountManager, to newEmail: String, currentPassword: String?) async throws {
        let caller = manager.caller
        guard let email = EmailAddress(newEmail) else { throw AuthError.invalidEmail }
        guard let account = try await changeableAccount(of: caller) else {
            throw AuthError.accountChangeRefused("the user has no confirmed email address to change; link an email/password identity instead")
        }
        guard email.normalized != account.email else { throw AuthError.accountChangeRefused("that is the account's address already") }
        let backoff = try await requireRecentProof(caller, currentPassword: currentPassword)
        // Counted per new address and client before anything says whether the address is taken.
        try await env.checkSendLimit(.oneTimeCode, app: caller.app, address: email.normalized)
        let codes = AccountCodes(env: env)
        var (token, code) = codes.make(.emailChangeCode, for: caller, email: email.normalized, address: email.display)
        let mail: OutboxMessage
        if let holder = try await env.store.emailAccount(appId: caller.app.id, email: email.normalized), holder.confirmedAt != nil {
            // Taken: its owner hears of it, and the code row is born superseded, so the same statements run and no
            // code can ever match.
            token.supersededAt = token.createdAt
            mail = env.mail(.emailInUse, app: caller.app, recipient: holder.recipient, MailVariables(appName: caller.app.name, email: holder.recipient))
        } else {
            mail = codes.mail(code: code, app: caller.app, recipient: email.display)
        }
        try await env.store.issueOneTimeToken(token, mail: mail, dryRun: false)
        try await backoff?.succeeded()
        await env.audit(.emailChangeRequested, app: caller.app.id, user: caller.user.id, detail: ["session": caller.session.id])
    }

    /// `POST auth/email/confirm`: the code the new address got, in the session that asked for it. The account takes
    /// the new address at once; the old one is mailed the undo link.
    package func confirmEmailChange(_ manager: AccountManager, code: String) async throws {
        let caller = manager.caller
        let token = try await AccountCodes(env: env).check(.emailChangeCode, code: code, caller: caller)
        guard let account = try await changeableAccount(of: caller), let identity = try await env.store.identities(userId: caller.user.id)
            .first(where: { $0.providerType == EmailPasswordService.providerType && $0.externalId == account.email })
        else { throw AuthError.invalidCode }
        let now = env.clock.now
        let secret = Secrets.token()
        let undo = OneTimeTokenRecord(
            id: Secrets.objectID(at: now), appId: caller.app.id, kind: .emailChangeUndo, userId: caller.user.id, secretHash: Secrets.sha256(secret),
            createdAt: now, expiresAt: now.addingTimeInterval(Self.undoLifetime), email: account.email, requester: env.requesterKey,
            address: account.recipient, subject: identity.id
        )
        var variables = MailVariables(appName: caller.app.name, email: account.recipient)
        variables.link = MailLinks.link(base: "\(env.publicURL)/app/\(caller.app.id)/email/undo", token: secret, tokenId: undo.id)
        variables.token = secret
        variables.tokenId = undo.id
        variables.expiresInMinutes = Int(Self.undoLifetime / 60)
        let notice = env.mail(.emailChanged, app: caller.app, recipient: account.recipient, variables)
        let provenance = Provenance(adding: .oneTimeCode, by: caller)
        switch try await env.store.changeEmail(
            userId: caller.user.id, from: account.email, code: token.id, undo: undo, mail: [notice], by: provenance, now: now
        ) {
        case .changed:
            env.logger.info("email changed", metadata: ["app": "\(caller.app.id)", "user": "\(caller.user.id)"])
            await env.audit(.emailChanged, app: caller.app.id, user: caller.user.id, detail: ["session": caller.session.id])
        case .codeSpent, .accountGone:
            throw AuthError.invalidCode
        case .addressTaken:
            // Only the new mailbox's owner (who holds the code) learns this: someone confirmed it meanwhile.
            throw AuthError.accountNameInUse
        }
    }

    /// The account a change of address or password changes, and where a reauthentication code goes: the user's
    /// first confirmed email account.
    func changeableAccount(of caller: SessionService.Caller) async throws -> EmailAccountRecord? {
        try await env.store.emailAccounts(userId: caller.user.id).first { $0.confirmedAt != nil }
    }

    /// A recent proof, or the current password proven now (its login backoff returned, for the caller to end once
    /// the change is made); otherwise ``AuthError/reauthenticationRequired``.
    func requireRecentProof(_ caller: SessionService.Caller, currentPassword: String?) async throws -> LoginBackoff? {
        let gate = SessionGate(env: env)
        if let currentPassword { return try await gate.provePassword(of: caller, currentPassword).backoff }
        try await gate.requireRecentProof(caller)
        return nil
    }

    // MARK: Undo

    /// `POST …/local-userpass/email/undo` and the hosted undo page: redeems the undo link the old address got. The
    /// old address comes back, proven; every session ends; API keys, other identities and addresses and the password
    /// go. Answers a reset token (and its id) with which the owner sets a new password at once (the hosted page asks
    /// for it), or, when `issuingPasswordToken` is false, nil: the owner asks for a reset.
    @discardableResult
    package func undoEmailChange(appId: String, token: String, tokenId: String, issuingPasswordToken: Bool = false) async throws
        -> EmailPasswordService.Confirmed.PasswordToken?
    {
        let app = try env.app(appId)
        guard let local = app.localUserpass else { throw AuthError.providerNotEnabled(EmailPasswordService.providerType) }
        let passwords = EmailPasswordService(env: env)
        try await env.checkRateLimit(.code, app: app, identifier: tokenId)
        guard case .valid(let record) = try await passwords.tokenState(appId: appId, token: token, tokenId: tokenId, kind: .emailChangeUndo),
            let (userId, email) = try await env.store.undoEmailChange(tokenId: record.id, now: env.clock.now)
        else { throw AuthError.invalidTokenData }
        env.logger.warning("email change undone", metadata: ["app": "\(app.id)", "user": "\(userId)"])
        await env.audit(.emailChangeUndone, app: app.id, user: userId)
        guard issuingPasswordToken, let address = EmailAddress(record.address ?? email) else { return nil }
        let (reset, secret) = passwords.makeToken(.passwordReset, app: app, local: local, userId: userId, email: address)
        try await env.store.issueOneTimeToken(reset, mail: nil, dryRun: false)
        return .init(token: secret, tokenId: reset.id)
    }
}
