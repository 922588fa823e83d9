import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

@Suite struct ServiceRoutesTests {
    @Test func healthAndReadiness() async throws {
        try await withGatehouse { _, client in
            let health = try await client.call("/healthz", .get)
            #expect(health.status == .ok)
            #expect(health.text == #"{"status":"ok"}"#)
            let ready = try await expectReady(client)
            #expect(ready.text == #"{"status":"ready"}"#)
        }
    }

    /// Load balancers and uptime checks probe with HEAD: every GET route answers it with the GET's status and
    /// headers (the length included) and no body.
    @Test func headAnswersAsGetWithoutTheBody() async throws {
        try await withGatehouse { _, client in
            for path in ["/healthz", "/readyz", "/.well-known/jwks.json", Path.app() + "/location"] {
                let get = try await client.call(path, .get)
                let head = try await client.call(path, .head)
                #expect(head.status == get.status, "\(path)")
                #expect(head.body.isEmpty, "\(path)")
                #expect(head.headers[.contentLength] == get.headers[.contentLength], "\(path)")
                #expect(head.headers[.contentType] == get.headers[.contentType], "\(path)")
            }
            #expect(try await client.call("/healthz", .head).status == .ok)
        }
    }

    @Test func readinessFailsWhenTheDatabaseIsGone() async throws {
        let gatehouse = try await AuthServer.open(configuration: testConfiguration(), logger: quietLogger)
        try await gatehouse.close()
        try await gatehouse.makeApplication().test(.router) { client in
            let ready = try await client.call("/readyz", .get)
            #expect(ready.status == .serviceUnavailable)
            #expect(try await client.call("/healthz", .get).status == .ok)
            // API calls answer 503 in the envelope, not 500.
            let register = try await client.register("down@example.com")
            #expect(register.status == .serviceUnavailable)
            #expect(register.error?.errorCode == .maintenanceInProgress)
            let login = try await client.login("down@example.com")
            #expect(login.status == .serviceUnavailable)
        }
    }

    @Test func openAPIDocumentIsServedAndMatchesTheRepositoryFile() async throws {
        try await withGatehouse { _, client in
            let reply = try await client.call("/openapi.yaml", .get)
            #expect(reply.status == .ok)
            #expect(reply.contentType == "application/yaml")
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let file = try Data(contentsOf: root.appendingPathComponent("openapi.yaml"))
            #expect(reply.body == file)
            #expect(reply.text.contains("/api/client/v2.0/auth/session"))
        }
    }
}
