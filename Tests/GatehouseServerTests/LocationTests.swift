import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct LocationTests {
    @Test func locationAnswersAllFourKeysWithThePublicURL() async throws {
        try await withGatehouse { _, client in
            let reply = try await client.call(Path.app() + "/location", .get)
            #expect(reply.status == .ok)
            let location = try reply.decode(LocationResponse.self)
            #expect(location.hostname == "http://gatehouse.test")
            #expect(location.wsHostname == "ws://gatehouse.test")
            #expect(!location.deploymentModel.isEmpty)
            #expect(!location.location.isEmpty)
        }
    }

    @Test func httpsPublicURLGivesWSS() async throws {
        var config = testConfiguration()
        config.server.publicURL = "https://auth.example.com"
        try await withGatehouse(config) { _, client in
            let location = try await client.call(Path.app() + "/location", .get).decode(LocationResponse.self)
            #expect(location.hostname == "https://auth.example.com")
            #expect(location.wsHostname == "wss://auth.example.com")
        }
    }
}
