import Foundation
@testable import Gatehouse
import GatehouseDomain
import GatehouseServer
import Testing

@Suite struct LocationDowngradeTests {
    /// The app was given an https URL; a `/location` answer that sends it to plain http (a misconfigured
    /// publicURL, or someone who can change that answer) is refused before any credential is sent.
    @Test func anHTTPSAppRefusesToBeSentToPlainHTTP() async throws {
        try await withLiveServer { server in
            let balancer = TLSTerminatingTransport()
            let httpsBase = server.base.replacingOccurrences(of: "http://", with: "https://")
            var configuration = AppConfiguration(baseURL: httpsBase, transport: balancer, userStore: InMemoryUserStore())
            configuration.now = { server.clock.now }
            let app = App(id: "test-app", configuration: configuration)
            let error = await #expect(throws: ClientError.self) {
                try await app.login(credentials: .emailPassword(email: "ann@example.com", password: "correct horse"))
            }
            #expect(error?.message.contains("plain http after https") == true, "\(String(describing: error))")
            #expect(balancer.requestedURLs == ["\(httpsBase)/api/client/v2.0/app/test-app/location"])
        }
    }
}
