import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The hosted confirmation and reset pages, in process (the browser tests drive the same pages in Chromium).
@Suite struct HostedPagesTests {
    /// GET a page; returns the reply and the CSRF value from its cookie and form.
    func open(_ client: some TestClientProtocol, _ path: String) async throws -> (Reply, csrf: String?) {
        let reply = try await client.call(path, .get)
        let cookie = reply.headers[.setCookie].flatMap { $0.firstMatch(of: /gh_csrf(?:-[0-9a-f]{16})?=([^;]+)/) }.map { String($0.output.1) }
        let field = reply.text.firstMatch(of: /name="csrf" value="([^"]+)"/).map { String($0.output.1) }
        if let cookie, let field { #expect(cookie == field) }
        return (reply, cookie)
    }

    func confirmPath(_ link: (token: String, tokenId: String)) -> String {
        "/app/test-app/confirm?token=\(link.token)&tokenId=\(link.tokenId)"
    }

    @Test func openingTheLinkConfirmsNothingUntilTheButtonIsPressed() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("page@example.com")
            let link = try await client.latestLink("page@example.com")
            let (page, csrf) = try await open(client, confirmPath(link))
            #expect(page.status == .ok)
            #expect(page.text.contains("<button type=\"submit\">Confirm my email</button>"))
            // A mail scanner's GET changed nothing.
            #expect(try await client.login("page@example.com").status == .unauthorized)

            let done = try await client.postForm("/app/test-app/confirm", ["token": link.token, "tokenId": link.tokenId, "csrf": csrf!], cookie: csrf)
            #expect(done.status == .ok)
            #expect(done.text.contains("Your email is confirmed"))
            #expect(try await client.login("page@example.com").status == .ok)

            // The same link again says so.
            let again = try await open(client, confirmPath(link)).0
            #expect(again.text.contains("Already confirmed"))
        }
    }

    @Test func everyPageCarriesTheSecurityHeaders() async throws {
        try await withGatehouse { _, client in
            for path in ["/app/test-app/confirm?token=x&tokenId=y", "/app/test-app/reset", "/app/nope/confirm"] {
                let reply = try await client.call(path, .get)
                #expect(reply.contentType == "text/html; charset=utf-8")
                let csp = try #require(reply.headers[.contentSecurityPolicy])
                #expect(csp.contains("default-src 'none'"))
                #expect(csp.contains("frame-ancestors 'none'"))
                #expect(!csp.contains("unsafe-inline"))
                #expect(reply.headers[HTTPField.Name("X-Frame-Options")!] == "DENY")
                #expect(reply.headers[HTTPField.Name("Referrer-Policy")!] == "no-referrer")
                #expect(!reply.text.contains("<script"))
                #expect(!reply.text.contains("http://") && !reply.text.contains("https://"), "no external assets")
                #expect(reply.text.contains("name=\"viewport\""))
            }
            #expect(try await client.call("/app/nope/confirm", .get).status == .notFound)
        }
    }

    @Test func aPostWithoutTheMatchingCookieIsRefusedAndChangesNothing() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("csrf@example.com")
            let link = try await client.latestLink("csrf@example.com")
            let (_, csrf) = try await open(client, confirmPath(link))
            let fields = ["token": link.token, "tokenId": link.tokenId, "csrf": csrf!]
            for cookie in [nil, "0000", String(repeating: "a", count: 64)] {
                let reply = try await client.postForm("/app/test-app/confirm", fields, cookie: cookie)
                #expect(reply.status == .forbidden)
            }
            var forged = fields
            forged["csrf"] = "different"
            #expect(try await client.postForm("/app/test-app/confirm", forged, cookie: csrf).status == .forbidden)
            #expect(try await client.login("csrf@example.com").status == .unauthorized)
        }
    }

    /// Someone who planted the CSRF cookie in a victim's browser still cannot post a page's form from their own site:
    /// the browser says where the form came from. The server's own page (which sends `Origin: null`, having no
    /// referrer) and clients without those headers pass.
    @Test func aFormPostedFromAnotherSiteIsRefusedWhateverTheCookie() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("planted@example.com")
            let link = try await client.latestLink("planted@example.com")
            let (_, csrf) = try await open(client, confirmPath(link))
            let fields = ["token": link.token, "tokenId": link.tokenId, "csrf": csrf!]
            let fetchSite = HTTPField.Name("Sec-Fetch-Site")!
            for browser: HTTPFields in [[.origin: "https://evil.test"], [fetchSite: "cross-site"], [fetchSite: "same-site", .origin: "null"]] {
                let refused = try await client.postForm("/app/test-app/confirm", fields, cookie: csrf, browser: browser)
                #expect(refused.status == .forbidden, "\(browser)")
                #expect(refused.text.contains("not sent from this site"))
            }
            #expect(try await client.login("planted@example.com").status == .unauthorized)
            let own = try await client.postForm("/app/test-app/confirm", fields, cookie: csrf, browser: [fetchSite: "same-origin", .origin: "null"])
            #expect(own.status == .ok, "\(own.text)")
            #expect(try await client.login("planted@example.com").status == .ok)
        }
    }

    @Test func aTokenThisServerDidNotSignIsRefusedTheTokenIsBoundToItsAppAndExpires() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            _ = try await client.register("planted@example.com")
            let link = try await client.latestLink("planted@example.com")
            let (_, csrf) = try await open(client, confirmPath(link))
            let token = try #require(csrf)
            let parts = token.split(separator: ".").map(String.init)
            #expect(parts.count == 4 && parts[0] == gatehouse.env.keys.current.kid)
            var fields = ["token": link.token, "tokenId": link.tokenId]
            // An attacker who can set cookies (a sibling subdomain, plain HTTP) plants the same value in both places:
            // the old double submit took it; a value this server did not sign is refused. (A genuine token the
            // attacker fetched and planted would pass the signature; behind an https public URL the `__Host-` cookie
            // keeps other origins from planting one at all.)
            for planted in [
                String(repeating: "a", count: 64),
                [parts[0], parts[1], String(repeating: "0", count: 32), parts[3]].joined(separator: "."),  // another nonce
                [parts[0], String(Int(parts[1])! + 1), parts[2], parts[3]].joined(separator: "."),  // another time
                ["unknown-kid", parts[1], parts[2], parts[3]].joined(separator: "."),
            ] {
                fields["csrf"] = planted
                #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: planted).status == .forbidden)
            }
            // A token made by a page of another app does not pass on this one.
            let (_, otherApp) = try await open(client, "/app/auto-app/reset")
            fields["csrf"] = otherApp!
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: otherApp).status == .forbidden)
            // Past its hour it is refused; a fresh page makes a new one that works.
            clock.advance(by: PageCSRF.maxAge + 1)
            fields["csrf"] = token
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: token).status == .forbidden)
            #expect(try await client.login("planted@example.com").status == .unauthorized)
            // (The link itself has expired by now: a new email, asked for with the fresh page's token, is the way on.)
            let (_, fresh) = try await open(client, confirmPath(link))
            let resend = ["email": "planted@example.com", "csrf": fresh!]
            #expect(try await client.postForm("/app/test-app/confirm/send", resend, cookie: token).status == .forbidden)
            #expect(try await client.postForm("/app/test-app/confirm/send", resend, cookie: fresh).status == .ok)
        }
    }

    /// Mail scanners probe links with HEAD: it reads no link, so it neither counts against the client's `code` limit
    /// nor tells a valid link from a spent one, and sets no cookie. The GET after many of them still opens the page.
    @Test func headOfALinkPageReadsNoLink() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("probe@example.com")
            let link = try await client.latestLink("probe@example.com")
            for path in [confirmPath(link), "/app/test-app/reset?token=\(link.token)&tokenId=\(link.tokenId)", "/app/test-app/email/undo?token=x&tokenId=y"] {
                for _ in 0..<40 {
                    let head = try await client.call(path, .head)
                    #expect(head.status == .ok && head.body.isEmpty && head.headers[.setCookie] == nil, "\(path)")
                }
            }
            let (page, csrf) = try await open(client, confirmPath(link))
            #expect(page.status == .ok)
            #expect(csrf != nil)
        }
    }

    @Test func behindHTTPSTheCookieIsAHostCookieOfTheApp() async throws {
        var configuration = testConfiguration()
        configuration.server.publicURL = "https://auth.example.com"
        try await withGatehouse(configuration) { _, client in
            _ = try await client.register("host@example.com")
            let link = try await client.latestLink("host@example.com")
            let reply = try await client.call(confirmPath(link), .get)
            let setCookie = try #require(reply.headers[.setCookie])
            let cookie = try #require(setCookie.firstMatch(of: /^(__Host-gh_csrf-[0-9a-f]{16})=([^;]+)/))
            let (name, token) = (String(cookie.output.1), String(cookie.output.2))
            #expect(setCookie.contains("; Path=/;") && setCookie.contains("; Secure") && !setCookie.contains("Domain"))
            let fields = ["token": link.token, "tokenId": link.tokenId, "csrf": token]
            // Neither the plain name nor the app-less host name is read there: a cookie any subdomain could set does
            // not count, nor one of no app.
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: token).status == .forbidden)
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: token, cookieName: "__Host-gh_csrf").status == .forbidden)
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: token, cookieName: name).status == .ok)
        }
    }

    @Test func expiredSupersededAndBrokenLinksSayWhatHappenedAndOfferANewEmail() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            _ = try await client.register("old@example.com")
            let first = try await client.latestLink("old@example.com")
            _ = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "old@example.com"))
            let second = try await client.latestLink("old@example.com")

            let superseded = try await open(client, confirmPath(first)).0
            #expect(superseded.status == .gone)
            #expect(superseded.text.contains("A newer email was sent"))
            #expect(superseded.text.contains("action=\"confirm/send\""))

            let broken = try await open(client, "/app/test-app/confirm?token=00&tokenId=\(second.tokenId)").0
            #expect(broken.text.contains("This link does not work"))
            let incomplete = try await open(client, "/app/test-app/confirm").0
            #expect(incomplete.text.contains("This link is incomplete"))

            clock.advance(by: 1801)
            let (expired, csrf) = try await open(client, confirmPath(second))
            #expect(expired.text.contains("This link has expired"))
            // The form on it sends a new email.
            let resent = try await client.postForm("/app/test-app/confirm/send", ["email": "old@example.com", "csrf": csrf!], cookie: csrf)
            #expect(resent.text.contains("Check your email"))
            let third = try await client.latestLink("old@example.com")
            #expect(third.tokenId != second.tokenId)
            // The same neutral answer for an unknown address, and no email.
            let unknown = try await client.postForm("/app/test-app/confirm/send", ["email": "nobody@example.com", "csrf": csrf!], cookie: csrf)
            #expect(unknown.text.contains("Check your email"))
            #expect(try await client.mailbox("nobody@example.com").isEmpty)
        }
    }

    @Test func theResetFormSpellsOutThePolicyShowsErrorsAndSetsThePassword() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("reset-page@example.com")
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "reset-page@example.com"))
            let link = try await client.latestLink("reset-page@example.com")
            let (form, csrf) = try await open(client, "/app/test-app/reset?token=\(link.token)&tokenId=\(link.tokenId)")
            #expect(form.text.contains("Use between 8 and 256 characters."))
            #expect(form.text.contains("<label for=\"password\">"))
            #expect(form.text.contains("autocomplete=\"new-password\""))

            var fields = ["token": link.token, "tokenId": link.tokenId, "csrf": csrf!, "password": "short", "passwordConfirmation": "short"]
            let short = try await client.postForm("/app/test-app/reset", fields, cookie: csrf)
            #expect(short.status == .badRequest)
            #expect(short.text.contains("id=\"password-error\" role=\"alert\""))
            #expect(short.text.contains("Password must be at least 8 characters."))
            #expect(short.text.contains("aria-invalid=\"true\""))

            fields["password"] = "a brand new secret"
            fields["passwordConfirmation"] = "a different secret"
            let mismatch = try await client.postForm("/app/test-app/reset", fields, cookie: csrf)
            #expect(mismatch.text.contains("The two passwords are not the same."))

            fields["passwordConfirmation"] = "a brand new secret"
            let done = try await client.postForm("/app/test-app/reset", fields, cookie: csrf)
            #expect(done.status == .ok)
            #expect(done.text.contains("Your password is changed"))
            #expect(try await client.login("reset-page@example.com", "a brand new secret").status == .ok)

            let used = try await client.postForm("/app/test-app/reset", fields, cookie: csrf)
            #expect(used.text.contains("This link was already used"))
        }
    }

    @Test func valuesAreEscapedInPages() async throws {
        try await withGatehouse { _, client in
            // A link whose token is markup: refused as a link, and not echoed.
            let link = try await open(client, "/app/test-app/confirm?token=%22%3E%3Cscript%3E&tokenId=x").0
            #expect(link.text.contains("This link does not work"))
            #expect(!link.text.contains("<script>"))

            // The resend form echoes the address it was given, as text: an address with markup in it is no address
            // (quotes and angle brackets are refused in a local part) and is not echoed; one with an apostrophe and
            // an ampersand is, its quote closing nothing.
            let (page, csrf) = try await open(client, "/app/test-app/confirm?token=00&tokenId=00")
            #expect(page.status.code < 500)
            let hostile = #"eve"><script>alert(1)</script>@example.com"#
            let refused = try await client.postForm("/app/test-app/confirm/send", ["email": hostile, "csrf": try #require(csrf)], cookie: csrf)
            #expect(refused.status == .badRequest)
            #expect(!refused.text.contains("<script>"))
            let odd = "o'neil&co@example.com"
            let answer = try await client.postForm("/app/test-app/confirm/send", ["email": odd, "csrf": try #require(csrf)], cookie: csrf)
            #expect(answer.text.contains("o&#39;neil&amp;co@example.com"), "\(answer.text)")
            #expect(!answer.text.contains("o'neil&co"))
        }
    }
}

extension TestClientProtocol {
    /// POST a hosted page's form as a browser: with (or without) the CSRF cookie `cookieName`, the other cookies of
    /// `jar`, and the browser's headers `browser` (say `Origin`).
    func postForm(
        _ path: String, _ fields: [String: String], cookie: String?, cookieName: String = "gh_csrf", alsoHolding jar: [String: String] = [:],
        browser: HTTPFields = [:]
    ) async throws -> Reply {
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        headers.append(contentsOf: browser)
        var cookies = jar
        if let cookie { cookies[cookieName] = cookie }
        if !cookies.isEmpty { headers[.cookie] = cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
        let body = fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" }.joined(separator: "&")
        return try await execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body)) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
    }
}
