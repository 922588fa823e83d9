/// The built-in email templates. The HTML uses a single-column table layout with inline styles, which renders the
/// same in Gmail, Outlook, Apple Mail and phone clients, and has no external images or fonts.
package enum DefaultMailTemplates {
    package static func source(_ kind: MailKind, _ part: MailTemplates.Part) -> String {
        switch (kind, part) {
        case (.confirmation, .subject): "Confirm your {{appName}} account"
        case (.confirmation, .text):
            """
            Welcome to {{appName}}!

            Confirm your email address by opening this link:
            {{link}}

            The link works once and expires in {{expiresInMinutes}} minutes. If you asked for several emails, only the newest link works.
            If you did not sign up, ignore this email.

            """
        case (.confirmation, .html):
            layout(
                title: "Confirm your {{appName}} account",
                body: """
                    <p style="margin:0 0 16px">Welcome to {{appName}}! Confirm that <strong>{{email}}</strong> is your email address.</p>
                    \(button(label: "Confirm my email"))
                    <p style="margin:0 0 8px;color:#555;font-size:14px">The link works once and expires in {{expiresInMinutes}} minutes. If you asked for several emails, only the newest link works.</p>
                    <p style="margin:0;color:#555;font-size:14px">If you did not sign up, ignore this email.</p>
                    """
            )
        case (.passwordReset, .subject): "Reset your {{appName}} password"
        case (.passwordReset, .text):
            """
            Someone asked to reset the password of your {{appName}} account ({{email}}).

            Choose a new password here:
            {{link}}

            The link works once and expires in {{expiresInMinutes}} minutes. If it was not you, ignore this email: your password stays as it is.

            """
        case (.passwordReset, .html):
            layout(
                title: "Reset your {{appName}} password",
                body: """
                    <p style="margin:0 0 16px">Someone asked to reset the password of your {{appName}} account (<strong>{{email}}</strong>).</p>
                    \(button(label: "Choose a new password"))
                    <p style="margin:0 0 8px;color:#555;font-size:14px">The link works once and expires in {{expiresInMinutes}} minutes.</p>
                    <p style="margin:0;color:#555;font-size:14px">If it was not you, ignore this email: your password stays as it is.</p>
                    """
            )
        case (.alreadyConfirmed, .subject): "Your {{appName}} account is already confirmed"
        case (.alreadyConfirmed, .text):
            """
            Someone asked for a new confirmation email for your {{appName}} account ({{email}}), but it is already confirmed.
            You can sign in. If you forgot your password, reset it from the app.

            """
        case (.alreadyConfirmed, .html):
            layout(
                title: "Your {{appName}} account is already confirmed",
                body: """
                    <p style="margin:0 0 16px">Someone asked for a new confirmation email for your {{appName}} account (<strong>{{email}}</strong>), but it is already confirmed.</p>
                    <p style="margin:0;color:#555;font-size:14px">You can sign in. If you forgot your password, reset it from the app.</p>
                    """
            )
        case (.accountExists, .subject): "Someone tried to create a {{appName}} account with your address"
        case (.accountExists, .text):
            """
            Someone tried to create a new {{appName}} account with your email address ({{email}}), which already has one.
            Nothing changed. If it was you, sign in instead; if you forgot your password, reset it from the app.
            If it was not you, ignore this email: your account is as it was.

            """
        case (.accountExists, .html):
            layout(
                title: "Someone tried to create a {{appName}} account with your address",
                body: """
                    <p style="margin:0 0 16px">Someone tried to create a new {{appName}} account with your email address (<strong>{{email}}</strong>), which already has one. Nothing changed.</p>
                    <p style="margin:0 0 8px;color:#555;font-size:14px">If it was you, sign in instead; if you forgot your password, reset it from the app.</p>
                    <p style="margin:0;color:#555;font-size:14px">If it was not you, ignore this email: your account is as it was.</p>
                    """
            )
        case (.passwordChanged, .subject): "Your {{appName}} password was changed"
        case (.passwordChanged, .text):
            """
            The password of your {{appName}} account ({{email}}) was just changed, and every other device signed in to
            it was signed out.

            If it was you, there is nothing to do. If it was not you, reset your password from the app at once: a reset
            signs everyone out.

            """
        case (.passwordChanged, .html):
            layout(
                title: "Your {{appName}} password was changed",
                body: """
                    <p style="margin:0 0 16px">The password of your {{appName}} account (<strong>{{email}}</strong>) was just changed, and every other device signed in to it was signed out.</p>
                    <p style="margin:0;color:#555;font-size:14px">If it was you, there is nothing to do. If it was not you, reset your password from the app at once: a reset signs everyone out.</p>
                    """
            )
        case (.emailChanged, .subject): "The email address of your {{appName}} account was changed"
        case (.emailChanged, .text):
            """
            The email address of your {{appName}} account was just changed from this one ({{email}}) to another.

            If it was you, there is nothing to do. If it was not you, open this link within {{expiresInDays}} days: it puts
            this address back, signs every device out, and asks you to choose a new password.

                {{link}}

            """
        case (.emailChanged, .html):
            layout(
                title: "The email address of your {{appName}} account was changed",
                body: """
                    <p style="margin:0 0 16px">The email address of your {{appName}} account was just changed from this one (<strong>{{email}}</strong>) to another.</p>
                    <p style="margin:0 0 16px">If it was not you, undo it: this address comes back, every device is signed out, and you choose a new password.</p>
                    \(button(label: "Undo the change"))
                    <p style="margin:0;color:#555;font-size:14px">The link works for {{expiresInDays}} days. If it was you, there is nothing to do.</p>
                    """
            )
        case (.emailInUse, .subject): "Someone tried to move a {{appName}} account to your address"
        case (.emailInUse, .text):
            """
            Someone signed in to a {{appName}} account asked to change its email address to yours ({{email}}), which
            already has an account. Nothing changed, and your account is as it was.

            """
        case (.emailInUse, .html):
            layout(
                title: "Someone tried to move a {{appName}} account to your address",
                body: """
                    <p style="margin:0 0 16px">Someone signed in to a {{appName}} account asked to change its email address to yours (<strong>{{email}}</strong>), which already has an account.</p>
                    <p style="margin:0;color:#555;font-size:14px">Nothing changed, and your account is as it was.</p>
                    """
            )
        case (.credentialAdded, .subject): "A way to sign in was added to your {{appName}} account"
        case (.credentialAdded, .text):
            """
            {{what}} was just added to your {{appName}} account ({{email}}) by a device signed in to it.

            If it was you, there is nothing to do. If it was not you, sign in, remove it from the account, and sign the
            other devices out; or reset your password.

            """
        case (.credentialAdded, .html):
            layout(
                title: "A way to sign in was added to your {{appName}} account",
                body: """
                    <p style="margin:0 0 16px">{{what}} was just added to your {{appName}} account (<strong>{{email}}</strong>) by a device signed in to it.</p>
                    <p style="margin:0;color:#555;font-size:14px">If it was you, there is nothing to do. If it was not you, sign in, remove it from the account, and sign the other devices out; or reset your password.</p>
                    """
            )
        case (.credentialRemoved, .subject): "A way to sign in was removed from your {{appName}} account"
        case (.credentialRemoved, .text):
            """
            {{what}} was just removed from your {{appName}} account ({{email}}) by a device signed in to it.

            If it was you, there is nothing to do. If it was not you, reset your password: a reset signs everyone out.

            """
        case (.credentialRemoved, .html):
            layout(
                title: "A way to sign in was removed from your {{appName}} account",
                body: """
                    <p style="margin:0 0 16px">{{what}} was just removed from your {{appName}} account (<strong>{{email}}</strong>) by a device signed in to it.</p>
                    <p style="margin:0;color:#555;font-size:14px">If it was you, there is nothing to do. If it was not you, reset your password: a reset signs everyone out.</p>
                    """
            )
        case (.accountDeleted, .subject): "Your {{appName}} account was deleted"
        case (.accountDeleted, .text):
            """
            Your {{appName}} account ({{email}}) was just deleted by a device signed in to it, with everything Gatehouse
            kept for it: its ways to sign in, its devices and its API keys.

            If it was you, there is nothing to do. If it was not you, someone had signed in to your account: the
            account cannot be brought back, but you can sign up again with this address, and should change the
            password of anything that shared it.

            """
        case (.accountDeleted, .html):
            layout(
                title: "Your {{appName}} account was deleted",
                body: """
                    <p style="margin:0 0 16px">Your {{appName}} account (<strong>{{email}}</strong>) was just deleted by a device signed in to it, with everything Gatehouse kept for it: its ways to sign in, its devices and its API keys.</p>
                    <p style="margin:0;color:#555;font-size:14px">If it was you, there is nothing to do. If it was not you, someone had signed in to your account: the account cannot be brought back, but you can sign up again with this address, and should change the password of anything that shared it.</p>
                    """
            )
        case (.oneTimeCode, .subject): "Your {{appName}} code: {{code}}"
        case (.oneTimeCode, .text):
            """
            Your {{appName}} verification code is:

                {{code}}

            It expires in {{expiresInMinutes}} minutes. If you did not ask for it, ignore this email.

            """
        case (.oneTimeCode, .html):
            layout(
                title: "Your {{appName}} code",
                body: """
                    <p style="margin:0 0 16px">Your {{appName}} verification code is:</p>
                    <p style="margin:0 0 24px;font-size:32px;letter-spacing:6px;font-weight:bold;font-family:Menlo,Consolas,monospace">{{code}}</p>
                    <p style="margin:0;color:#555;font-size:14px">It expires in {{expiresInMinutes}} minutes. If you did not ask for it, ignore this email.</p>
                    """
            )
        }
    }

    private static func button(label: String) -> String {
        """
        <table role="presentation" cellpadding="0" cellspacing="0" style="margin:0 0 24px"><tr><td style="border-radius:6px;background:#1f5fbf">
        <a href="{{link}}" style="display:inline-block;padding:12px 24px;color:#ffffff;text-decoration:none;font-weight:bold;font-size:16px">\(label)</a>
        </td></tr></table>
        <p style="margin:0 0 16px;color:#555;font-size:13px;word-break:break-all">Or open this link: <a href="{{link}}" style="color:#1f5fbf">{{link}}</a></p>
        """
    }

    private static func layout(title: String, body: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>\(title)</title></head>
        <body style="margin:0;padding:0;background:#f4f5f7">
        <table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="background:#f4f5f7"><tr><td align="center" style="padding:24px 12px">
        <table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="max-width:560px;background:#ffffff;border-radius:8px"><tr>
        <td style="padding:32px;font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:16px;line-height:1.5;color:#1d1d1f">
        <h1 style="margin:0 0 16px;font-size:22px">\(title)</h1>
        \(body)
        </td></tr></table>
        <p style="margin:16px 0 0;font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:12px;color:#888">Sent by {{appName}}</p>
        </td></tr></table>
        </body></html>
        """
    }
}

/// Helpers for building links and escaping text.
package enum MailLinks {
    /// `base?token=…&tokenId=…`, keeping any query the base already has.
    package static func link(base: String, token: String, tokenId: String) -> String {
        guard var components = URLComponents(string: base) else { return base }
        var items = components.queryItems ?? []
        items.append(URLQueryItem(name: "token", value: token))
        items.append(URLQueryItem(name: "tokenId", value: tokenId))
        components.queryItems = items
        return components.string ?? base
    }
}

/// HTML-escapes text for element content and attribute values.
package func htmlEscape(_ text: String) -> String {
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

import Foundation
