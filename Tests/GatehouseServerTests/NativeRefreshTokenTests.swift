import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct NativeRefreshTokenTests {
    private func signedIn(_ client: some TestClientProtocol, _ email: String) async throws -> NativeAuthTokenResponse {
        try await client.nativeSignedUp(email)
    }

    private func refresh(_ client: some TestClientProtocol, _ token: String) async throws -> Reply {
        try await client.nativeRefresh(token)
    }

    @Test func everyRefreshRotatesTheToken() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let first = try await signedIn(client, "r@example.com")
            let rt1 = try #require(first.refreshToken)
            let second = try await refresh(client, rt1).decode(NativeAuthTokenResponse.self)
            let rt2 = try #require(second.refreshToken)
            #expect(rt2 != rt1)
            #expect(try await client.call(Path.profile, .get, bearer: second.accessToken).status == .ok)
            let third = try await refresh(client, rt2).decode(NativeAuthTokenResponse.self)
            #expect(try #require(third.refreshToken) != rt2)
            #expect(try jwtPayload(try #require(third.idToken))["aud"] as? String == nativeClient)
        }
    }

    @Test func reuseInsideTheWindowAnswersTheSameTokenAndAfterItRevokesTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { _, client in
            let rt1 = try #require(try await signedIn(client, "s@example.com").refreshToken)
            let rotated = try await refresh(client, rt1).decode(NativeAuthTokenResponse.self)
            let rt2 = try #require(rotated.refreshToken)
            clock.advance(by: 10)
            let retried = try await refresh(client, rt1)
            #expect(retried.status == .ok)
            #expect(try retried.decode(NativeAuthTokenResponse.self).refreshToken == rt2)

            clock.advance(by: 60)
            let replayed = try await refresh(client, rt1)
            expectNativeError(replayed, .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            // The whole session is gone: the current token fails too, and so do its access tokens.
            expectNativeError(try await refresh(client, rt2), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: rotated.accessToken).status == .unauthorized)
        }
    }

    /// A thief rotated the stolen token ahead; the owner's client signs out through the Client API with the token it
    /// still holds, inside the reuse window. The session ends: the thief's newer token and access token stop working.
    @Test func signingOutWithASpentTokenEndsTheSessionAThiefRotatedAhead() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { _, client in
            let owners = try #require(try await signedIn(client, "rotated@example.com").refreshToken)
            let thiefs = try await refresh(client, owners).decode(NativeAuthTokenResponse.self)
            clock.advance(by: 5)
            #expect(try await client.call(Path.session, .delete, bearer: owners).status == .noContent)
            expectNativeError(try await refresh(client, try #require(thiefs.refreshToken)), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: thiefs.accessToken).status == .unauthorized)
            // Any other use of the spent token through the Client API is still refused, and ends nothing more.
            #expect(try await client.call(Path.session, bearer: owners).status == .unauthorized)
        }
    }

    /// After the reuse window a spent token is a copy someone held. Signing out with it, through either protocol,
    /// still ends the session (the thief's newer token with it), and the audit log records the replay, not a logout.
    @Test(arguments: ["client api", "native auth"]) func signingOutWithATokenSpentLongAgoIsRecordedAsAReplay(_ via: String) async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { gatehouse, client in
            let signedUp = try await signedIn(client, "late@example.com")
            let owners = try #require(signedUp.refreshToken)
            let thiefs = try await refresh(client, owners).decode(NativeAuthTokenResponse.self)
            clock.advance(by: 120)
            if via == "client api" {
                #expect(try await client.call(Path.session, .delete, bearer: owners).status == .noContent)
            } else {
                #expect(try await client.native(.revoke, ["token": owners]).status == .ok)
            }
            expectNativeError(try await refresh(client, try #require(thiefs.refreshToken)), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: thiefs.accessToken).status == .unauthorized)
            let user = try jwtPayload(signedUp.accessToken)["sub"] as? String
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: user, afterSeq: nil, limit: 100)
            #expect(events.filter { $0.kind == AuditKind.refreshTokenReused.rawValue }.map { $0.detail["via"] } == [via])
            #expect(!events.contains { $0.kind == AuditKind.logout.rawValue })
        }
    }

    @Test func racingRefreshesRotateOnceAndAgree() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let rt1 = try #require(try await signedIn(client, "t@example.com").refreshToken)
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<4 { group.addTask { try await refresh(client, rt1) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.allSatisfy { $0.status == .ok })
            let tokens = Set(try replies.map { try $0.decode(NativeAuthTokenResponse.self).refreshToken })
            #expect(tokens.count == 1)
            let session = try await storedSession(gatehouse, rt1)
            #expect(session.previousSecretHash == OpaqueToken(rt1)?.hash)
        }
    }

    /// With a reuse window of 0 a rotated token is spent at once: presented again at the very instant it rotated (the
    /// clock stands still), it is a replay, and the session ends, instead of answering the new token a second time.
    @Test func withNoReuseWindowASecondUseAtTheSameInstantEndsTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(reuseWindow: 0), clock: clock) { _, client in
            let rt1 = try #require(try await signedIn(client, "strict@example.com").refreshToken)
            let rotated = try await refresh(client, rt1).decode(NativeAuthTokenResponse.self)
            expectNativeError(try await refresh(client, rt1), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            expectNativeError(try await refresh(client, try #require(rotated.refreshToken)), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: rotated.accessToken).status == .unauthorized)
        }
    }

    /// Refreshes racing with one token and no reuse window: exactly one answers a new token; the others are refused,
    /// none with the winner's token, and the session ends, the winner's new token with it.
    @Test func withNoReuseWindowRacingRefreshesHaveOneWinnerAndEndTheSession() async throws {
        try await withGatehouse(nativeConfiguration(reuseWindow: 0)) { _, client in
            let rt1 = try #require(try await signedIn(client, "race@example.com").refreshToken)
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<4 { group.addTask { try await refresh(client, rt1) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let won = replies.filter { $0.status == .ok }
            try #require(won.count == 1)
            for lost in replies where lost.status != .ok {
                expectNativeError(lost, .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            }
            let winner = try won[0].decode(NativeAuthTokenResponse.self)
            expectNativeError(try await refresh(client, try #require(winner.refreshToken)), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: winner.accessToken).status == .unauthorized)
        }
    }

    @Test func anExpiredSessionIsExpiredRefreshToken() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { _, client in
            let rt = try #require(try await signedIn(client, "u@example.com").refreshToken)
            clock.advance(by: 5_184_001)
            expectNativeError(try await refresh(client, rt), .expiredRefreshToken, code: NativeAuthErrorCode.expiredRefreshToken)
            expectNativeError(try await refresh(client, "not-a-token"), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
        }
    }
}

/// The stored flow behind a continuation token.
func storedFlow(_ gatehouse: AuthServer, _ token: String) async throws -> NativeFlowRecord {
    let id = try #require(OpaqueToken(token)).id
    return try #require(try await gatehouse.env.store.flow(id: id))
}

/// The stored session behind a native refresh token.
func storedSession(_ gatehouse: AuthServer, _ token: String) async throws -> SessionRecord {
    let id = try #require(OpaqueToken(token)).id
    return try #require(try await gatehouse.env.store.session(id: id))
}
