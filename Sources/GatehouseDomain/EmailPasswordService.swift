import Foundation
import GatehouseWire
import Logging

/// The `local-userpass` provider: registration, confirmation, password reset and login.
///
/// Unless the app sets `revealUserExistence`, an unknown address gets the same answer as a known one and the
/// server does the same work for it (a password verification against a dummy hash, the same token statements
/// rolled back), so neither the answer nor its timing tells whether an account exists.
package struct EmailPasswordService: Sendable {
    package let env: AuthEnvironment

    package static let providerType = "local-userpass"

    private func provider(_ appId: String) throws(AuthError) -> (AppSettings, LocalUserpassConfiguration) {
        let app = try env.app(appId)
        guard let local = app.localUserpass else { throw .providerNotEnabled(Self.providerType) }
        return (app, local)
    }


    /// `register`: a pending account and a confirmation email, or (with `confirmation: auto`) a confirmed account.
    ///
    /// A registration over a pending one (someone registered the address and no one confirmed it) replaces it: the
    /// new password, a new link, and the older links stop working. For a confirmed address, an app that reveals user
    /// existence answers `AccountNameInUse` (before any hashing, as App Services does); any other answers as it would
    /// a new registration, after the same work, and tells the address's owner by email instead.
    package func register(appId: String, email rawEmail: String, password: String) async throws {
        let (app, local) = try provider(appId)
        guard let email = EmailAddress(rawEmail) else { throw AuthError.invalidEmail }
        try await env.checkRateLimit(.registration, app: app, account: email.normalized)
        try local.password.check(password, email: email.normalized)
        let existing = try await env.store.emailAccount(appId: app.id, email: email.normalized)
        if app.revealUserExistence, existing != nil { throw AuthError.accountNameInUse }
        // Counted for every registration, taken or not, mailing or not: the limit must not tell them apart.
        try await env.checkSendLimit(.confirmation, app: app, address: email.normalized)
        let hash = try await env.hasher.hash(password, parameters: app.passwordHash)
        if let existing, existing.confirmedAt != nil { return try await registrationRefused(app: app, owner: existing) }
        if let existing, local.confirmation == .auto {
            // `auto` confirms without any proof of the mailbox: replacing a pending account in place (an import's
            // unverified address, one left pending when the app switched to `auto`) would hand that user — its id,
            // its custom data — to whoever registers its address. The pending account counts as taken: its owner is
            // mailed, and gets in by a reset, which proves the mailbox and confirms the account.
            return try await registrationRefused(app: app, owner: existing)
        }
        let now = env.clock.now
        let userId = existing?.userId ?? Secrets.objectID(at: now)
        // Neither `auto` nor a confirmation function's `success` proves the mailbox (a function may vouch on the
        // address's domain alone): the account is confirmed and stays unproven, so the owner's first proof still
        // discards whatever its registrant added (``MailboxProof``).
        var confirmed = local.confirmation == .auto
        var token: OneTimeTokenRecord?
        var mail: OutboxMessage?
        /// A confirmation function to call once the pending account is written (an app that hides user existence).
        var callAfterAnswer: ConfirmationCall?
        switch local.confirmation {
        case .auto:
            break
        case .email:
            (token, mail) = makeTokenMail(.confirmation, app: app, local: local, userId: userId, email: email, recipient: existing?.recipient)
        case .function:
            let (record, secret) = makeToken(.confirmation, app: app, local: local, userId: userId, email: email)
            let call = ConfirmationCall(appId: app.id, token: secret, tokenId: record.id, username: email.display)
            if app.revealUserExistence {
                // The function decides before anything is written: on `fail` (or when it cannot be reached) no account
                // exists (or the pending one stays as it was); on `pending` the account waits for `confirm` with the
                // token the function was given.
                switch try await FunctionRunner(env: env).confirm(call, settings: local.confirmationFunction) {
                case .success: confirmed = true
                case .pending: token = record
                case .fail: throw AuthError.confirmationFailed(email.display)
                }
            } else {
                // Its verdict (or failure) would tell a new address from a taken one, which gets no call: the pending
                // account is written, the caller answered, and the function decides after (``decideAfterAnswer``).
                token = record
                callAfterAnswer = call
            }
        }
        let (user, identity, account) = Self.newAccount(
            userId: userId, app: app, email: email, passwordHash: hash, confirmed: confirmed, proven: false, now: now
        )
        if let existing {
            guard try await env.store.replacePendingRegistration(account, token: token, mail: mail, now: now) else {
                // Confirmed meanwhile: taken after all.
                return try await registrationRefused(app: app, owner: existing)
            }
            env.logger.info("pending registration replaced", metadata: ["app": "\(app.id)", "user": "\(userId)", "confirmed": "\(confirmed)"])
            await env.audit(.registration, app: app.id, user: userId, detail: ["provider": Self.providerType, "confirmed": "\(confirmed)", "replaced": "true"])
            if let callAfterAnswer { decideAfterAnswer(callAfterAnswer, account: account, local: local) }
            return
        }
        // The user and its registration row are one write.
        let detail = ["provider": Self.providerType, "confirmed": "\(confirmed)"]
        let event = env.auditEvent(.registration, app: app.id, user: userId, detail: detail)
        do {
            try await env.store.createEmailUser(user: user, identity: identity, account: account, token: token, mail: mail, recording: event)
        } catch StoreError.conflict {
            // A racing registration of the address won; its email is on its way, and this one is dropped.
            if app.revealUserExistence { throw AuthError.accountNameInUse }
            await env.audit(.registrationRefused, app: app.id, detail: ["provider": Self.providerType, "race": "true"])
            return
        }
        env.countAuthEvent(.registration, app: app.id, detail: detail)
        env.logger.info("user registered", metadata: ["app": "\(app.id)", "user": "\(userId)", "confirmed": "\(confirmed)"])
        if let callAfterAnswer { decideAfterAnswer(callAfterAnswer, account: account, local: local) }
    }

    /// Runs the confirmation function of a registration after its answer: `success` confirms the pending account,
    /// `pending` leaves it waiting for `confirm`, and `fail` (or a function that cannot be reached) discards it if it
    /// is still pending, as if it had never been made.
    private func decideAfterAnswer(_ call: ConfirmationCall, account: EmailAccountRecord, local: LocalUserpassConfiguration) {
        env.background.run { [env] in
            let verdict: FunctionStatus?
            do {
                verdict = try await FunctionRunner(env: env).confirm(call, settings: local.confirmationFunction)
            } catch {
                env.logger.notice("confirmation function failed after the answer", metadata: ["app": "\(account.appId)", "error": "\(error)"])
                verdict = nil
            }
            do {
                switch verdict {
                case .success?:
                    if try await env.store.redeemConfirmationToken(id: call.tokenId, now: env.clock.now, provingMailbox: false) != nil {
                        await env.audit(.confirmation, app: account.appId, user: account.userId, detail: ["by": "function"])
                    }
                case .pending?:
                    break
                case .fail?, nil:
                    if try await env.store.discardPendingRegistration(account) {
                        env.logger.info("registration refused by the confirmation function", metadata: ["app": "\(account.appId)"])
                    }
                }
            } catch {
                env.logger.error("cannot apply the confirmation function's verdict", metadata: ["app": "\(account.appId)", "error": "\(error)"])
            }
        }
    }

    /// The records of a new email/password user, for a registration or a native sign-up: the user, its
    /// `local-userpass` identity (profile `email`, plus `profile`), and its email account.
    package static func newAccount(
        userId: String, app: AppSettings, email: EmailAddress, passwordHash: String, confirmed: Bool, proven: Bool,
        profile: [String: JSONValue] = [:], now: Date
    ) -> (UserRecord, IdentityRecord, EmailAccountRecord) {
        let user = UserRecord(id: userId, appId: app.id, createdAt: now, disabled: false, customData: [:])
        let identity = IdentityRecord(
            id: Secrets.objectID(at: now), userId: userId, appId: app.id, providerType: providerType, externalId: email.normalized,
            data: profile.merging(["email": .string(email.display)]) { _, address in address }, createdAt: now
        )
        let account = EmailAccountRecord(
            appId: app.id, email: email.normalized, userId: userId, passwordHash: passwordHash, confirmedAt: confirmed ? now : nil,
            mailboxProvenAt: proven ? now : nil, address: email.display
        )
        return (user, identity, account)
    }

    /// A registration of a taken address, in an app that does not reveal user existence: the caller gets the answer
    /// of a new registration; the owner gets an email saying someone tried.
    /// The notice goes to the owner's stored address, not to the caller's spelling of it.
    private func registrationRefused(app: AppSettings, owner: EmailAccountRecord) async throws {
        let recipient = owner.recipient
        try await env.store.enqueue(env.mail(.accountExists, app: app, recipient: recipient, MailVariables(appName: app.name, email: recipient)))
        env.logger.info("registration of a taken address", metadata: ["app": "\(app.id)"])
        await env.audit(.registrationRefused, app: app.id, user: owner.userId, detail: ["provider": Self.providerType])
    }

    /// A new token of `kind` (the record to store, and its secret).
    package func makeToken(
        _ kind: OneTimeTokenKind, app: AppSettings, local: LocalUserpassConfiguration, userId: String, email: EmailAddress
    ) -> (OneTimeTokenRecord, String) {
        let now = env.clock.now
        let secret = Secrets.token()
        let token = OneTimeTokenRecord(
            id: Secrets.objectID(at: now), appId: app.id, kind: kind, userId: userId, secretHash: Secrets.sha256(secret),
            createdAt: now, expiresAt: now.addingTimeInterval(TimeInterval(local.tokenTTL)), usedAt: nil, supersededAt: nil,
            email: email.normalized, requester: env.requesterKey
        )
        return (token, secret)
    }

    /// A new token of `kind` and the email carrying its link, to `recipient`: the account's stored address
    /// (``EmailAccountRecord/recipient``) when it has one, never the caller's spelling of a known address.
    private func makeTokenMail(
        _ kind: OneTimeTokenKind,
        app: AppSettings,
        local: LocalUserpassConfiguration,
        userId: String,
        email: EmailAddress,
        recipient: String?
    ) -> (OneTimeTokenRecord, OutboxMessage) {
        let recipient = recipient ?? email.display
        let (token, secret) = makeToken(kind, app: app, local: local, userId: userId, email: email)
        let mailKind: MailKind
        let base: String
        switch kind {
        case .confirmation:
            mailKind = .confirmation
            base = local.emailConfirmationURL ?? "\(env.publicURL)/app/\(app.id)/confirm"
        case .passwordReset:
            mailKind = .passwordReset
            base = local.resetPasswordURL ?? "\(env.publicURL)/app/\(app.id)/reset"
        case .reauthenticationCode, .emailChangeCode, .emailChangeUndo:
            // The private callers pass the two link kinds only; an account's codes and undo links are made by
            // AccountService.
            preconditionFailure("\(kind) is not a registration or reset link")
        }
        var variables = MailVariables(appName: app.name, email: recipient)
        variables.link = MailLinks.link(base: base, token: secret, tokenId: token.id)
        variables.token = secret
        variables.tokenId = token.id
        variables.expiresInMinutes = max(1, local.tokenTTL / 60)
        return (token, env.mail(mailKind, app: app, recipient: recipient, variables))
    }

    /// Issues a token and its email for `account`, or, when `account` is nil, does the same work and rolls it back.
    /// `counted`: the send limit was checked already (before an answer that says whether the address is known).
    private func issue(
        _ kind: OneTimeTokenKind, app: AppSettings, local: LocalUserpassConfiguration, email: EmailAddress, account: EmailAccountRecord?,
        counted: Bool = false
    ) async throws {
        if !counted { try await env.checkSendLimit(kind == .confirmation ? .confirmation : .passwordReset, app: app, address: email.normalized) }
        let (token, mail) = makeTokenMail(
            kind, app: app, local: local, userId: account?.userId ?? Secrets.objectID(), email: email, recipient: account?.recipient
        )
        try await env.store.issueOneTimeToken(token, mail: mail, dryRun: account == nil)
    }

    /// `confirm/send`: a new confirmation email for a pending account (older links stop working).
    package func resendConfirmation(appId: String, email rawEmail: String) async throws {
        let (app, local) = try provider(appId)
        guard let email = EmailAddress(rawEmail) else { throw AuthError.invalidEmail }
        let account = try await env.store.emailAccount(appId: app.id, email: email.normalized)
        if app.revealUserExistence {
            // Counted before the answer tells whether the address is known: no unlimited lookups.
            try await env.checkSendLimit(.confirmation, app: app, address: email.normalized)
            guard let account else { throw AuthError.userNotFound }
            guard account.confirmedAt == nil else { throw AuthError.userAlreadyConfirmed }
            try await issue(.confirmation, app: app, local: local, email: email, account: account, counted: true)
        } else if let account, account.confirmedAt != nil {
            // Tell the owner, not the caller, with the statements a pending account's new link runs (a token row,
            // born superseded so that it can never be redeemed), so that the answer takes as long.
            try await env.checkSendLimit(.confirmation, app: app, address: email.normalized)
            var (inert, _) = makeToken(.confirmation, app: app, local: local, userId: account.userId, email: email)
            inert.supersededAt = inert.createdAt
            let notice = env.mail(.alreadyConfirmed, app: app, recipient: account.recipient, MailVariables(appName: app.name, email: account.recipient))
            try await env.store.issueOneTimeToken(inert, mail: notice, dryRun: false)
        } else {
            try await issue(.confirmation, app: app, local: local, email: email, account: account)
        }
    }

    /// What a confirmation did.
    package enum Confirmed: Sendable, Equatable {
        /// The registration's password is confirmed: the user signs in with it.
        case passwordConfirmed
        /// Several registrations named the address while it was pending, so the link proved the mailbox and confirmed
        /// the account but no password (``MailboxProof/registrationConfirmed``). `passwordToken` is a reset token
        /// (and its id) the confirmer may set a password with at once, when one was asked for; otherwise the owner
        /// asks for a reset.
        case noPassword(passwordToken: PasswordToken?)

        /// A reset token's secret and id, for the hosted page's form.
        package struct PasswordToken: Sendable, Equatable {
            package var token: String
            package var tokenId: String
        }
    }

    /// `confirm`: confirms the account of a valid confirmation token, once.
    ///
    /// - Parameter issuingPasswordToken: for a confirmation that confirms no password (a contested registration),
    ///   issue a reset token for the caller, who just proved the mailbox (the hosted page asks for the password at once).
    @discardableResult
    package func confirm(appId: String, token: String, tokenId: String, issuingPasswordToken: Bool = false) async throws -> Confirmed {
        let (app, local) = try provider(appId)
        guard let record = try await validToken(token: token, tokenId: tokenId, kind: .confirmation, app: app) else {
            throw AuthError.invalidTokenData
        }
        guard let outcome = try await env.store.redeemConfirmationToken(id: record.id, now: env.clock.now, provingMailbox: true) else {
            throw AuthError.invalidTokenData
        }
        env.logger.info("user confirmed", metadata: ["app": "\(app.id)", "user": "\(record.userId)"])
        guard outcome == .noPassword else {
            await env.audit(.confirmation, app: app.id, user: record.userId)
            return .passwordConfirmed
        }
        await env.audit(.confirmation, app: app.id, user: record.userId, detail: ["password": "none", "contested": "true"])
        guard issuingPasswordToken, let address = record.email.flatMap(EmailAddress.init) else { return .noPassword(passwordToken: nil) }
        let (reset, secret) = makeToken(.passwordReset, app: app, local: local, userId: record.userId, email: address)
        try await env.store.issueOneTimeToken(reset, mail: nil, dryRun: false)
        return .noPassword(passwordToken: .init(token: secret, tokenId: reset.id))
    }

    /// `confirm/call`: runs the confirmation function again for a pending account, with a new token (older ones
    /// stop working). Calls count against the app's per-address `emailLimit`.
    ///
    /// Where the app reveals user existence the function runs inside the request, whose answer is the function's.
    /// Otherwise every address gets 200 at once, after the same work (the limit counted, the account looked up), and
    /// the function runs for a pending account after the answer: neither its verdict nor its latency may tell that
    /// the address has an account.
    package func retryCustomConfirmation(appId: String, email rawEmail: String) async throws {
        let (app, local) = try provider(appId)
        guard let email = EmailAddress(rawEmail) else { throw AuthError.invalidEmail }
        guard local.confirmation == .function else {
            let how = local.confirmation == .auto ? "automatic confirmation is enabled" : "confirmation is by email"
            throw AuthError.functionNotEnabled("cannot run confirmation for \(email.display): \(how)")
        }
        if !app.revealUserExistence {
            try await env.checkSendLimit(.confirmation, app: app, address: email.normalized)
            guard let account = try await env.store.emailAccount(appId: app.id, email: email.normalized), account.confirmedAt == nil else { return }
            env.background.run { [self] in
                do {
                    try await runConfirmationFunction(account, app: app, local: local, email: email)
                } catch {
                    env.logger.notice("confirmation function failed after the answer", metadata: ["app": "\(app.id)", "error": "\(error)"])
                }
            }
            return
        }
        try await env.checkSendLimit(.confirmation, app: app, address: email.normalized)
        guard let account = try await env.store.emailAccount(appId: app.id, email: email.normalized) else { throw AuthError.userNotFound }
        guard account.confirmedAt == nil else { throw AuthError.userAlreadyConfirmed }
        try await runConfirmationFunction(account, app: app, local: local, email: email)
    }

    /// Gives the confirmation function a new token for `account` and acts on its verdict.
    private func runConfirmationFunction(_ account: EmailAccountRecord, app: AppSettings, local: LocalUserpassConfiguration, email: EmailAddress)
        async throws
    {
        let (token, secret) = makeToken(.confirmation, app: app, local: local, userId: account.userId, email: email)
        try await env.store.issueOneTimeToken(token, mail: nil, dryRun: false)
        let call = ConfirmationCall(appId: app.id, token: secret, tokenId: token.id, username: email.display)
        let verdict = try await runRetiringOnFailure(token) { try await FunctionRunner(env: env).confirm(call, settings: local.confirmationFunction) }
        switch verdict {
        case .success:
            guard try await env.store.redeemConfirmationToken(id: token.id, now: env.clock.now, provingMailbox: false) != nil else {
                throw AuthError.invalidTokenData
            }
            env.logger.info("user confirmed", metadata: ["app": "\(app.id)", "user": "\(account.userId)"])
            await env.audit(.confirmation, app: app.id, user: account.userId, detail: ["by": "function"])
        case .pending:
            break
        case .fail:
            throw AuthError.confirmationFailed(email.display)
        }
    }

    /// `reset/call`: runs the reset function. The function gets a reset token, never the password; on `success` the
    /// new password is set (and every session ends), on `pending` the token waits for `reset` with it and a password,
    /// on `fail` nothing changes. Calls count against the app's per-address `emailLimit`.
    ///
    /// Where the app reveals user existence the function runs inside the request, whose answer is the function's
    /// (an unknown address is `UserNotFound`). Otherwise every address gets 200 after the same work (the limit, the
    /// lookup, the hash of the new password), and the function runs for a known address after the answer: the caller
    /// learns the outcome by signing in.
    package func callResetFunction(appId: String, email rawEmail: String, password: String, arguments: [JSONValue]) async throws {
        let (app, local) = try provider(appId)
        guard let email = EmailAddress(rawEmail) else { throw AuthError.invalidEmail }
        guard local.reset == .function else { throw AuthError.functionNotEnabled("the reset function is not enabled for this app") }
        try local.password.check(password, email: email.normalized)
        try await env.checkSendLimit(.passwordReset, app: app, address: email.normalized)
        let account = try await env.store.emailAccount(appId: app.id, email: email.normalized)
        if app.revealUserExistence, account == nil { throw AuthError.userNotFound }
        // Hashed first, for known and unknown addresses alike, so that nothing slow happens between the function's
        // answer and the write.
        let hash = try await env.hasher.hash(password, parameters: app.passwordHash)
        guard let account else { return }
        if app.revealUserExistence {
            return try await runResetFunction(account, hash: hash, app: app, local: local, email: email, arguments: arguments)
        }
        env.background.run { [self] in
            do {
                try await runResetFunction(account, hash: hash, app: app, local: local, email: email, arguments: arguments)
            } catch {
                env.logger.notice("reset function failed after the answer", metadata: ["app": "\(app.id)", "error": "\(error)"])
            }
        }
    }

    /// Gives the reset function a new token for `account` and acts on its verdict.
    private func runResetFunction(
        _ account: EmailAccountRecord, hash: String, app: AppSettings, local: LocalUserpassConfiguration, email: EmailAddress, arguments: [JSONValue]
    ) async throws {
        let (token, secret) = makeToken(.passwordReset, app: app, local: local, userId: account.userId, email: email)
        try await env.store.issueOneTimeToken(token, mail: nil, dryRun: false)
        let call = ResetCall(appId: app.id, token: secret, tokenId: token.id, username: email.display, arguments: arguments)
        let verdict = try await runRetiringOnFailure(token) { try await FunctionRunner(env: env).reset(call, settings: local.resetFunction) }
        switch verdict {
        case .success:
            guard try await env.store.redeemPasswordResetToken(id: token.id, newPasswordHash: hash, now: env.clock.now) else {
                throw AuthError.invalidTokenData
            }
            env.logger.info("password reset by function", metadata: ["app": "\(app.id)", "user": "\(account.userId)"])
            await env.audit(.resetCompleted, app: app.id, user: account.userId, detail: ["by": "function"])
        case .pending:
            break
        case .fail:
            throw AuthError.resetFailed(email.display)
        }
    }

    /// Runs a function that was given `token`; when it fails, refuses or cannot be reached, the token is retired, so
    /// that a token handed to a function that said no cannot be used later.
    private func runRetiringOnFailure(_ token: OneTimeTokenRecord, _ run: () async throws -> FunctionStatus) async throws -> FunctionStatus {
        do {
            let status = try await run()
            if status == .fail { try await env.store.retireOneTimeToken(id: token.id, now: env.clock.now) }
            return status
        } catch {
            try? await env.store.retireOneTimeToken(id: token.id, now: env.clock.now)
            throw error
        }
    }

    /// `reset/send`: a reset email for a known address (or one the migrate-user function migrates).
    package func sendPasswordReset(appId: String, email rawEmail: String) async throws {
        let (app, local) = try provider(appId)
        guard let email = EmailAddress(rawEmail) else { throw AuthError.invalidEmail }
        // Counted before the answer, which says whether the address is known where the app reveals that.
        try await env.checkSendLimit(.passwordReset, app: app, address: email.normalized)
        // An address of the old system that Gatehouse does not know yet is migrated (without a password) first, so
        // that its owner gets the reset; the answer is the same either way.
        let account = try await migrateForReset(app: app, email: email, account: try await env.store.emailAccount(appId: app.id, email: email.normalized))
        if app.revealUserExistence, account == nil { throw AuthError.userNotFound }
        try await issue(.passwordReset, app: app, local: local, email: email, account: account, counted: true)
        await env.audit(.resetRequested, app: app.id, user: account?.userId)
    }

    /// `reset`: sets a new password with a valid reset token, once, and ends every session of the user.
    package func resetPassword(appId: String, token: String, tokenId: String, password: String) async throws {
        let (app, local) = try provider(appId)
        guard let record = try await validToken(token: token, tokenId: tokenId, kind: .passwordReset, app: app) else {
            throw AuthError.invalidTokenData
        }
        // Checked against the account's own address: the password may not be the email.
        let account = try await env.store.identities(userId: record.userId).first { $0.providerType == Self.providerType }
        try local.password.check(password, email: account.flatMap { EmailAddress($0.externalId)?.normalized })
        let hash = try await env.hasher.hash(password, parameters: app.passwordHash)
        guard try await env.store.redeemPasswordResetToken(id: record.id, newPasswordHash: hash, now: env.clock.now) else {
            throw AuthError.invalidTokenData
        }
        env.logger.info("password reset", metadata: ["app": "\(app.id)", "user": "\(record.userId)"])
        await env.audit(.resetCompleted, app: app.id, user: record.userId)
    }

    /// Where a one-time token stands. Only a caller holding the token's secret learns more than `invalid`.
    package enum TokenState: Sendable, Equatable {
        case valid(OneTimeTokenRecord)
        case used
        /// A newer email was sent; only its link works.
        case superseded
        case expired
        /// Unknown id, wrong secret, other app or kind.
        case invalid
    }

    /// ``tokenState(appId:token:tokenId:kind:)`` for a link someone opens (a hosted page): counted against the
    /// app's `code` limits like every other check of a token.
    package func openLink(appId: String, token: String, tokenId: String, kind: OneTimeTokenKind) async throws -> TokenState {
        try await env.checkRateLimit(.code, app: try env.app(appId), identifier: tokenId)
        return try await tokenState(appId: appId, token: token, tokenId: tokenId, kind: kind)
    }

    /// The state of `token`/`tokenId` as a token of `kind` in `appId` (the secret compared in constant time).
    package func tokenState(appId: String, token: String, tokenId: String, kind: OneTimeTokenKind) async throws -> TokenState {
        let (app, _) = try provider(appId)
        guard Secrets.isObjectID(tokenId), token.utf8.count <= 256,
            let record = try await env.store.oneTimeToken(id: tokenId.lowercased()),
            record.appId == app.id, record.kind == kind,
            Secrets.constantTimeEquals(Secrets.sha256(token), record.secretHash)
        else { return .invalid }
        if record.usedAt != nil { return .used }
        if record.supersededAt != nil { return .superseded }
        if record.expiresAt <= env.clock.now { return .expired }
        return .valid(record)
    }

    /// The token record if `token` matches it and it can still be redeemed.
    private func validToken(token: String, tokenId: String, kind: OneTimeTokenKind, app: AppSettings) async throws
        -> OneTimeTokenRecord?
    {
        try await env.checkRateLimit(.code, app: app, identifier: tokenId)
        guard case .valid(let record) = try await tokenState(appId: app.id, token: token, tokenId: tokenId, kind: kind) else { return nil }
        return record
    }

    /// The user for a correct email and password of a confirmed, enabled account, for any sign-in path (the Client
    /// API, native auth). Unknown addresses cost a dummy hash, so that they answer at the same speed; a hash made
    /// with older parameters is upgraded.
    ///
    /// Counted against the app's `login` rate limits (per client, and per username from that client) and its login
    /// backoff: after a run of wrong passwords for the username, known or not, from this client, attempts from it must
    /// wait (``AuthError/loginDelayed(retryAfter:)``); see ``LoginBackoff``.
    ///
    /// Lazy migration (`migrate`, for logins; a link never migrates): where the app has a migrate-user function, an
    /// address Gatehouse does not know, or knows only as a pending registration, is asked about — after the limits
    /// and the backoff, and only for a valid address and a password within the policy's length. When the function
    /// says the old system accepted the password, the user is created with it and the login succeeds; any other
    /// answer is the ordinary wrong password.
    package func authenticate(app: AppSettings, username: String, password: String, migrate: Bool = false) async throws -> UserRecord {
        let proof = try await prove(app: app, username: username, password: password, migrate: migrate)
        try await proof.backoff.succeeded()
        return proof.user
    }

    /// A correct password's user, and the login backoff whose counts its success ends.
    package struct PasswordProof: Sendable {
        package var user: UserRecord
        /// Ended by whoever takes the proof: at once (``LoginBackoff/succeeded()``), or in the write of the session it
        /// starts (``LoginBackoff/clearedKeys``).
        package var backoff: LoginBackoff
    }

    /// ``authenticate(app:username:password:migrate:)`` without ending the backoff's counts: the caller ends them.
    package func prove(app: AppSettings, username: String, password: String, migrate: Bool = false) async throws -> PasswordProof {
        do {
            return try await proving(app: app, username: username, password: password, migrate: migrate)
        } catch is CountedWrongPassword {
            throw AuthError.invalidCredentials
        }
    }

    /// A password tried as a login attempt (``prove(app:username:password:migrate:)`` with no migration), which
    /// tells a wrong password counted in the login backoff from every other refusal.
    package enum PasswordAttempt: Sendable {
        /// The password is the account's: the caller ends the backoff's counts, as with ``prove(app:username:password:migrate:)``.
        case proven(PasswordProof)
        /// A wrong password, counted once in `backoff`'s address count and once in its account's total.
        case wrong(LoginBackoff)
    }

    /// Tries `password` for `username` as a login attempt: its limits, delays and counts are a login's. Every refusal
    /// but a counted wrong password throws, as ``prove(app:username:password:migrate:)`` does.
    package func attempt(app: AppSettings, username: String, password: String) async throws -> PasswordAttempt {
        do {
            return .proven(try await proving(app: app, username: username, password: password, migrate: false))
        } catch let wrong as CountedWrongPassword {
            return .wrong(wrong.backoff)
        }
    }

    /// A wrong password, counted: thrown by ``PasswordLogin/wrongPassword(_:)`` and answered as
    /// ``AuthError/invalidCredentials`` by ``prove(app:username:password:migrate:)``.
    private struct CountedWrongPassword: Error {
        var backoff: LoginBackoff
    }

    private func proving(app: AppSettings, username: String, password: String, migrate: Bool) async throws -> PasswordProof {
        let email = EmailAddress(username)
        let identifier = email?.normalized ?? String(username.prefix(256))
        try await env.checkRateLimit(.login, app: app, account: identifier)
        let backoff = LoginBackoff(env: env, app: app, identifier: identifier)
        let askable = migrate && !password.isEmpty && password.count <= app.passwordPolicy.maxLength && migrates(app)
        // The attempt is counted and the account read with its user in one round trip, and an unknown address runs the
        // same statements as a known one.
        let readable = password.count <= app.passwordPolicy.maxLength ? email : nil
        let (attempt, found) = if let readable { try await backoff.admit(readingAccount: readable.normalized) } else { (try await backoff.admit(), nil) }
        let login = PasswordLogin(app: app, password: password, backoff: backoff, attempt: attempt)
        guard let readable, let (account, user) = found else {
            if askable, let email {
                if let migrated = await askToMigrate(app: app, email: email, password: password, account: nil) {
                    return PasswordProof(user: try await logInMigrated(migrated, email: email, login, replacing: nil), backoff: backoff)
                }
                // Not vouched for now: perhaps because a racing login of the same old user migrated the address after
                // this one read it (the old system hands an address over once). Its account is checked as any is.
                if let user = try await verifyAccountMadeMeanwhile(email: email, login) {
                    return PasswordProof(user: user, backoff: backoff)
                }
            }
            // The same work as for a known account: a hash.
            try await env.hasher.burnVerify(password, parameters: app.passwordHash)
            try await login.wrongPassword(nil)
        }
        return PasswordProof(user: try await verify(account, user: user, email: readable, login, migrate: askable), backoff: backoff)
    }

    /// One password login's context: what it checks, and its place in the login backoff.
    private struct PasswordLogin: Sendable {
        var app: AppSettings
        var password: String
        var backoff: LoginBackoff
        var attempt: Int

        func wrongPassword(_ userId: String?) async throws -> Never {
            try await backoff.failed(userId: userId, attempt: attempt)
            throw CountedWrongPassword(backoff: backoff)
        }
    }

    /// Checks the login's password against the known `account`, of `user` (read with it; nil when the user is gone).
    /// With `migrate`, a pending account's address is asked about too: the old system's user, who proves its password
    /// there, replaces whoever registered the address here and never confirmed it.
    private func verify(
        _ account: EmailAccountRecord, user: UserRecord?, email: EmailAddress, _ login: PasswordLogin, migrate: Bool
    ) async throws -> UserRecord {
        let app = login.app
        guard !account.passwordHash.isEmpty else {
            // An account made by native sign-up with codes only, or migrated by a reset request that was not followed
            // yet: it has no password to check. With `migrate`, the old system may know the password of an account it
            // brought (a user who asked for a reset, or whose address someone else asked one for, can still sign in
            // with their old password) — never of an account Gatehouse made, which never held the old one.
            if migrate, account.oldSystemMayVouch || account.confirmedAt == nil,
                let migrated = await askToMigrate(app: app, email: email, password: login.password, account: account)
            {
                if account.confirmedAt == nil { return try await logInMigrated(migrated, email: email, login, replacing: account) }
                let hash = try await env.hasher.hash(login.password, parameters: app.passwordHash)
                try await env.store.upgradePasswordHash(appId: app.id, email: account.email, from: "", to: hash)
                env.logger.info("user migrated", metadata: ["app": "\(app.id)", "user": "\(account.userId)", "at": "login"])
                await env.audit(.userMigrated, app: app.id, user: account.userId, detail: ["provider": Self.providerType, "at": "login", "passwordSet": "true"])
                if let (updated, user) = try await env.store.emailAccountWithUser(appId: app.id, email: email.normalized) {
                    return try await verify(updated, user: user, email: email, login, migrate: false)
                }
            }
            try await env.hasher.burnVerify(login.password, parameters: app.passwordHash)
            try await login.wrongPassword(account.userId)
        }
        // Named by account and client: an imported hash waits its turn fairly among other accounts and clients.
        let check = PasswordCheck(account: "\(app.id)|\(account.userId)", network: env.origin.network)
        let matches = try await env.hasher.verify(login.password, against: account.passwordHash, parameters: app.passwordHash, for: check)
        if account.confirmedAt == nil, migrate, let migrated = await askToMigrate(app: app, email: email, password: login.password, account: account) {
            return try await logInMigrated(migrated, email: email, login, replacing: account)
        }
        guard matches else { try await login.wrongPassword(account.userId) }
        // "Confirmation required" would tell whoever just registered an address that it was free (a taken one answers
        // as a wrong password): only an app that reveals user existence says it. Hidden, it counts as a wrong
        // password too, so that a delay that ends tells nobody a guess was right.
        guard account.confirmedAt != nil else {
            if app.revealUserExistence { throw AuthError.confirmationRequired }
            try await login.wrongPassword(account.userId)
        }
        // The backoff's counts end once the caller takes the proof (``PasswordProof``): a right password of a user who
        // is gone or disabled ends none.
        guard let user else { throw AuthError.invalidCredentials }
        guard !user.disabled else { throw AuthError.userDisabled }
        if env.hasher.needsRehash(account.passwordHash, parameters: app.passwordHash) {
            let upgraded = try await env.hasher.hash(login.password, parameters: app.passwordHash)
            try await env.store.upgradePasswordHash(appId: app.id, email: account.email, from: account.passwordHash, to: upgraded)
            env.logger.info("password hash upgraded", metadata: ["app": "\(app.id)", "user": "\(user.id)"])
        }
        return user
    }

    /// Creates the user the migrate-user function vouched for, with the login's password hashed to the app's
    /// Argon2id, and logs it in. When the address was taken meanwhile by an account ``createMigrated`` does not replace
    /// (a racing login of the same user migrated it first, or a registration was confirmed), the password is checked
    /// against that account instead, as any login's is.
    private func logInMigrated(_ migrated: MigratedUser, email: EmailAddress, _ login: PasswordLogin, replacing pending: EmailAccountRecord?)
        async throws -> UserRecord
    {
        // Hashed before any write, never inside a transaction.
        let hash = try await env.hasher.hash(login.password, parameters: login.app.passwordHash)
        if let user = try await createMigrated(migrated, app: login.app, email: email, passwordHash: hash, reason: .login, replacing: pending) {
            return user
        }
        guard let user = try await verifyAccountMadeMeanwhile(email: email, login) else {
            // The user id the function gave is another user's: nothing was created.
            try await login.wrongPassword(nil)
        }
        return user
    }

    /// For a login that found no account of `email`: the account made since (a racing login of the same old user
    /// migrated the address, or someone registered it), with the password checked against it as any login's is; nil
    /// when there is still none.
    private func verifyAccountMadeMeanwhile(email: EmailAddress, _ login: PasswordLogin) async throws -> UserRecord? {
        guard let (account, user) = try await env.store.emailAccountWithUser(appId: login.app.id, email: email.normalized) else { return nil }
        return try await verify(account, user: user, email: email, login, migrate: false)
    }

    // MARK: Lazy migration

    /// A user the migrate-user function vouched for, checked.
    private struct MigratedUser: Sendable {
        var userId: String?
        var customData: [String: JSONValue]
    }

    /// Whether the app asks a migrate-user function about addresses it does not know.
    package func migrates(_ app: AppSettings) -> Bool {
        app.localUserpass != nil && (app.localUserpass?.migrateUserFunction != nil || env.functions.migrateUser != nil)
    }

    /// Asks the app's migrate-user function about `email` (with the login's `password`, or none for a reset). The user
    /// to create, or nil for every other outcome: unknown, wrong password, an unverified address, a malformed answer,
    /// a failure, a timeout. Nothing here logs or records the password.
    ///
    /// The old system hands an address over once (``GatehouseStore/migratedAddress(appId:email:)``): it is not asked
    /// about an address it already handed over unless that address's `account` is still the one it made, waiting for
    /// its first password. Otherwise, once a migrated user moved to another address (or was deleted), the leaked old
    /// password would make a second user of the old address — a squatter that also blocks the owner's undo.
    private func askToMigrate(app: AppSettings, email: EmailAddress, password: String?, account: EmailAccountRecord?) async -> MigratedUser? {
        guard migrates(app) else { return nil }
        if account?.oldSystemMayVouch != true {
            // Unknown whether it was handed over (the database failed): not asked, as a failed function is not.
            guard (try? await env.store.migratedAddress(appId: app.id, email: email.normalized)) == false else { return nil }
        }
        let call = MigrateUserCall(appId: app.id, email: email.display, password: password, reason: password == nil ? .passwordReset : .login)
        let outcome: MigrateUserOutcome?
        do {
            outcome = try await FunctionRunner(env: env).migrateUser(call, settings: app.localUserpass?.migrateUserFunction)
        } catch {
            env.logger.notice("migrate-user function failed", metadata: ["app": "\(app.id)", "error": "\(error)"])
            return nil
        }
        guard case .migrated(let verified, let userId, let customData)? = outcome else { return nil }
        guard verified else {
            env.logger.notice("migrate-user function vouched for an unverified address: not migrated", metadata: ["app": "\(app.id)"])
            return nil
        }
        if let userId, !Secrets.isObjectID(userId) {
            env.logger.notice("migrate-user function gave a user id that is not a 24-hex ObjectId: not migrated", metadata: ["app": "\(app.id)"])
            return nil
        }
        guard let encoded = try? JSONEncoder().encode(customData), encoded.count <= 16_384 else {
            env.logger.notice("migrate-user function gave custom data over 16 KiB: not migrated", metadata: ["app": "\(app.id)"])
            return nil
        }
        return MigratedUser(userId: userId?.lowercased(), customData: customData)
    }

    /// Writes a migrated user: the user (with the function's id and custom data), its `local-userpass` identity, and
    /// its email account, confirmed and proven (the old system verified the address; the function vouches for it as
    /// a confirmation function's `success` does), with `passwordHash` (empty for a reset: the reset sets it). A
    /// pending registration of the address is discarded first, with its user and links — also one made while the old
    /// system was asked. Nil, creating nothing, when the address was taken meanwhile by a confirmed account (a racing
    /// migration of the same user), the pending account was confirmed meanwhile, or the user id is taken.
    private func createMigrated(
        _ migrated: MigratedUser, app: AppSettings, email: EmailAddress, passwordHash: String, reason: MigrateUserCall.Reason,
        replacing pending: EmailAccountRecord?
    ) async throws -> UserRecord? {
        if let pending {
            guard try await env.store.discardPendingRegistration(pending) else { return nil }
            env.logger.info("pending registration discarded for a migrated user", metadata: ["app": "\(app.id)", "user": "\(pending.userId)"])
        }
        let now = env.clock.now
        var (user, identity, account) = Self.newAccount(
            userId: migrated.userId ?? Secrets.objectID(at: now), app: app, email: email, passwordHash: passwordHash, confirmed: true, proven: true,
            now: now
        )
        user.customData = migrated.customData
        account.fromOldSystem = true
        var detail = ["provider": Self.providerType, "at": reason.rawValue]
        if pending != nil { detail["replacedPending"] = "true" }
        do {
            let event = env.auditEvent(.userMigrated, app: app.id, user: user.id, detail: detail)
            try await env.store.createEmailUser(user: user, identity: identity, account: account, token: nil, mail: nil, recording: event)
        } catch StoreError.conflict {
            // Taken while the old system was asked. By a registration never confirmed: the old system's answer replaces
            // it, as it would have had the registration come first (once; a second conflict is a racing migration's,
            // a confirmation's or the user id's).
            if pending == nil, let racing = try await env.store.emailAccount(appId: app.id, email: email.normalized), racing.confirmedAt == nil {
                return try await createMigrated(migrated, app: app, email: email, passwordHash: passwordHash, reason: reason, replacing: racing)
            }
            return nil
        }
        env.countAuthEvent(.userMigrated, app: app.id, detail: detail)
        env.logger.info("user migrated", metadata: ["app": "\(app.id)", "user": "\(user.id)", "at": "\(reason.rawValue)"])
        return user
    }

    /// For a password reset of an address Gatehouse does not know, or knows only as a pending registration: asks the
    /// migrate-user function (without a password) and, if the old system has the user, creates it without a
    /// password, so that the reset that follows reaches them. The account to send the reset for, or nil.
    package func migrateForReset(app: AppSettings, email: EmailAddress, account: EmailAccountRecord?) async throws -> EmailAccountRecord? {
        guard migrates(app), account?.confirmedAt == nil, let migrated = await askToMigrate(app: app, email: email, password: nil, account: account) else {
            return account
        }
        _ = try await createMigrated(migrated, app: app, email: email, passwordHash: "", reason: .passwordReset, replacing: account)
        // Whatever won a race, the address's account now is the one to reset.
        return try await env.store.emailAccount(appId: app.id, email: email.normalized)
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
