import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// What ``PageCSRF`` promises, as two browsers see it: a form's value passes only with the cookie of the browser it
/// was made for, and never without a cookie.
@Suite struct HostedPagesCSRFTests {
    /// GET a page that holds a form (answered `status`; nil: any), as a browser holding `jar` (cookie name to value):
    /// the name and value of the CSRF cookie the browser then holds for the page's app, and whether the page set it
    /// (asserted equal to the form's value either way).
    func open(
        _ client: some TestClientProtocol, _ path: String, https: Bool, jar: [String: String] = [:], expecting status: HTTPResponse.Status? = .ok,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (name: String, value: String, set: Bool) {
        var headers: HTTPFields = [:]
        if !jar.isEmpty { headers[.cookie] = jar.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
        let reply = try await client.execute(uri: path, method: .get, headers: headers, body: nil) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
        if let status { #expect(reply.status == status, sourceLocation: sourceLocation) }
        let field = try #require(reply.text.firstMatch(of: /name="csrf" value="([^"]+)"/).map { String($0.output.1) }, sourceLocation: sourceLocation)
        guard let setCookie = reply.headers[.setCookie] else {
            let held = try #require(jar.first { $0.value == field }, "the page's value is no cookie the browser holds", sourceLocation: sourceLocation)
            return (held.key, held.value, false)
        }
        let cookie = try #require(setCookie.firstMatch(of: /^([^=]+)=([^;]+)/), sourceLocation: sourceLocation)
        let name = String(cookie.output.1)
        if https {
            #expect(name.wholeMatch(of: /__Host-gh_csrf-[0-9a-f]{16}/) != nil, "\(name)", sourceLocation: sourceLocation)
        } else {
            #expect(name == "gh_csrf", sourceLocation: sourceLocation)
        }
        #expect(String(cookie.output.2) == field, sourceLocation: sourceLocation)
        return (name, field, true)
    }

    @Test(arguments: [false, true])
    func aValueMadeForOneBrowserFailsWithAnothersCookieAndWithoutOne(https: Bool) async throws {
        var configuration = testConfiguration()
        if https { configuration.server.publicURL = "https://auth.example.com" }
        try await withGatehouse(configuration) { _, client in
            _ = try await client.register("two@example.com")
            let link = try await client.latestLink("two@example.com")
            let page = "/app/test-app/confirm?token=\(link.token)&tokenId=\(link.tokenId)"
            // Two browsers open the same page: each gets its own value, both genuine.
            let (cookieName, first, _) = try await open(client, page, https: https)
            let second = try await open(client, page, https: https).value
            #expect(first != second)
            let form = ["token": link.token, "tokenId": link.tokenId]

            for (field, cookie) in [(first, second), (second, first), (first, nil), (first, "")] as [(String, String?)] {
                var fields = form
                fields["csrf"] = field
                let reply = try await client.postForm("/app/test-app/confirm", fields, cookie: cookie, cookieName: cookieName)
                #expect(reply.status == .forbidden, "field from one browser, cookie \(cookie == nil ? "missing" : "of another")")
            }
            // A cookie with no field fails too.
            #expect(try await client.postForm("/app/test-app/confirm", form, cookie: first, cookieName: cookieName).status == .forbidden)
            #expect(try await client.login("two@example.com").status == .unauthorized)

            // Each browser's own pair passes.
            var fields = form
            fields["csrf"] = second
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: second, cookieName: cookieName).status == .ok)
            #expect(try await client.login("two@example.com").status == .ok)
        }
    }

    /// One browser opens a second page of the app (the same link in another tab, or a second email's link) before
    /// sending the first page's form: the second page reuses the browser's value, so both forms pass.
    @Test(arguments: [false, true]) func aSecondPageInTheSameBrowserLeavesTheFirstFormWorking(https: Bool) async throws {
        var configuration = testConfiguration()
        if https { configuration.server.publicURL = "https://auth.example.com" }
        try await withGatehouse(configuration) { _, client in
            _ = try await client.register("tabs@example.com")
            let link = try await client.latestLink("tabs@example.com")
            let page = "/app/test-app/confirm?token=\(link.token)&tokenId=\(link.tokenId)"
            let first = try await open(client, page, https: https)
            let second = try await open(client, page, https: https, jar: [first.name: first.value])
            #expect(!second.set && second.value == first.value)

            let fields = ["token": link.token, "tokenId": link.tokenId, "csrf": first.value]
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: first.value, cookieName: first.name).status == .ok)
            #expect(try await client.login("tabs@example.com").status == .ok)
        }
    }

    /// Behind https every app's cookie has `Path=/`: a page of another app opened in between gets a cookie of its own
    /// name, and the first app's form still passes with the first app's cookie. A value of one app never passes for
    /// another, under either name.
    @Test func pagesOfTwoAppsKeepTheirOwnCookies() async throws {
        var configuration = testConfiguration()
        configuration.server.publicURL = "https://auth.example.com"
        try await withGatehouse(configuration) { _, client in
            _ = try await client.register("apps@example.com")
            let link = try await client.latestLink("apps@example.com")
            #expect(try await client.register("apps@example.com", app: "auto-app").status == .created)
            #expect(try await client.call(Path.local("reset/send", app: "auto-app"), json: EmailRequest(email: "apps@example.com")).status == .ok)
            let reset = try await client.latestLink("apps@example.com")
            #expect(reset.tokenId != link.tokenId)
            let mine = try await open(client, "/app/test-app/confirm?token=\(link.token)&tokenId=\(link.tokenId)", https: true)
            let other = try await open(client, "/app/auto-app/reset?token=\(reset.token)&tokenId=\(reset.tokenId)", https: true, jar: [mine.name: mine.value])
            #expect(other.set && other.name != mine.name && other.value != mine.value)
            let jar = [mine.name: mine.value, other.name: other.value]

            var fields = ["token": link.token, "tokenId": link.tokenId, "csrf": other.value]
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: other.value, cookieName: mine.name).status == .forbidden)
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: nil, cookieName: mine.name, alsoHolding: jar).status == .forbidden)
            fields["csrf"] = mine.value
            #expect(try await client.postForm("/app/test-app/confirm", fields, cookie: nil, cookieName: mine.name, alsoHolding: jar).status == .ok)
            #expect(try await client.login("apps@example.com").status == .ok)
        }
    }

    /// A value is reused only while it has at least half its hour left: a page opened later gets a fresh one, so that
    /// no form is shown with a value about to expire. (The link may expire meanwhile; its page still holds a
    /// form, to send a new one.)
    @Test func aValuePastHalfItsLifeIsReplaced() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            _ = try await client.register("late@example.com")
            let link = try await client.latestLink("late@example.com")
            let page = "/app/test-app/confirm?token=\(link.token)&tokenId=\(link.tokenId)"
            let first = try await open(client, page, https: false)
            clock.advance(by: PageCSRF.maxAge / 2 - 1)
            let reused = try await open(client, page, https: false, jar: [first.name: first.value], expecting: nil)
            #expect(!reused.set && reused.value == first.value)
            clock.advance(by: 2)
            let later = try await open(client, page, https: false, jar: [first.name: first.value], expecting: nil)
            #expect(later.set && later.value != first.value)
        }
    }
}
