import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// A web page on another site, open in the owner's browser, makes requests from the owner's own address: it can send
/// what needs no CORS preflight (a JSON body labelled `text/plain`, the native auth API's form) though it cannot read
/// the answers. The API routes refuse state-changing requests a browser marks as cross-site (``CrossSiteGuard``),
/// before anything is counted, so such a page can neither set the login delays on the owner's address nor spend its
/// allowances.
@Suite struct CrossSiteRequestTests {
    static let owner = "198.51.100.10"
    static let evil = "https://evil.example"

    /// A request as a browser sends it for a page: `Origin` and `Sec-Fetch-Site` as given, from the owner's address.
    func browser(
        _ client: any TestClientProtocol, _ uri: String, _ method: HTTPRequest.Method = .post, origin: String?, fetchSite: String? = nil,
        contentType: String = "text/plain;charset=UTF-8", body: String? = nil, bearer: String? = nil
    ) async throws -> Reply {
        var headers: HTTPFields = [.contentType: contentType, HTTPField.Name("X-Forwarded-For")!: "203.0.113.250, \(Self.owner)"]
        if let origin { headers[.origin] = origin }
        if let fetchSite { headers[CrossSiteGuard<GatehouseRequestContext>.fetchSite] = fetchSite }
        if let bearer { headers[.authorization] = "Bearer \(bearer)" }
        return try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
    }

    @Test func aPageOnAnotherSiteCannotSetTheLoginDelaysOnTheOwnersAddress() async throws {
        try await withGatehouse(limitedConfiguration(RateLimitSettings.defaultRules)) { _, client in
            _ = try await client.signUp("olga@example.com")
            let guess = #"{"username":"olga@example.com","password":"guess"}"#
            // More than the free failures of the production delays, as the page would send them.
            for _ in 0..<8 {
                let reply = try await browser(client, Path.local("login"), origin: Self.evil, body: guess)
                #expect(reply.status == .forbidden, "\(reply.text)")
                #expect(reply.error?.errorCode == .forbidden)
                #expect(reply.error?.error.contains("cors.allowedOrigins") == true)
                #expect(reply.headers[.accessControlAllowOrigin] == nil)
            }
            // The same from a sandboxed frame (`Origin: null`), and from a browser that names only the site.
            #expect(try await browser(client, Path.local("login"), origin: "null", body: guess).status == .forbidden)
            #expect(try await browser(client, Path.local("login"), origin: nil, fetchSite: "cross-site", body: guess).status == .forbidden)
            // None of it counted: the owner's app, from the same address, signs in at once.
            #expect(try await client.login("olga@example.com", from: Self.owner).status == .ok)
            // The owner's own wrong passwords still count, from an app (no Origin).
            for _ in 0..<5 { #expect(try await client.login("olga@example.com", "typo", from: Self.owner).status == .unauthorized) }
            #expect(try await client.login("olga@example.com", from: Self.owner).status == .tooManyRequests)
        }
    }

    @Test func aRegistrationFromAnotherSiteWritesNothingAndSendsNothing() async throws {
        try await withGatehouse(limitedConfiguration(RateLimitSettings.defaultRules)) { gatehouse, client in
            let body = #"{"email":"vera@example.com","password":"correct horse"}"#
            for _ in 0..<6 { #expect(try await browser(client, Path.local("register"), origin: Self.evil, body: body).status == .forbidden) }
            let account = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "vera@example.com")
            #expect(account == nil)
            #expect(try await client.mailbox("vera@example.com").isEmpty)
            // The owner's own address still has its whole allowance.
            #expect(try await client.post(Path.local("register"), Data(body.utf8), from: Self.owner).status == .created)
            #expect(try await client.mailbox("vera@example.com").count == 1)
        }
    }

    @Test func aFormFromAnotherSiteIsRefusedByNativeAuthInItsOwnEnvelope() async throws {
        var config = nativeConfiguration()
        config.server.clientIPHeader = "X-Forwarded-For"
        try await withGatehouse(config) { _, client in
            _ = try await client.nativeSignedUp("nina@example.com")
            let form = "client_id=\(nativeClient)&username=nina%40example.com&challenge_type=password%20redirect"
            let path = NativeAuthEndpoint.signInInitiate.path(appId: "test-app")
            let refused = try await browser(client, path, origin: Self.evil, contentType: "application/x-www-form-urlencoded", body: form)
            #expect(refused.status == .forbidden)
            let failure = try JSONSerialization.jsonObject(with: refused.body) as? [String: Any]
            #expect(failure?["error"] as? String == "invalid_request", "\(refused.text)")
            // MSAL sends no Origin: served.
            let app = try await browser(client, path, origin: nil, contentType: "application/x-www-form-urlencoded", body: form)
            #expect(app.status == .ok, "\(app.text)")
        }
    }

    @Test func listedOriginsTheServersOwnAndSafeMethodsAreServed() async throws {
        var config = limitedConfiguration(RateLimitSettings.defaultRules)
        config.apps[0].corsOrigins = ["https://app.example.com"]
        try await withGatehouse(config) { _, client in
            let login = try await client.signUp("lena@example.com")
            let right = #"{"username":"lena@example.com","password":"correct horse"}"#
            // The app's own web client.
            let listed = try await browser(client, Path.local("login"), origin: "https://App.Example.com", contentType: "application/json", body: right)
            #expect(listed.status == .ok, "\(listed.text)")
            #expect(listed.headers[.accessControlAllowOrigin] == "https://App.Example.com")
            // A page the server serves itself (`http://gatehouse.test` is the test server's public URL), by Origin or by
            // the browser's own word.
            #expect(try await browser(client, Path.local("login"), origin: "http://gatehouse.test", body: right).status == .ok)
            #expect(try await browser(client, Path.local("login"), origin: nil, fetchSite: "same-origin", body: right).status == .ok)
            #expect(try await browser(client, Path.local("login"), origin: nil, fetchSite: "none", body: right).status == .ok)
            // Token routes take any app's origins; a listed origin of this app refreshes.
            #expect(try await browser(client, Path.session, origin: "https://app.example.com", bearer: login.refreshToken).status == .created)
            // A read changes nothing: served whatever the origin (the bearer token is the page's own to hold).
            #expect(try await browser(client, Path.profile, .get, origin: Self.evil, bearer: login.accessToken).status == .ok)
            // Another site's page may not end the session either.
            #expect(try await browser(client, Path.session, .delete, origin: Self.evil, bearer: login.refreshToken).status == .forbidden)
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .created)
        }
    }

    /// A page on another site embeds made-up confirmation links as images (the browser sends no `Origin` for them):
    /// each would count against its visitor's address's `code` limit, which the visitor's own links share.
    @Test func linksEmbeddedInAnotherSitesPageAreNeitherOpenedNorCounted() async throws {
        try await withGatehouse(limitedConfiguration(RateLimitSettings.defaultRules)) { _, client in
            #expect(try await client.register("ida@example.com").status == .created)
            let link = try await client.latestLink("ida@example.com")
            func open(_ token: String, _ tokenId: String, as destination: String, mode: String) async throws -> Reply {
                var headers: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "203.0.113.250, \(Self.owner)"]
                headers[HTTPField.Name("Sec-Fetch-Dest")!] = destination
                headers[HTTPField.Name("Sec-Fetch-Mode")!] = mode
                headers[HTTPField.Name("Sec-Fetch-Site")!] = "cross-site"
                return try await client.execute(uri: "/app/test-app/confirm?token=\(token)&tokenId=\(tokenId)", method: .get, headers: headers) { response in
                    Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
                }
            }
            let limit = try #require(RateLimitSettings.defaultRules[.code]?.perIP?.count)
            for index in 0...limit {
                let embedded = try await open(String(format: "%064x", index), String(format: "%024x", index), as: "image", mode: "no-cors")
                #expect(embedded.status == .forbidden)
            }
            #expect(try await open("00", "00", as: "iframe", mode: "navigate").status == .forbidden)
            // The visitor's own link, opened from the mail as a page, still opens.
            let own = try await open(link.token, link.tokenId, as: "document", mode: "navigate")
            #expect(own.status == .ok, "\(own.text)")
            #expect(own.text.contains("Confirm your email"))
        }
    }

    @Test func anOriginIsTheSchemeHostAndPortAsBrowsersWriteIt() {
        #expect(BrowserOrigin.of("https://Auth.Example.com/") == "https://auth.example.com")
        #expect(BrowserOrigin.of("https://auth.example.com:443/base") == "https://auth.example.com")
        #expect(BrowserOrigin.of("http://127.0.0.1:9090") == "http://127.0.0.1:9090")
        #expect(BrowserOrigin.of("http://auth.example.com:80") == "http://auth.example.com")
        #expect(BrowserOrigin.of("not a url") == nil)
    }
}
