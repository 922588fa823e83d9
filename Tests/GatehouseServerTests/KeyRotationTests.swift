import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// `gatehouse keys rotate` / `retire` against a running server on the same database (a SQLite file, or the suite's
/// PostgreSQL), with an injected clock for the reload interval.
@Suite struct KeyRotationTests {
    static func kid(_ token: String) throws -> String {
        let header = try jsonSegment(try #require(token.split(separator: ".").first))
        return try #require(header["kid"] as? String)
    }

    static func jwksKids(_ client: any TestClientProtocol) async throws -> Set<String> {
        Set(try await client.call("/.well-known/jwks.json", .get).decode(JWKS.self).keys.map(\.kid))
    }

    /// A kid is the key's thumbprint and never starts with `-`: `gatehouse keys retire <kid>` would take it for
    /// options (a kid like `-ql3…h…` printed the help and exited 0 without retiring anything).
    @Test func keyIdsNeverLookLikeOptions() {
        let kids = (0..<640).map { _ in SigningKeys.makeRecord(now: Date()).kid }
        #expect(kids.allSatisfy { !$0.hasPrefix("-") && $0.count == 43 })
        #expect(Set(kids).count == kids.count)
    }

    @Test func rotatedKeysSignAndRetiredKeysStopVerifying() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("keys.sqlite").path))
        let config = {
            var config = nativeConfiguration()
            config.database.url = url
            return config
        }()
        let clock = ManualClock()
        try await withGatehouse(config, clock: clock) { _, client in
            let first = try await client.signUp("keys@example.com")
            let old = try Self.kid(first.refreshToken)
            let native = try await client.nativeSignedUp("native-keys@example.com")
            #expect(try Self.kid(native.accessToken) == old)
            let rotated = try await AuthServer.rotateSigningKey(configuration: config, clock: clock.clock, logger: quietLogger)
            #expect(rotated.kid != old)

            // Another instance started after the rotation signs with the new key; this one, whose copy of the keys
            // is fresh, reloads as soon as it meets the unknown kid (a few seconds later).
            clock.advance(by: 6)
            let other = try await AuthServer.open(configuration: config, clock: clock.clock, logger: quietLogger)
            let fromOther = try await other.makeApplication().test(.router) { otherClient in
                try await otherClient.login("keys@example.com").decode(LoginResponse.self)
            }
            try await other.close()
            #expect(try Self.kid(fromOther.refreshToken) == rotated.kid)
            #expect(try await client.call(Path.session, bearer: fromOther.refreshToken).status == .created)

            // New tokens here are signed with the new key; the old key's tokens still verify; the JWKS has both.
            let second = try await client.login("keys@example.com").decode(LoginResponse.self)
            #expect(try Self.kid(second.refreshToken) == rotated.kid)
            #expect(try await client.call(Path.session, bearer: first.refreshToken).status == .created)
            #expect(try await Self.jwksKids(client) == [old, rotated.kid])

            // Retired: within a minute its tokens are refused everywhere, and the JWKS drops it.
            try await AuthServer.retireSigningKey(configuration: config, kid: old, clock: clock.clock, logger: quietLogger)
            clock.advance(by: 61)
            let refused = try await client.call(Path.session, bearer: first.refreshToken)
            #expect(refused.status == .unauthorized)
            #expect(refused.error?.errorCode == .invalidSession)
            #expect(try await client.call(Path.session, bearer: second.refreshToken).status == .created)
            #expect(try await Self.jwksKids(client) == [rotated.kid])
            // A native auth refresh token is an opaque secret, not signed by the key: it keeps working, and the access
            // token it gets is signed by the current key.
            let refreshed = try await client.nativeRefresh(try #require(native.refreshToken))
            #expect(refreshed.status == .ok, "\(refreshed.text)")
            #expect(try Self.kid(try refreshed.decode(NativeAuthTokenResponse.self).accessToken) == rotated.kid)

            // The last active key cannot go, and an unknown one is named as such.
            await #expect(throws: AdminError.self) { try await AuthServer.retireSigningKey(configuration: config, kid: rotated.kid, logger: quietLogger) }
            await #expect(throws: AdminError.self) { try await AuthServer.retireSigningKey(configuration: config, kid: "nope", logger: quietLogger) }
            let listed = try await AuthServer.signingKeys(configuration: config, logger: quietLogger)
            #expect(listed.map(\.kid) == [old, rotated.kid])
            #expect(listed.map(\.signing) == [false, true])
            #expect(listed[0].retiredAt != nil && listed[1].retiredAt == nil)
        }
        await drop()
    }
}
