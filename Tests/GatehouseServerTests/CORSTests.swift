import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// `cors.allowedOrigins`: browser clients on listed origins may call an app's APIs; others get no CORS headers.
@Suite struct CORSTests {
    static var configuration: GatehouseConfiguration {
        var config = testConfiguration()
        config.apps[0].corsOrigins = ["https://app.example.com"]
        return config
    }

    func call(_ client: any TestClientProtocol, _ uri: String, _ method: HTTPRequest.Method, origin: String, preflight: Bool = false, body: String? = nil) async throws -> TestResponse {
        var headers: HTTPFields = [.origin: origin, .contentType: "application/json"]
        if preflight { headers[.accessControlRequestMethod] = "POST" }
        return try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
    }

    @Test func listedOriginsGetPreflightsAndHeadersOthersDoNot() async throws {
        try await withGatehouse(Self.configuration) { _, client in
            let login = Path.local("login")
            let preflight = try await call(client, login, .options, origin: "https://app.example.com", preflight: true)
            #expect(preflight.status == .noContent)
            #expect(preflight.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(preflight.headers[.accessControlAllowHeaders]?.contains("authorization") == true)
            #expect(preflight.headers[.vary] == "Origin")

            // The answer itself, a refusal included, carries the header so the page can read it.
            let refused = try await call(client, login, .post, origin: "https://app.example.com", body: #"{"username":"x@example.com","password":"wrong"}"#)
            #expect(refused.status == .unauthorized)
            #expect(refused.headers[.accessControlAllowOrigin] == "https://app.example.com")

            // Another origin, another app's routes, hosted pages: no CORS headers.
            let other = try await call(client, login, .options, origin: "https://evil.example", preflight: true)
            #expect(other.headers[.accessControlAllowOrigin] == nil)
            let otherApp = try await call(client, Path.local("login", app: "auto-app"), .options, origin: "https://app.example.com", preflight: true)
            #expect(otherApp.headers[.accessControlAllowOrigin] == nil)
            let page = try await call(client, "/app/test-app/confirm", .get, origin: "https://app.example.com")
            #expect(page.headers[.accessControlAllowOrigin] == nil)

            // Token routes name no app in the path: any app's origins are allowed there.
            let session = try await call(client, Path.session, .options, origin: "https://app.example.com", preflight: true)
            #expect(session.headers[.accessControlAllowOrigin] == "https://app.example.com")
        }
    }

    @Test func originsMustBeExact() throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("gatehouse.yaml")
        func load(_ yaml: String) throws -> GatehouseConfiguration {
            try yaml.write(to: file, atomically: true, encoding: .utf8)
            return try ConfigurationLoader(environment: [:]).load(file: file.path)
        }
        for bad in ["*", "https://*.example.com", "https://app.example.com/", "ftp://x.example", "app.example.com"] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try load("apps: [{id: a, cors: {allowedOrigins: ['\(bad)']}}]") }
        }
        let good = try load("apps: [{id: a, cors: {allowedOrigins: ['https://App.example.com:8443']}}]")
        #expect(good.apps[0].corsOrigins == ["https://app.example.com:8443"])
        // A default port is left out, as browsers leave it out of `Origin`.
        let defaults = try load("apps: [{id: a, cors: {allowedOrigins: ['https://app.example.com:443', 'http://dev.example.com:80']}}]")
        #expect(defaults.apps[0].corsOrigins == ["https://app.example.com", "http://dev.example.com"])
    }
}
