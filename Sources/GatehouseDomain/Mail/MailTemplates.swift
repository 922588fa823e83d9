import Foundation
import Mustache

/// The kinds of email Gatehouse sends; each has a subject, a text and an HTML template.
public enum MailKind: String, Sendable, CaseIterable {
    case confirmation
    case passwordReset = "password_reset"
    case alreadyConfirmed = "already_confirmed"
    /// To the owner of a taken address, when someone tries to sign up with it (instead of telling the caller).
    case accountExists = "account_exists"
    /// The one-time code of the native auth flows.
    case oneTimeCode = "one_time_code"
    /// To the account's address, when its signed-in user changed the password.
    case passwordChanged = "password_changed"
    /// To the old address after a signed-in user changed it: with the link that undoes the change.
    case emailChanged = "email_changed"
    /// To the owner of an address a signed-in user of another account asked to change theirs to (instead of a code).
    case emailInUse = "email_in_use"
    /// To the account's address when a signed-in session added a way in (a linked identity, an API key) or removed
    /// one (an unlinked identity): `{{what}}` says which.
    case credentialAdded = "credential_added"
    case credentialRemoved = "credential_removed"
    /// To the account's addresses when a signed-in session deleted the user.
    case accountDeleted = "account_deleted"
}

/// The values a template can use: `{{appName}}`, `{{email}}`, `{{link}}`, `{{token}}`, `{{tokenId}}`, `{{code}}`,
/// `{{expiresInMinutes}}`, `{{expiresInDays}}` (the same time in whole days, at least 1), `{{what}}` (a credential
/// added or removed, in words).
package struct MailVariables: Sendable {
    package var appName: String
    package var email: String
    package var link: String = ""
    package var token: String = ""
    package var tokenId: String = ""
    package var code: String = ""
    package var expiresInMinutes: Int = 0
    package var what: String = ""

    package var dictionary: [String: Any] {
        [
            "appName": appName, "email": email, "link": link, "token": token, "tokenId": tokenId, "code": code,
            "expiresInMinutes": expiresInMinutes, "expiresInDays": max(1, expiresInMinutes / 1440), "what": what,
        ]
    }

    package init(
        appName: String, email: String, link: String = "", token: String = "", tokenId: String = "", code: String = "",
        expiresInMinutes: Int = 0
    ) {
        self.appName = appName
        self.email = email
        self.link = link
        self.token = token
        self.tokenId = tokenId
        self.code = code
        self.expiresInMinutes = expiresInMinutes
    }
}

/// A rendered email.
package struct RenderedMail: Sendable, Hashable {
    package var subject: String
    package var text: String
    package var html: String

    package init(subject: String, text: String, html: String) {
        self.subject = subject
        self.text = text
        self.html = html
    }
}

/// An app's email templates, written in Mustache: the built-in defaults, replaced file by file from the app's
/// `emailTemplates` folder (`confirmation.subject.mustache`, `confirmation.text.mustache`,
/// `confirmation.html.mustache`, … for each ``MailKind``).
///
/// Templates are parsed and rendered once with sample values when the server starts, so a broken template stops
/// the start instead of failing when a user waits for an email. In `.html` templates values are HTML-escaped; in
/// subject and text templates they are not.
package struct MailTemplates: Sendable {
    private struct Set: Sendable {
        package var subject: MustacheTemplate
        package var text: MustacheTemplate
        package var html: MustacheTemplate
    }

    private let templates: [MailKind: Set]

    package enum Part: String, CaseIterable {
        case subject, text, html
    }

    /// The built-in templates, overridden by the files in `folder` when given.
    package static func load(folder: String?, key: String = "emailTemplates") throws(ConfigurationError) -> MailTemplates {
        var overrides: [String: String] = [:]
        if let folder {
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") }
            } catch {
                throw ConfigurationError(key: key, message: "cannot read the folder \(folder): \(error.localizedDescription)")
            }
            let expected = Swift.Set(MailKind.allCases.flatMap { kind in Part.allCases.map { "\(kind.rawValue).\($0.rawValue).mustache" } })
            for name in names {
                guard expected.contains(name) else {
                    throw ConfigurationError(
                        key: "emailTemplates",
                        message: "unexpected file \(name) in \(folder); expected names like confirmation.html.mustache (kinds: \(MailKind.allCases.map(\.rawValue).joined(separator: ", ")); parts: subject, text, html)"
                    )
                }
                let path = (folder as NSString).appendingPathComponent(name)
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw ConfigurationError(key: key, message: "cannot read \(path) as UTF-8")
                }
                overrides[name] = text
            }
        }
        var templates: [MailKind: Set] = [:]
        for kind in MailKind.allCases {
            func template(_ part: Part) throws(ConfigurationError) -> MustacheTemplate {
                let name = "\(kind.rawValue).\(part.rawValue).mustache"
                let source = overrides[name] ?? DefaultMailTemplates.source(kind, part)
                // Subjects and text parts are not HTML: no escaping there.
                let text = part == .html ? source : "{{% CONTENT_TYPE: TEXT }}" + source
                do {
                    return try MustacheTemplate(string: text)
                } catch {
                    throw ConfigurationError(key: key, message: "\(name): \(error)")
                }
            }
            templates[kind] = Set(subject: try template(.subject), text: try template(.text), html: try template(.html))
        }
        let loaded = MailTemplates(templates: templates)
        // Render each once with sample values: an empty result is a mistake worth stopping for.
        for kind in MailKind.allCases {
            let sample = loaded.render(
                kind,
                MailVariables(appName: "App", email: "user@example.com", link: "https://example.com/x?token=t&tokenId=i", token: "t", tokenId: "i", code: "12345678", expiresInMinutes: 30)
            )
            if sample.subject.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                throw ConfigurationError(key: key, message: "\(kind.rawValue).subject.mustache renders an empty subject")
            }
        }
        return loaded
    }

    package func render(_ kind: MailKind, _ variables: MailVariables) -> RenderedMail {
        let set = templates[kind]!
        let values = variables.dictionary
        let subject = set.subject.render(values).split(whereSeparator: \.isNewline).joined(separator: " ")
        return RenderedMail(
            subject: subject.trimmingCharacters(in: .whitespaces),
            text: set.text.render(values),
            html: set.html.render(values)
        )
    }
}
