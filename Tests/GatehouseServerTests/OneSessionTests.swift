import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Testing

/// A native-auth sign-in is a session of the one account store: the Client API's refresh-token routes (session,
/// logout, API keys) take its refresh token, under the native protocol's rules — only the current secret, and a spent
/// one brought back after the reuse window ends the session in both protocols.
@Suite struct OneSessionTests {
    static let keys = "/api/client/v2.0/auth/api_keys"

    @Test func aNativeRefreshTokenRefreshesManagesAPIKeysAndLogsOutAtTheClientAPI() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let tokens = try await client.nativeSignedUp("uma@example.com")
            let refresh = try #require(tokens.refreshToken)

            let session = try await client.call(Path.session, bearer: refresh)
            #expect(session.status == .created, "\(session.text)")
            let access = try session.decode(SessionResponse.self).accessToken
            let profile = try await client.call(Path.profile, .get, bearer: access)
            #expect(try profile.decode(ProfileResponse.self).userId == tokens.clientInfoUserId)

            let created = try await client.call(Self.keys, body: #"{"name":"cli"}"#, bearer: refresh)
            #expect(created.status == .created, "\(created.text)")
            let listed = try await client.call(Self.keys, .get, bearer: refresh)
            #expect(listed.text.contains("\"cli\""))

            // Logging out at the Client API ends the native session: its refresh token is refused at /token too.
            #expect(try await client.call(Path.session, .delete, bearer: refresh).status == .noContent)
            expectNativeError(try await client.nativeRefresh(refresh), .invalidGrant)
            #expect(try await client.call(Path.session, bearer: refresh).status == .unauthorized)
        }
    }

    @Test func aSpentNativeRefreshTokenAtTheClientAPIIsRefusedAndAfterTheWindowEndsTheSession() async throws {
        let clock = ManualClock()
        let config = nativeConfiguration()
        let window = TimeInterval(try #require(config.apps[0].nativeAuth).refreshTokenReuseWindow)
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            let first = try #require(try await client.nativeSignedUp("vic@example.com").refreshToken)
            let rotated = try await client.nativeRefresh(first)
            let second = try #require(try rotated.decode(NativeAuthTokenResponse.self).refreshToken)

            // Within the window: refused, nothing ended (the owner's late retry).
            #expect(try await client.call(Self.keys, .get, bearer: first).status == .unauthorized)
            #expect(try await client.call(Self.keys, .get, bearer: second).status == .ok)

            // After it: a copy. The session ends for its current token as well, in both protocols.
            clock.advance(by: window + 1)
            #expect(try await client.call(Path.session, bearer: first).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: second).status == .unauthorized)
            expectNativeError(try await client.nativeRefresh(second), .invalidGrant)
            let sessionId = try #require(OpaqueToken(second)).id
            #expect(try await gatehouse.env.store.session(id: sessionId)?.revokedAt != nil)
        }
    }

    @Test func aForgedOrForeignOpaqueTokenIsNoSession() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let victim = try #require(try await client.nativeSignedUp("wes@example.com").refreshToken)
            let sessionId = try #require(OpaqueToken(victim)).id
            // The victim's session id (access tokens carry it in `sid`) with a secret of the attacker's choosing.
            let forged = OpaqueToken.make(id: sessionId).encoded
            #expect(try await client.call(Self.keys, body: #"{"name":"x"}"#, bearer: forged).status == .unauthorized)
            #expect(try await client.call(Path.session, .delete, bearer: forged).status == .unauthorized)
            // The victim's session is untouched.
            #expect(try await client.call(Self.keys, .get, bearer: victim).status == .ok)
            // A Client API session's id (from its access token) is not a native session.
            let login = try await client.signUp("xan@example.com")
            let sid = try #require(try jwtPayload(login.accessToken)["sid"] as? String)
            #expect(try await client.call(Path.session, bearer: OpaqueToken.make(id: sid).encoded).status == .unauthorized)
        }
    }

    @Test func aNativeClientRemovedFromTheConfigurationHasNoSessionsAtTheClientAPIButMaySignOut() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-native-off-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("db.sqlite").path))
        var config = nativeConfiguration()
        config.database.url = url
        let (refresh, access) = try await withGatehouseResult(config) { _, client in
            let tokens = try await client.nativeSignedUp("yul@example.com")
            // Used, so that the server has verified (and may remember) the access token.
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .ok)
            return (try #require(tokens.refreshToken), tokens.accessToken)
        }
        let clientIds = config.apps[0].nativeAuth?.clientIds
        config.apps[0].nativeAuth?.clientIds = ["another-client"]
        try await withGatehouse(config) { _, client in
            // Neither its refresh token nor its access token works…
            let refused = try await client.call(Self.keys, .get, bearer: refresh)
            #expect(refused.status == .unauthorized)
            #expect(try await client.call(Path.profile, .get, bearer: access).status == .unauthorized)
            #expect(try await client.call("/api/client/v2.0/auth/password", body: #"{"password":"a new password"}"#, bearer: access).status == .unauthorized)
            // …but its holder can still sign it out.
            #expect(try await client.call(Path.session, .delete, bearer: refresh).status == .noContent)
        }
        // Configured again, the client's session stays signed out.
        config.apps[0].nativeAuth?.clientIds = clientIds ?? []
        try await withGatehouse(config) { _, client throws in
            #expect(try await client.call(Self.keys, .get, bearer: refresh).status == .unauthorized)
            #expect(try await client.call(Path.profile, .get, bearer: access).status == .unauthorized)
        }
        await drop()
    }
}

extension NativeAuthTokenResponse {
    /// The user id `client_info` names.
    var clientInfoUserId: String? {
        var base64 = clientInfo.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["uid"] as? String
    }
}
