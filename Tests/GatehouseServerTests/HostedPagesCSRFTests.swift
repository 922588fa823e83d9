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
    /// GET a page as a browser with no cookies: the value its cookie and form carry (asserted equal).
    func open(_ client: some TestClientProtocol, _ path: String, cookieName: String) async throws -> String {
        let reply = try await client.call(path, .get)
        #expect(reply.status == .ok)
        let setCookie = try #require(reply.headers[.setCookie])
        #expect(setCookie.hasPrefix(cookieName + "="))
        let cookie = try #require(setCookie.firstMatch(of: /gh_csrf=([^;]+)/).map { String($0.output.1) })
        let field = try #require(reply.text.firstMatch(of: /name="csrf" value="([^"]+)"/).map { String($0.output.1) })
        #expect(cookie == field)
        return cookie
    }

    func post(
        _ client: some TestClientProtocol, _ path: String, _ fields: [String: String], cookie: String?, cookieName: String
    ) async throws -> Reply {
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if let cookie { headers[.cookie] = "\(cookieName)=\(cookie)" }
        let body = fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" }.joined(separator: "&")
        return try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body)) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
    }

    @Test(arguments: [false, true])
    func aValueMadeForOneBrowserFailsWithAnothersCookieAndWithoutOne(https: Bool) async throws {
        var configuration = testConfiguration()
        if https { configuration.server.publicURL = "https://auth.example.com" }
        let cookieName = https ? "__Host-gh_csrf" : "gh_csrf"
        try await withGatehouse(configuration) { _, client in
            _ = try await client.register("two@example.com")
            let link = try await client.latestLink("two@example.com")
            let page = "/app/test-app/confirm?token=\(link.token)&tokenId=\(link.tokenId)"
            // Two browsers open the same page: each gets its own value, both genuine.
            let first = try await open(client, page, cookieName: cookieName)
            let second = try await open(client, page, cookieName: cookieName)
            #expect(first != second)
            let form = ["token": link.token, "tokenId": link.tokenId]

            for (field, cookie) in [(first, second), (second, first), (first, nil), (first, "")] as [(String, String?)] {
                var fields = form
                fields["csrf"] = field
                let reply = try await post(client, "/app/test-app/confirm", fields, cookie: cookie, cookieName: cookieName)
                #expect(reply.status == .forbidden, "field from one browser, cookie \(cookie == nil ? "missing" : "of another")")
            }
            // A cookie with no field fails too.
            #expect(try await post(client, "/app/test-app/confirm", form, cookie: first, cookieName: cookieName).status == .forbidden)
            #expect(try await client.login("two@example.com").status == .unauthorized)

            // Each browser's own pair passes.
            var fields = form
            fields["csrf"] = second
            #expect(try await post(client, "/app/test-app/confirm", fields, cookie: second, cookieName: cookieName).status == .ok)
            #expect(try await client.login("two@example.com").status == .ok)
        }
    }
}
