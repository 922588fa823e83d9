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

/// Absolute lifetime and idle timeout of refresh tokens.
@Suite struct SessionLifetimeTests {
    @Test func anUnusedSessionEndsAfterTheIdleTimeoutAndAUsedOneLivesOn() async throws {
        let clock = ManualClock()
        var config = testConfiguration()
        config.apps[0].sessionIdleTimeout = 3600
        try await withGatehouse(config, clock: clock) { _, client in
            let idle = try await client.signUp("eve@example.com")
            let busy = try #require(try await client.login("eve@example.com").decode(LoginResponse.self))
            for _ in 0..<3 {
                clock.advance(by: 3000)
                #expect(try await client.call(Path.session, .post, bearer: busy.refreshToken).status == .created)
            }
            // 9000 s after login: the busy session was used every 3000 s; the idle one not since its login.
            let refused = try await client.call(Path.session, .post, bearer: idle.refreshToken)
            #expect(refused.status == .unauthorized)
            #expect(refused.error?.errorCode == .invalidSession)
            #expect(try await client.call(Path.session, .post, bearer: busy.refreshToken).status == .created)
        }
    }

    @Test func theAbsoluteLifetimeEndsEvenABusySession() async throws {
        let clock = ManualClock()
        var config = testConfiguration()
        config.apps[0].refreshTokenTTL = 7200
        config.apps[0].sessionIdleTimeout = 3600
        try await withGatehouse(config, clock: clock) { _, client in
            let login = try await client.signUp("fin@example.com")
            for _ in 0..<2 {
                clock.advance(by: 3500)
                #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .created)
            }
            clock.advance(by: 201)  // 7201 s after login, 201 s after its last use
            #expect(try await client.call(Path.session, .post, bearer: login.refreshToken).status == .unauthorized)
        }
    }

    @Test func nativeRefreshTokensIdleOutToo() async throws {
        let clock = ManualClock()
        var config = nativeConfiguration()
        config.apps[0].sessionIdleTimeout = 600
        try await withGatehouse(config, clock: clock) { _, client in
            let ct = try await client.nativeSignUp("gil@example.com", password: "a fine passphrase")
            let tokens = try await client.nativeTokens(ct, username: "gil@example.com")
            let refresh = try #require(tokens.refreshToken)
            clock.advance(by: 601)
            let refused = try await client.native(.token, ["grant_type": "refresh_token", "refresh_token": refresh])
            expectNativeError(refused, .expiredRefreshToken, code: NativeAuthErrorCode.expiredRefreshToken)
        }
    }
}
