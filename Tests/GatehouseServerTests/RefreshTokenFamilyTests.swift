import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite struct RefreshTokenFamilyTests {
    /// A thief who copied the refresh token rotates twice; the owner's copy is then two rotations behind. Presented
    /// after the reuse window it must end the session, the thief's current token with it.
    @Test func aTokenSpentTwoRotationsAgoEndsTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { gatehouse, client in
            let stolen = try #require(try await client.nativeSignedUp("family@example.com").refreshToken)
            var thief = stolen
            var thiefAccess = ""
            for _ in 0..<2 {
                let rotated = try await client.nativeRefresh(thief).decode(NativeAuthTokenResponse.self)
                thief = try #require(rotated.refreshToken)
                thiefAccess = rotated.accessToken
                clock.advance(by: 5)
            }
            clock.advance(by: 60)
            expectNativeError(try await client.nativeRefresh(stolen), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await storedSession(gatehouse, stolen).revokedAt != nil)
            expectNativeError(try await client.nativeRefresh(thief), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: thiefAccess).status == .unauthorized)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100)
            #expect(events.contains { $0.kind == AuditKind.refreshTokenReused.rawValue })
        }
    }

    /// A session id alone (every access token carries it in `sid`) with a made-up secret learns nothing about the
    /// session: not that it was revoked, nor that its user is disabled.
    @Test func aForgedSecretLearnsNothingAboutTheSession() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let tokens = try await client.nativeSignedUp("forged@example.com")
            let real = try #require(tokens.refreshToken)
            let forged = OpaqueToken(id: try #require(OpaqueToken(real)).id, secret: Secrets.randomBytes(32)).encoded
            let live = try await client.nativeRefresh(forged)
            #expect(try await client.native(.revoke, ["token": real]).status == .ok)
            let revoked = try await client.nativeRefresh(forged)
            for reply in [live, revoked] {
                expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
                #expect(reply.nativeError?.errorDescription.contains("not valid") == true, "\(reply.text)")
            }
            #expect(try await storedSession(gatehouse, real).revokedAt != nil)
        }
    }

    /// Inside the window a grandparent token is a client's late retry of a race it already won: refused, but the
    /// session lives. Any number of rotations back, after the window, it ends the session.
    @Test func aSpentTokenInsideTheWindowIsRefusedWithoutEndingTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { gatehouse, client in
            let first = try #require(try await client.nativeSignedUp("window@example.com").refreshToken)
            var tokens = [first]
            for _ in 0..<5 {
                let rotated = try await client.nativeRefresh(tokens.last!).decode(NativeAuthTokenResponse.self)
                tokens.append(try #require(rotated.refreshToken))
                clock.advance(by: 1)
            }
            expectNativeError(try await client.nativeRefresh(tokens[1]), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await storedSession(gatehouse, first).revokedAt == nil)
            #expect(try await client.nativeRefresh(tokens.last!).status == .ok)
            clock.advance(by: 120)
            expectNativeError(try await client.nativeRefresh(tokens[2]), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await storedSession(gatehouse, first).revokedAt != nil)
        }
    }
}
