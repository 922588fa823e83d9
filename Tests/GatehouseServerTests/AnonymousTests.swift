import GatehouseArgon2
import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import GatehouseTestSupport
import Testing

@Suite struct AnonymousTests {
    @Test func everyAnonymousLoginIsANewUserWithAnAnonIdentity() async throws {
        try await withGatehouse { _, client in
            let first = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: #"{"provider":"anon-user","options":{"device":{}}}"#)
            #expect(first.status == .ok)
            let one = try first.decode(LoginResponse.self)
            let two = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: #"{"provider":"anon-user"}"#).decode(LoginResponse.self)
            #expect(one.userId != two.userId)
            let profile = try await client.call(Path.profile, .get, bearer: one.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["anon-user"])
            #expect(profile.data.isEmpty)
            #expect(try await client.call(Path.session, bearer: one.refreshToken).status == .created)
        }
    }

    @Test func anonymousLoginIsRefusedWhereTheProviderIsOff() async throws {
        try await withGatehouse { _, client in
            let reply = try await client.call(Path.app("auto-app") + "/auth/providers/anon-user/login", body: #"{"provider":"anon-user"}"#)
            #expect(reply.status == .notFound)
            #expect(reply.error?.errorCode == .authProviderNotFound)
        }
    }
}
