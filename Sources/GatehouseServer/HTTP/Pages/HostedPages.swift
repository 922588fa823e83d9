import Foundation
import GatehouseDomain
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The hosted pages that emailed links open: `GET /app/{appId}/confirm` and `GET /app/{appId}/reset`.
///
/// A GET never changes anything, because mail scanners open links: the confirmation page shows a button that
/// POSTs, and the reset page a form. Forms carry a CSRF token that must match a `SameSite=Strict` cookie set by
/// the page and be signed by this server (``PageCSRF``). Every outcome gets a page that says what happened and what
/// to do next.
struct HostedPages {
    let env: AuthEnvironment

    private var csrf: PageCSRF { PageCSRF(keys: env.keys, secure: env.publicURL.hasPrefix("https://")) }

    /// The request's service, with the client's origin.
    private func service(_ context: GatehouseRequestContext) -> EmailPasswordService { EmailPasswordService(env: env.serving(context.origin)) }

    func register(on router: Router<GatehouseRequestContext>) {
        let app = router.group("app/:appId")
        app.get("confirm", use: confirmPage)
        app.post("confirm", use: confirm)
        app.post("confirm/send", use: resendConfirmation)
        app.get("reset", use: resetPage)
        app.post("reset", use: reset)
        app.post("reset/send", use: sendReset)
        app.get("email/undo", use: undoEmailChangePage)
        app.post("email/undo", use: undoEmailChange)
        // A HEAD of a link page (mail scanners probe links with it) reads no link: it would count against the
        // client's `code` limit and say whether the link is valid, as the GET does.
        for page in ["confirm", "reset", "email/undo"] { app.head(RouterPath(page), use: linkPageHead) }
    }

    @Sendable func linkPageHead(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        guard let appId = context.parameters.get("appId"), env.configuration.app(id: appId) != nil else {
            return Response(status: .notFound, headers: [.contentType: "text/html; charset=utf-8"])
        }
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"])
    }

    // MARK: Confirmation

    @Sendable func confirmPage(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await linkPage(request, context) { app, csrf in
            let query = request.uri.queryParameters
            guard let token = query.get("token"), let tokenId = query.get("tokenId") else {
                return Page(status: .badRequest, title: "This link is incomplete", body: incompleteLink(app, csrf, resend: "confirm/send"))
            }
            switch try await service(context).openLink(appId: app.id, token: token, tokenId: tokenId, kind: .confirmation) {
            case .valid:
                return Page(
                    title: "Confirm your email",
                    body: """
                        <p>Press the button to confirm your email address for \(htmlEscape(app.name)).</p>
                        <form method="post" action="confirm">
                        \(hidden(["token": token, "tokenId": tokenId, "csrf": csrf]))
                        <button type="submit">Confirm my email</button>
                        </form>
                        """
                )
            case let state:
                return confirmationOutcome(state, app: app, csrf: csrf)
            }
        }
    }

    @Sendable func confirm(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await formPage(request, context) { app, form, csrf in
            let token = form["token"] ?? "", tokenId = form["tokenId"] ?? ""
            do {
                switch try await service(context).confirm(appId: app.id, token: token, tokenId: tokenId, issuingPasswordToken: true) {
                case .passwordConfirmed:
                    return Page(
                        title: "Your email is confirmed",
                        body: "<p class=\"ok\" role=\"status\">Thank you. Your email address is confirmed; you can sign in to \(htmlEscape(app.name)) now.</p>"
                    )
                case .noPassword(let passwordToken?):
                    // More than one registration named this address: whose password the link would confirm is not
                    // known, so none is; the mailbox's owner chooses one now.
                    return resetForm(
                        app: app, token: passwordToken.token, tokenId: passwordToken.tokenId, csrf: csrf, error: nil,
                        intro: "<p class=\"ok\" role=\"status\">Your email address is confirmed.</p><p>This address was registered more than once, so no password was kept. Choose the password for your \(htmlEscape(app.name)) account now.</p>"
                    )
                case .noPassword(nil):
                    return Page(
                        title: "Your email is confirmed",
                        body: "<p class=\"ok\" role=\"status\">Your email address is confirmed. It was registered more than once, so no password was kept: ask for a password reset to choose one.</p>"
                    )
                }
            } catch AuthError.invalidTokenData {
                let state = try await service(context).tokenState(appId: app.id, token: token, tokenId: tokenId, kind: .confirmation)
                return confirmationOutcome(state, app: app, csrf: csrf)
            }
        }
    }

    private func confirmationOutcome(_ state: EmailPasswordService.TokenState, app: AppSettings, csrf: String) -> Page {
        switch state {
        case .used, .valid:
            Page(title: "Already confirmed", body: "<p>This email address is already confirmed. You can sign in to \(htmlEscape(app.name)).</p>")
        case .superseded:
            Page(
                status: .gone, title: "A newer email was sent",
                body: "<p>You asked for more than one email: only the link in the newest one works. Open that one, or get a new email.</p>"
                    + resendForm(action: "confirm/send", csrf: csrf, button: "Send a new confirmation email")
            )
        case .expired:
            Page(
                status: .gone, title: "This link has expired",
                body: "<p>Confirmation links work for a limited time. Get a new email and open its link.</p>"
                    + resendForm(action: "confirm/send", csrf: csrf, button: "Send a new confirmation email")
            )
        case .invalid:
            Page(
                status: .badRequest, title: "This link does not work",
                body: "<p>The link is not valid. Make sure you opened the whole link from the newest email, or get a new one.</p>"
                    + resendForm(action: "confirm/send", csrf: csrf, button: "Send a new confirmation email")
            )
        }
    }

    @Sendable func resendConfirmation(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await sendPage(request, context, kind: "confirmation") { app, email in
            try await service(context).resendConfirmation(appId: app.id, email: email)
        }
    }

    // MARK: Password reset

    @Sendable func resetPage(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await linkPage(request, context) { app, csrf in
            let query = request.uri.queryParameters
            guard let token = query.get("token"), let tokenId = query.get("tokenId") else {
                return Page(status: .badRequest, title: "This link is incomplete", body: incompleteLink(app, csrf, resend: "reset/send"))
            }
            switch try await service(context).openLink(appId: app.id, token: token, tokenId: tokenId, kind: .passwordReset) {
            case .valid:
                return resetForm(app: app, token: token, tokenId: tokenId, csrf: csrf, error: nil)
            case let state:
                return resetOutcome(state, csrf: csrf)
            }
        }
    }

    @Sendable func reset(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await formPage(request, context) { app, form, csrf in
            let token = form["token"] ?? "", tokenId = form["tokenId"] ?? ""
            let password = form["password"] ?? "", repeated = form["passwordConfirmation"] ?? ""
            guard password == repeated else {
                return resetForm(app: app, token: token, tokenId: tokenId, csrf: csrf, error: "The two passwords are not the same.")
            }
            do {
                try await service(context).resetPassword(appId: app.id, token: token, tokenId: tokenId, password: password)
                return Page(
                    title: "Your password is changed",
                    body: "<p class=\"ok\" role=\"status\">Your new password is set, and every device that was signed in has been signed out. Sign in to \(htmlEscape(app.name)) with your new password.</p>"
                )
            } catch AuthError.passwordPolicy(_, let message) {
                return resetForm(app: app, token: token, tokenId: tokenId, csrf: csrf, error: message.prefix(1).uppercased() + message.dropFirst() + ".")
            } catch AuthError.invalidTokenData {
                return resetOutcome(try await service(context).tokenState(appId: app.id, token: token, tokenId: tokenId, kind: .passwordReset), csrf: csrf)
            }
        }
    }

    /// - Parameters:
    ///   - intro: the paragraph above the form, when it says more than "choose a new password".
    ///   - action: where the form posts, relative to the page (`../reset` from a page one level deeper).
    private func resetForm(
        app: AppSettings, token: String, tokenId: String, csrf: String, error: String?, intro: String? = nil, action: String = "reset"
    ) -> Page {
        // Pages are only reached through the provider's token checks, so the provider is on.
        let policy = app.localUserpass?.password ?? PasswordPolicy()
        let rule = "Use between \(policy.minLength) and \(policy.maxLength) characters."
        let errorHTML = error.map { "<p class=\"error\" id=\"password-error\" role=\"alert\">\(htmlEscape($0))</p>" } ?? ""
        let describedBy = error == nil ? "password-rule" : "password-rule password-error"
        return Page(
            status: error == nil ? .ok : .badRequest,
            title: "Choose a new password",
            body: """
                \(intro ?? "<p>Choose a new password for your \(htmlEscape(app.name)) account.</p>")
                <form method="post" action="\(action)">
                \(hidden(["token": token, "tokenId": tokenId, "csrf": csrf]))
                <div class="field">
                <label for="password">New password</label>
                <p class="hint" id="password-rule">\(rule)</p>
                \(errorHTML)
                <input type="password" id="password" name="password" autocomplete="new-password" required minlength="\(policy.minLength)" maxlength="\(policy.maxLength)" aria-describedby="\(describedBy)"\(error == nil ? "" : " aria-invalid=\"true\"")>
                </div>
                <div class="field">
                <label for="passwordConfirmation">Repeat the new password</label>
                <input type="password" id="passwordConfirmation" name="passwordConfirmation" autocomplete="new-password" required minlength="\(policy.minLength)" maxlength="\(policy.maxLength)">
                </div>
                <button type="submit">Set the new password</button>
                </form>
                """
        )
    }

    private func resetOutcome(_ state: EmailPasswordService.TokenState, csrf: String) -> Page {
        let again = resendForm(action: "reset/send", csrf: csrf, button: "Send a new reset email")
        return switch state {
        case .used, .valid:
            Page(status: .gone, title: "This link was already used", body: "<p>Each reset link works once. If you still need to reset your password, get a new email.</p>" + again)
        case .superseded:
            Page(status: .gone, title: "A newer email was sent", body: "<p>You asked for more than one email: only the link in the newest one works.</p>" + again)
        case .expired:
            Page(status: .gone, title: "This link has expired", body: "<p>Reset links work for a limited time. Get a new email and open its link.</p>" + again)
        case .invalid:
            Page(status: .badRequest, title: "This link does not work", body: "<p>The link is not valid. Open the whole link from the newest email, or get a new one.</p>" + again)
        }
    }

    @Sendable func sendReset(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await sendPage(request, context, kind: "password reset") { app, email in
            try await service(context).sendPasswordReset(appId: app.id, email: email)
        }
    }

    // MARK: Undoing an email change

    private func accounts(_ context: GatehouseRequestContext) -> AccountService { AccountService(env: env.serving(context.origin)) }

    @Sendable func undoEmailChangePage(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await linkPage(request, context) { app, csrf in
            let query = request.uri.queryParameters
            guard let token = query.get("token"), let tokenId = query.get("tokenId") else {
                return Page(status: .badRequest, title: "This link is incomplete", body: "<p>The link is missing its token. Open the whole link from the email.</p>")
            }
            switch try await service(context).openLink(appId: app.id, token: token, tokenId: tokenId, kind: .emailChangeUndo) {
            case .valid:
                return Page(
                    title: "Undo the change of address",
                    body: """
                        <p>Someone changed the email address of your \(htmlEscape(app.name)) account. Undo it to get your address back: every device will be signed out, and you will choose a new password.</p>
                        <form method="post" action="undo">
                        \(hidden(["token": token, "tokenId": tokenId, "csrf": csrf]))
                        <button type="submit">Undo the change</button>
                        </form>
                        """
                )
            case let state:
                return undoOutcome(state)
            }
        }
    }

    @Sendable func undoEmailChange(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        try await formPage(request, context) { app, form, csrf in
            let token = form["token"] ?? "", tokenId = form["tokenId"] ?? ""
            do {
                let reset = try await accounts(context).undoEmailChange(appId: app.id, token: token, tokenId: tokenId, issuingPasswordToken: true)
                guard let reset else {
                    return Page(title: "Your address is back", body: "<p class=\"ok\" role=\"status\">Your address is back and every device was signed out. Ask for a password reset to choose a new password.</p>")
                }
                return resetForm(
                    app: app, token: reset.token, tokenId: reset.tokenId, csrf: csrf, error: nil,
                    intro: "<p class=\"ok\" role=\"status\">Your address is back, and every device was signed out.</p><p>Choose a new password for your \(htmlEscape(app.name)) account now.</p>",
                    action: "../reset"
                )
            } catch AuthError.invalidTokenData {
                return undoOutcome(try await service(context).tokenState(appId: app.id, token: token, tokenId: tokenId, kind: .emailChangeUndo))
            }
        }
    }

    private func undoOutcome(_ state: EmailPasswordService.TokenState) -> Page {
        switch state {
        case .used, .valid:
            Page(status: .gone, title: "This link was already used", body: "<p>The change was undone already. If you still cannot sign in, ask for a password reset.</p>")
        case .superseded:
            Page(status: .gone, title: "This link no longer works", body: "<p>Your account changed since this email was sent (a password reset or another undo). Ask for a password reset if you cannot sign in.</p>")
        case .expired:
            Page(status: .gone, title: "This link has expired", body: "<p>The link to undo a change of address works for a limited time. Contact the app's support to get your account back.</p>")
        case .invalid:
            Page(status: .badRequest, title: "This link does not work", body: "<p>The link is not valid. Open the whole link from the email.</p>")
        }
    }

    // MARK: Plumbing

    /// A page that asks for an email address and posts it to `action` (to get a new link).
    private func resendForm(action: String, csrf: String, button: String) -> String {
        """
        <form method="post" action="\(action)">
        \(hidden(["csrf": csrf]))
        <div class="field">
        <label for="email">Your email address</label>
        <input type="email" id="email" name="email" autocomplete="email" required>
        </div>
        <button type="submit">\(htmlEscape(button))</button>
        </form>
        """
    }

    private func incompleteLink(_ app: AppSettings, _ csrf: String, resend: String) -> String {
        "<p>The link is missing its token. Open the whole link from the newest email, or get a new one.</p>"
            + resendForm(action: resend, csrf: csrf, button: "Send a new email")
    }

    private func hidden(_ fields: [String: String]) -> String {
        fields.sorted { $0.key < $1.key }.map { "<input type=\"hidden\" name=\"\(htmlEscape($0.key))\" value=\"\(htmlEscape($0.value))\">" }
            .joined(separator: "\n")
    }

    /// "Sent if there is an account": the same words whether or not the address is known.
    private func sendPage(
        _ request: Request,
        _ context: GatehouseRequestContext,
        kind: String,
        _ send: @escaping @Sendable (AppSettings, String) async throws -> Void
    ) async throws -> Response {
        try await formPage(request, context) { app, form, csrf in
            let email = form["email"] ?? ""
            do {
                try await send(app, email)
            } catch AuthError.invalidEmail {
                return Page(status: .badRequest, title: "Check the address", body: "<p class=\"error\" role=\"alert\">That is not a valid email address.</p>" + resendForm(action: "send", csrf: csrf, button: "Try again"))
            } catch AuthError.tooManyEmails(let retryAfter) {
                return Page(status: .tooManyRequests, title: "Too many emails", body: "<p>Several emails went to this address recently. Try again in \(max(1, retryAfter / 60)) minutes.</p>")
            } catch AuthError.userNotFound, AuthError.userAlreadyConfirmed {
                // Apps that reveal user existence still get the neutral page here: a browser form is not an API.
            }
            return Page(title: "Check your email", body: "<p role=\"status\">If an account uses \(htmlEscape(email)), a new \(kind) email is on its way. Open the link in the newest email.</p>")
        }
    }

    /// ``page(_:_:_:)`` for a page that opens an emailed link, which counts against the client's `code` limit (it says
    /// whether a token is valid). A browser opens such a link as a document; what it fetches for another site's page
    /// (an image, a frame, a script: `Sec-Fetch-Dest` other than `document`) is refused before the link is read or
    /// counted, so that no page on another site can spend its visitors' allowance by embedding links. Clients that
    /// send no `Sec-Fetch-Dest` (mail scanners, scripts) are counted as before.
    private func linkPage(
        _ request: Request,
        _ context: GatehouseRequestContext,
        _ render: (AppSettings, String) async throws -> Page
    ) async throws -> Response {
        if let destination = request.headers[Self.fetchDestination], destination.lowercased() != "document" {
            return Page(
                status: .forbidden, title: "Open this link yourself",
                body: "<p>This link opens only as a page of its own. Open it from your email.</p>"
            ).response()
        }
        return try await page(request, context, render)
    }

    static var fetchDestination: HTTPField.Name { HTTPField.Name("Sec-Fetch-Dest")! }

    /// Whether a form POST may have come from this server's own page, by the headers browsers set and pages cannot:
    /// not when `Sec-Fetch-Site` says `cross-site` or `same-site`, nor with an `Origin` other than the public URL's.
    /// `Origin: null` passes: the pages' `Referrer-Policy: no-referrer` makes browsers send it for their own forms.
    /// A second line behind the CSRF token (``PageCSRF``), for a browser in which someone planted its cookie; clients
    /// that send neither header pass, as on the API routes (``CrossSiteGuard``).
    static func postedFromThisSite(_ request: Request, publicURL: String) -> Bool {
        switch request.headers[CrossSiteGuard<GatehouseRequestContext>.fetchSite]?.lowercased() {
        case "cross-site", "same-site": return false
        default: break
        }
        guard let origin = request.headers[.origin]?.lowercased(), origin != "null" else { return true }
        return origin == BrowserOrigin.of(publicURL)
    }

    /// Runs a GET page: resolves the app, gives its form the browser's CSRF value (``PageCSRF/token(reusing:appId:now:)``:
    /// the cookie it has, or a fresh one it is sent), renders HTML for every outcome.
    private func page(
        _ request: Request,
        _ context: GatehouseRequestContext,
        _ render: (AppSettings, String) async throws -> Page
    ) async throws -> Response {
        guard let appId = context.parameters.get("appId"), let app = env.configuration.app(id: appId) else {
            return Page(status: .notFound, title: "Page not found", body: "<p>There is no such app here.</p>").response()
        }
        let held = request.cookies[csrf.cookieName(appId: app.id)]?.value
        let token = csrf.token(reusing: held, appId: app.id, now: env.clock.now)
        do {
            return try await render(app, token).response(headers: token == held ? [:] : [.setCookie: csrf.cookie(token, appId: app.id)])
        } catch {
            return failure(error, context: context)
        }
    }

    /// Runs a form POST: refuses one a browser marks as sent from another site, checks the CSRF token against the
    /// cookie, then renders HTML for every outcome.
    private func formPage(
        _ request: Request,
        _ context: GatehouseRequestContext,
        _ handle: @escaping @Sendable (AppSettings, [String: String], String) async throws -> Page
    ) async throws -> Response {
        guard let appId = context.parameters.get("appId"), let app = env.configuration.app(id: appId) else {
            return Page(status: .notFound, title: "Page not found", body: "<p>There is no such app here.</p>").response()
        }
        if !Self.postedFromThisSite(request, publicURL: env.publicURL) {
            return Page(
                status: .forbidden, title: "Please open the link again",
                body: "<p>This form was not sent from this site. Open the link from your email again.</p>"
            ).response()
        }
        do {
            let body = try await request.body.collect(upTo: context.maxUploadSize)
            let form = Self.parseForm(String(buffer: body))
            if form.contains(where: { BodyGuard.containsNUL($0.key) || BodyGuard.containsNUL($0.value) }) {
                return Page(status: .badRequest, title: "Check the form", body: "<p>The form held characters that cannot be used.</p>").response()
            }
            let cookie = request.cookies[csrf.cookieName(appId: app.id)]?.value ?? ""
            guard csrf.accepts(cookie: cookie, field: form["csrf"] ?? "", appId: app.id, now: env.clock.now) else {
                return Page(
                    status: .forbidden, title: "Please open the link again",
                    body: "<p>This form expired or was not sent from this site. Open the link from your email again.</p>"
                ).response()
            }
            return try await handle(app, form, cookie).response()
        } catch {
            return failure(error, context: context)
        }
    }

    private func failure(_ error: any Error, context: GatehouseRequestContext) -> Response {
        if error is NIOTooManyBytesError {
            return Page(status: .contentTooLarge, title: "Too much data", body: "<p>The form was too large.</p>").response()
        }
        if let (status, _) = Connections.clientFault(error) {
            return Page(status: status, title: "Please try again", body: "<p>The form did not arrive whole. Nothing was changed.</p>").response()
        }
        switch error {
        case AuthError.rateLimited(let retryAfter), AuthError.loginDelayed(let retryAfter):
            var page = Page(
                status: .tooManyRequests, title: "Too many attempts",
                body: "<p>There were too many attempts from here. Try again in \(retryAfter) seconds.</p>"
            ).response()
            page.headers[.retryAfter] = String(retryAfter)
            return page
        case AuthError.providerNotEnabled:
            return Page(status: .notFound, title: "Page not found", body: "<p>Email and password accounts are not enabled for this app.</p>").response()
        case AuthError.storeUnavailable, StoreError.unavailable:
            var page = Page(status: .serviceUnavailable, title: "Please try again shortly", body: "<p>The service is busy or briefly unavailable. Nothing was changed.</p>").response()
            page.headers[.retryAfter] = String(StoreError.retryAfterSeconds)
            return page
        case StoreError.outcomeUnknown:
            var page = Page(
                status: .serviceUnavailable, title: "Please check and try again shortly",
                body: "<p>The service stopped answering while saving this: it may or may not have been saved. Check before trying again.</p>"
            ).response()
            page.headers[.retryAfter] = String(StoreError.retryAfterSeconds)
            return page
        default:
            context.logger.error("hosted page failed", metadata: ["error": "\(String(reflecting: error))"])
            return Page(status: .internalServerError, title: "Something went wrong", body: "<p>Nothing was changed. Please try again.</p>").response()
        }
    }

    /// `application/x-www-form-urlencoded` into a dictionary (last value wins).
    static func parseForm(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String { String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            guard let name = parts.first else { continue }
            fields[decode(name)] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }
}
