import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@Suite struct NativeRevocationTests {
    private func revoke(_ client: some TestClientProtocol, _ token: String, clientId: String = nativeClient) async throws -> Reply {
        try await client.native(.revoke, ["token": token, "client_id": clientId])
    }

    /// Signing out ends the session on the server: the refresh token and every access token of the session stop
    /// working at once, on both protocols.
    @Test func revokingARefreshTokenEndsItsSessionAtOnce() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let tokens = try await client.nativeSignedUp("revoke@example.com")
            let refresh = try #require(tokens.refreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .ok)
            let answer = try await revoke(client, refresh)
            #expect(answer.status == .ok)
            #expect(answer.contentType == "application/json")
            #expect(answer.text == "{}")
            expectNativeError(try await client.nativeRefresh(refresh), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .unauthorized)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100)
            #expect(events.contains { $0.kind == AuditKind.logout.rawValue && $0.detail["via"] == "native auth" })
            // Revoking again, or a token that never was, is still 200.
            #expect(try await revoke(client, refresh).status == .ok)
            #expect(try await revoke(client, "not-a-token").status == .ok)
        }
    }

    /// An access token revokes its own session (RFC 7009 lets a client revoke either kind).
    @Test func revokingAnAccessTokenEndsItsSession() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let tokens = try await client.nativeSignedUp("access-revoke@example.com")
            #expect(try await revoke(client, tokens.accessToken).status == .ok)
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .unauthorized)
            expectNativeError(
                try await client.nativeRefresh(try #require(tokens.refreshToken)), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken
            )
        }
    }

    /// Tokens of other sessions are untouched: a token of another app, a Client API session, a wrong secret.
    @Test func revocationOnlyEndsTheSessionOfTheTokenGiven() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let victim = try await client.nativeSignedUp("victim@example.com")
            let victimRefresh = try #require(victim.refreshToken)
            let clientAPI = try await client.signUp("realm@example.com")
            // A token with the victim's session id and a made-up secret.
            let forged = OpaqueToken(id: try #require(OpaqueToken(victimRefresh)).id, secret: Secrets.randomBytes(32)).encoded
            for token in [forged, clientAPI.refreshToken, clientAPI.accessToken] {
                #expect(try await revoke(client, token).status == .ok)
            }
            #expect(try await storedSession(gatehouse, victimRefresh).revokedAt == nil)
            #expect(try await client.call(Path.session, bearer: clientAPI.refreshToken).status == .created)
            #expect(try await client.nativeRefresh(victimRefresh).status == .ok)
            // An unknown client is refused as every native endpoint refuses it.
            expectNativeError(try await revoke(client, victimRefresh, clientId: "someone-else"), .unauthorizedClient)
        }
    }
}
