import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

// Helpers of the abuse-control suites (rate limits, login delays, costly routes): configurations and requests from
// many client addresses.

/// A configuration whose client addresses come from `X-Forwarded-For` (so that one test process can be many
/// clients), with the app's rate limits replaced by `rules`.
func limitedConfiguration(_ rules: [RateLimitSettings.Kind: RateLimitSettings.Rule], native: Bool = false) -> GatehouseConfiguration {
    var config = native ? nativeConfiguration() : testConfiguration()
    config.server.clientIPHeader = "X-Forwarded-For"
    config.apps[0].rateLimits = RateLimitSettings(rules: rules)
    return config
}

extension TestClientProtocol {
    /// A password login from client address `ip`.
    func login(_ email: String, _ password: String = "correct horse", from ip: String) async throws -> Reply {
        let body = try JSONEncoder().encode(EmailPasswordLoginRequest(username: email, password: password))
        return try await post(Path.local("login"), body, from: ip)
    }

    /// A JSON POST from client address `ip` (behind a proxy that appends it), with a bearer token when given.
    func post(_ uri: String, _ body: Data, from ip: String, bearer: String? = nil) async throws -> Reply {
        var headers: HTTPFields = [.contentType: "application/json", HTTPField.Name("X-Forwarded-For")!: "203.0.113.250, \(ip)"]
        if let bearer { headers[.authorization] = "Bearer \(bearer)" }
        return try await execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(bytes: body)) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
    }
}

/// The test app with its login delays set (native auth on when `native`; client addresses from `X-Forwarded-For`
/// when `addresses`, so that one test process can be many clients).
func backoffConfiguration(
    freeFailures: Int, baseDelay: Int, maxDelay: Int, native: Bool = false, addresses: Bool = false
) -> GatehouseConfiguration {
    var config = native ? nativeConfiguration() : testConfiguration()
    config.apps[0].loginBackoff = LoginBackoffSettings(freeFailures: freeFailures, baseDelay: baseDelay, maxDelay: maxDelay)
    if addresses { config.server.clientIPHeader = "X-Forwarded-For" }
    return config
}
