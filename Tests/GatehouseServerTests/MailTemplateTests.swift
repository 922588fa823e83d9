import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct MailTemplateTests {
    let variables = MailVariables(
        appName: "Café <App>", email: "ann@example.com", link: "https://example.com/confirm?token=abc&tokenId=def", token: "abc",
        tokenId: "def", code: "12345678", expiresInMinutes: 30
    )

    @Test func builtInTemplatesRenderEveryKind() throws {
        let templates = try MailTemplates.load(folder: nil)
        for kind in MailKind.allCases {
            let mail = templates.render(kind, variables)
            #expect(!mail.subject.isEmpty && !mail.subject.contains("\n"))
            #expect(mail.subject.contains("Café <App>"), "subjects are not HTML: \(mail.subject)")
            #expect(mail.html.contains("Café &lt;App&gt;"), "HTML escapes values")
            #expect(mail.html.hasPrefix("<!doctype html>"))
        }
        let confirmation = templates.render(.confirmation, variables)
        // The text part keeps the link intact (no &amp;); the HTML part escapes it inside the attribute.
        #expect(confirmation.text.contains("https://example.com/confirm?token=abc&tokenId=def"))
        #expect(confirmation.html.contains("https://example.com/confirm?token=abc&amp;tokenId=def"))
        #expect(templates.render(.oneTimeCode, variables).text.contains("12345678"))
    }

    @Test func filesInTheFolderReplaceTheDefaults() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-templates-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "Bitte bestätigen: {{appName}}".write(to: folder.appendingPathComponent("confirmation.subject.mustache"), atomically: true, encoding: .utf8)
        try "Link: {{link}} ({{expiresInMinutes}} min)".write(to: folder.appendingPathComponent("confirmation.text.mustache"), atomically: true, encoding: .utf8)
        let templates = try MailTemplates.load(folder: folder.path)
        let mail = templates.render(.confirmation, variables)
        #expect(mail.subject == "Bitte bestätigen: Café <App>")
        #expect(mail.text == "Link: https://example.com/confirm?token=abc&tokenId=def (30 min)")
        #expect(mail.html.contains("Confirm my email"))  // not overridden: the default
    }

    @Test func aBrokenTemplateOrAStrayFileIsAConfigurationError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-templates-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let broken = folder.appendingPathComponent("password_reset.html.mustache")
        try "<p>{{#link}}unclosed section</p>".write(to: broken, atomically: true, encoding: .utf8)
        let error = #expect(throws: ConfigurationError.self) { try MailTemplates.load(folder: folder.path, key: "apps[0].emailTemplates") }
        #expect(error?.key == "apps[0].emailTemplates")
        #expect(error?.message.contains("password_reset.html.mustache") == true)

        try FileManager.default.removeItem(at: broken)
        try "x".write(to: folder.appendingPathComponent("confirmaton.html.mustache"), atomically: true, encoding: .utf8)
        let stray = #expect(throws: ConfigurationError.self) { try MailTemplates.load(folder: folder.path) }
        #expect(stray?.message.contains("confirmaton.html.mustache") == true)
    }

    @Test func anAppsTemplatesAreUsedForItsEmails() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-templates-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "Welcome to {{appName}}, {{email}}".write(to: folder.appendingPathComponent("confirmation.subject.mustache"), atomically: true, encoding: .utf8)
        var config = testConfiguration()
        config.apps[0].emailTemplates = folder.path
        try await withGatehouse(config) { _, client in
            _ = try await client.register("tpl@example.com")
            let mail = try #require(try await client.mailbox("tpl@example.com").first)
            #expect(mail.subject == "Welcome to test-app, tpl@example.com")
            #expect(mail.link != nil)
        }
    }
}
