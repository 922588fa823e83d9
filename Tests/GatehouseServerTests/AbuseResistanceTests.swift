import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// What a hostile client or network can make the server do beyond one request: lock owners out, make it work or
/// write without limit, trust plain-HTTP answers, reach the dev mailbox.
@Suite struct AbuseResistanceTests {
    /// A configuration built in code skips the loader's URL check; the outbound client refuses plain http to a
    /// remote host itself, before any connection (a network attacker could answer it).
    @Test func outboundCallsRefusePlainHTTPExceptToLoopback() async throws {
        let outbound = HTTPClientOutbound()
        
        for url in ["http://idp.example/jwks", "http://10.1.2.3/keys", "ftp://idp.example/jwks"] {
            do {
                _ = try await outbound.send(OutboundRequest(method: "GET", url: url, timeout: 5))
                Issue.record("\(url) was called")
            } catch {
                #expect(error.description.contains("loopback"), "\(url): \(error.description)")
            }
        }
        // Loopback over http is allowed: nothing listens on this port, so the call fails later, at connect.
        let port = try freePort()
        do {
            _ = try await outbound.send(OutboundRequest(method: "GET", url: "http://127.0.0.1:\(port)/jwks", timeout: 5))
            Issue.record("a closed port answered")
        } catch {
            #expect(!error.description.contains("loopback"), "\(error.description)")
        }
        await outbound.shutdown()
    }
}
