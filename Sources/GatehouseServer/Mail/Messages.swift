import Foundation

/// The built-in text of each email. Templates per app come with SMTP delivery.
enum MailMessages {
    static func confirmation(appName: String, link: String, expiresInMinutes: Int) -> (subject: String, text: String, html: String) {
        let subject = "Confirm your \(appName) account"
        let text = """
            Welcome to \(appName)!

            Confirm your email address by opening this link:
            \(link)

            The link works once and expires in \(expiresInMinutes) minutes. If you asked for several emails, only the newest link works.
            If you did not sign up, ignore this email.
            """
        let html = page(
            title: subject,
            body: """
                <p>Welcome to \(escape(appName))!</p>
                <p><a href="\(escape(link))">Confirm your email address</a></p>
                <p>The link works once and expires in \(expiresInMinutes) minutes. If you asked for several emails, only the newest link works.</p>
                <p>If you did not sign up, ignore this email.</p>
                """
        )
        return (subject, text, html)
    }

    static func passwordReset(appName: String, link: String, expiresInMinutes: Int) -> (subject: String, text: String, html: String) {
        let subject = "Reset your \(appName) password"
        let text = """
            Someone asked to reset the password of your \(appName) account.

            Choose a new password here:
            \(link)

            The link works once and expires in \(expiresInMinutes) minutes. If it was not you, ignore this email: your password stays as it is.
            """
        let html = page(
            title: subject,
            body: """
                <p>Someone asked to reset the password of your \(escape(appName)) account.</p>
                <p><a href="\(escape(link))">Choose a new password</a></p>
                <p>The link works once and expires in \(expiresInMinutes) minutes. If it was not you, ignore this email: your password stays as it is.</p>
                """
        )
        return (subject, text, html)
    }

    static func alreadyConfirmed(appName: String) -> (subject: String, text: String, html: String) {
        let subject = "Your \(appName) account is already confirmed"
        let text = """
            Someone asked for a new confirmation email for your \(appName) account, but it is already confirmed.
            You can sign in. If you forgot your password, reset it from the app.
            """
        let html = page(
            title: subject,
            body: """
                <p>Someone asked for a new confirmation email for your \(escape(appName)) account, but it is already confirmed.</p>
                <p>You can sign in. If you forgot your password, reset it from the app.</p>
                """
        )
        return (subject, text, html)
    }

    private static func page(title: String, body: String) -> String {
        """
        <!doctype html><html><head><meta charset="utf-8"><title>\(escape(title))</title></head>
        <body style="font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;line-height:1.5;max-width:36em;margin:auto;padding:1em">
        \(body)
        </body></html>
        """
    }

    /// HTML-escapes text for element content and attribute values.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    /// `base?token=…&tokenId=…`, keeping any query the base already has.
    static func link(base: String, token: String, tokenId: String) -> String {
        guard var components = URLComponents(string: base) else { return base }
        var items = components.queryItems ?? []
        items.append(URLQueryItem(name: "token", value: token))
        items.append(URLQueryItem(name: "tokenId", value: tokenId))
        components.queryItems = items
        return components.string ?? base
    }
}
