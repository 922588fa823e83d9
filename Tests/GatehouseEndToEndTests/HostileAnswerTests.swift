import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import Gatehouse
import GatehouseDomain
import GatehouseServer
import GatehouseTestSupport
import Testing

/// What the SDK does with answers that would send its credentials elsewhere or hand it someone else's session: a
/// `/location` that downgrades to plain http, a redirect, a refresh answered with another user's token.
@Suite struct HostileAnswerTests {
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

    /// A redirect is handed back, not followed: followed, it would carry the request's `Authorization` (a refresh
    /// token) and body to wherever it points. Over real HTTP, with the default transport; the SDK reports it naming
    /// where it pointed.
    @Test func theTransportFollowsNoRedirect() async throws {
        try await withIdentityProvider { idp in
            let before = idp.jwksRequests
            let request = TransportRequest(
                method: "GET", url: try #require(URL(string: idp.baseURL + "/moved-jwks")), headers: ["Authorization": "Bearer refresh-secret"]
            )
            // The default transport, and one over a session of the app's own (URLSession.shared follows redirects).
            for transport in [URLSessionTransport(), URLSessionTransport(session: .shared)] {
                let response = try await transport.send(request)
                #expect(response.statusCode == 307)
                #expect(response.headers["location"] == idp.baseURL + "/jwks")
                #expect(idp.jwksRequests == before, "the redirect was followed")
            }
            let response = try await URLSessionTransport().send(request)
            let error = try #require(AppCore.error(from: response) as? ClientError)
            #expect(error.httpStatus == 307)
            #expect(error.message.contains("not followed") && error.message.contains("/jwks"), "\(error.message)")
        }
    }

    /// Something in between (a cache keyed wrongly, a confused proxy) answers one user's refresh with another user's
    /// session: the SDK refuses the access token of someone else, and the user keeps the tokens they had.
    @Test func aRefreshAnsweredWithAnotherUsersTokenIsRefused() async throws {
        try await withLiveServer { server in
            let swapper = RefreshSwapper()
            let app = server.app(transport: swapper)
            let other = try await server.signedInUser(server.app(), "other@example.com")
            let user = try await server.signedInUser(app, "mine@example.com")
            let before = try #require(user.accessToken)
            swapper.answerWith(try #require(other.refreshToken))
            let error = await #expect(throws: ClientError.self) { try await user.refreshCustomData() }
            #expect(error?.message.contains("another user") == true, "\(String(describing: error))")
            #expect(user.accessToken == before)
            #expect(user.isLoggedIn)
        }
    }
}

/// Sends every refresh (`POST …/auth/session`) with another refresh token once told to: the answer is that other
/// session's, as a wrongly keyed cache would serve it.
private final class RefreshSwapper: NetworkTransport, @unchecked Sendable {
    private let base = URLSessionTransport()
    private let lock = NSLock()
    private var replacement: String?

    func answerWith(_ refreshToken: String) { lock.withLock { replacement = refreshToken } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        var request = request
        if request.method == "POST", request.url.path.hasSuffix("/auth/session"), let token = lock.withLock({ replacement }) {
            request.headers["Authorization"] = "Bearer \(token)"
        }
        return try await base.send(request)
    }
}
