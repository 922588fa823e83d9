import GatehouseArgon2
import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import GatehouseTestSupport
import Testing

@Suite struct SessionTests {
    @Test func refreshGivesANewAccessTokenThatWorks() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let login = try await client.signUp("zoe@example.com")
            clock.advance(by: 60)
            let reply = try await client.call(Path.session, bearer: login.refreshToken)
            #expect(reply.status == .created)
            let access = try reply.decode(SessionResponse.self).accessToken
            #expect(access != login.accessToken)
            #expect(try jwtPayload(access)["iat"] as? Int == Int(clock.now.timeIntervalSince1970))
            #expect(try await client.call(Path.profile, .get, bearer: access).status == .ok)
        }
    }

    @Test func anExpiredAccessTokenIs401AndRefreshRecovers() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let login = try await client.signUp("abe@example.com")
            clock.advance(by: 1799)
            #expect(try await client.call(Path.profile, .get, bearer: login.accessToken).status == .ok)
            clock.advance(by: 1)
            let expired = try await client.call(Path.profile, .get, bearer: login.accessToken)
            #expect(expired.status == .unauthorized)
            #expect(expired.error?.errorCode == .invalidSession)
            let fresh = try await client.call(Path.session, bearer: login.refreshToken).decode(SessionResponse.self)
            #expect(try await client.call(Path.profile, .get, bearer: fresh.accessToken).status == .ok)
        }
    }

    @Test func anExpiredRefreshTokenIs401() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let login = try await client.signUp("bea@example.com")
            clock.advance(by: 5_184_000)
            let reply = try await client.call(Path.session, bearer: login.refreshToken)
            #expect(reply.status == .unauthorized)
            #expect(reply.error?.errorCode == .invalidSession)
        }
    }

    @Test func logOutEverywhereEndsEverySessionOfTheUserOnly() async throws {
        try await withGatehouse { _, client in
            let phone = try await client.signUp("everywhere@example.com")
            let laptop = try await client.login("everywhere@example.com").decode(LoginResponse.self)
            let someoneElse = try await client.signUp("bystander@example.com")
            let reply = try await client.call("/api/client/v2.0/auth/sessions", .delete, bearer: laptop.accessToken)
            #expect(reply.status == .noContent)
            for token in [phone.refreshToken, laptop.refreshToken] {
                #expect(try await client.call(Path.session, bearer: token).status == .unauthorized)
            }
            #expect(try await client.call(Path.profile, .get, bearer: phone.accessToken).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: someoneElse.refreshToken).status == .created)
            // The route takes an access token, not a refresh token.
            #expect(try await client.call("/api/client/v2.0/auth/sessions", .delete, bearer: someoneElse.refreshToken).status == .unauthorized)
        }
    }

    @Test func aDisabledUserIsLoggedOutAndRefusedUntilEnabled() async throws {
        try await withGatehouse { gatehouse, client in
            let login = try await client.signUp("disabled@example.com")
            try await gatehouse.setUserDisabled(appId: "test-app", userId: login.userId, disabled: true)
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .unauthorized)
            let refused = try await client.login("disabled@example.com")
            #expect(refused.status == .unauthorized)
            #expect(refused.error?.errorCode == .userDisabled)
            try await gatehouse.setUserDisabled(appId: "test-app", userId: login.userId, disabled: false)
            #expect(try await client.login("disabled@example.com").status == .ok)
            // The old session stays ended.
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .unauthorized)
            await #expect(throws: AdminError.self) { try await gatehouse.setUserDisabled(appId: "auto-app", userId: login.userId, disabled: true) }
            await #expect(throws: AdminError.self) { _ = try await gatehouse.logOutEverywhere(appId: "test-app", userId: "000000000000000000000000") }
        }
    }

    @Test func logoutRevokesThatSessionAtOnceAndOnlyThatOne() async throws {
        try await withGatehouse { _, client in
            let phone = try await client.signUp("cal@example.com")
            let laptop = try await client.login("cal@example.com").decode(LoginResponse.self)
            let logout = try await client.call(Path.session, .delete, bearer: phone.refreshToken)
            #expect(logout.status == .noContent)
            for reply in [
                try await client.call(Path.session, bearer: phone.refreshToken),
                try await client.call(Path.profile, .get, bearer: phone.accessToken),
                try await client.call(Path.session, .delete, bearer: phone.refreshToken),
            ] {
                #expect(reply.status == .unauthorized)
                #expect(reply.error?.errorCode == .invalidSession)
            }
            #expect(try await client.call(Path.session, bearer: laptop.refreshToken).status == .created)
        }
    }

    @Test func profileListsIdentitiesAndEmail() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp(" Dee@Example.com ")
            let reply = try await client.call(Path.profile, .get, bearer: login.accessToken)
            #expect(reply.status == .ok)
            #expect(reply.contentType == "application/json")
            let profile = try reply.decode(ProfileResponse.self)
            #expect(profile.userId == login.userId)
            #expect(profile.type == "normal")
            #expect(profile.data["email"] == "Dee@Example.com")
            #expect(profile.identities.count == 1)
            #expect(profile.identities[0].providerType == "local-userpass")
            #expect(Secrets.isObjectID(profile.identities[0].id))
            #expect(Secrets.isObjectID(profile.identities[0].providerId))
        }
    }

    @Test func theProfileReadsTheSessionItsUserAndEveryIdentityInOneStatement() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let login = try await client.signUp("ida@example.com")
            // Another account with identities of its own: none of them is Ida's.
            let other = try await client.signUp("joe@example.com")
            let store = gatehouse.env.store
            // A second identity, newer, with data of its own: the profile lists both, oldest first, and merges data.
            clock.advance(by: 5)
            try await store.addIdentity(IdentityRecord(
                id: Secrets.objectID(), userId: login.userId, appId: "test-app", providerType: "custom-token", externalId: "ext-1",
                data: ["name": .string("Ida")], createdAt: clock.now
            ), owner: nil)
            try await store.addIdentity(IdentityRecord(
                id: Secrets.objectID(), userId: other.userId, appId: "test-app", providerType: "custom-token", externalId: "ext-2",
                data: ["name": .string("Joe")], createdAt: clock.now
            ), owner: nil)
            let sid = try #require(try jwtPayload(login.accessToken)["sid"] as? String)
            let together = try #require(try await store.sessionWithUserAndIdentities(id: sid))
            let apart = try #require(try await store.sessionWithUser(id: sid))
            #expect(together.session == apart.session)
            #expect(together.user == apart.user)
            #expect(together.identities == (try await store.identities(userId: login.userId)))
            #expect(together.identities.map(\.providerType) == ["local-userpass", "custom-token"])
            #expect(try await store.sessionWithUserAndIdentities(id: "no-such-session") == nil)

            let profile = try await client.call(Path.profile, .get, bearer: login.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["local-userpass", "custom-token"])
            #expect(profile.data["name"] == .string("Ida"))
            #expect(profile.data["email"] == .string("ida@example.com"))

            // The profile's reads of the session, the user and the identities are one statement.
            let recording = RecordingDatabase((store as! SQLStore).db)
            var env = gatehouse.env
            env.store = SQLStore(db: recording)
            let recorded = try await SessionService(env: env).profile(login.accessToken)
            #expect(recorded.identities.map(\.providerType) == ["local-userpass", "custom-token"])
            let reads = recording.drain().filter { $0.contains("FROM sessions") || $0.contains("FROM users") || $0.contains("FROM identities") }
            #expect(reads.count == 1, "\(reads)")
        }
    }

    /// Many sessions read at once (on PostgreSQL, reads that wait for one in flight run as one statement): each
    /// read gets its own session, user and identities, a revoked session reads as revoked beside live ones, and an
    /// unknown id finds nothing — whatever else the statement carried.
    @Test func sessionsReadAtOnceEachGetTheirOwnRows() async throws {
        try await withGatehouse { gatehouse, client in
            var logins: [LoginResponse] = []
            for name in ["kai", "lea", "max"] { logins.append(try await client.signUp("\(name)@example.com")) }
            let store = gatehouse.env.store
            let sids = try logins.map { try #require(try jwtPayload($0.accessToken)["sid"] as? String) }
            try await store.revokeSession(id: sids[1], now: gatehouse.env.clock.now)
            let keys = (0..<60).map { n in n % 4 == 3 ? "no-such-session-\(n)" : sids[n % 4] }
            var expected: [(session: SessionRecord, user: UserRecord?, identities: [IdentityRecord])?] = []
            for key in keys { expected.append(try await store.sessionWithUserAndIdentities(id: key)) }
            let together = try await withThrowingTaskGroup(of: (Int, (SessionRecord, UserRecord?, [IdentityRecord])?).self) { group in
                for (n, key) in keys.enumerated() {
                    group.addTask { (n, try await store.sessionWithUserAndIdentities(id: key)) }
                }
                var found = [(SessionRecord, UserRecord?, [IdentityRecord])?](repeating: nil, count: keys.count)
                for try await (n, value) in group { found[n] = value }
                return found
            }
            for (n, key) in keys.enumerated() {
                #expect(together[n]?.0 == expected[n]?.session, "\(key)")
                #expect(together[n]?.1 == expected[n]?.user, "\(key)")
                #expect(together[n]?.2 == expected[n]?.identities, "\(key)")
                #expect(together[n]?.0.id == (key.hasPrefix("no-such") ? nil : key))
            }
            #expect(together[1]?.0.revokedAt != nil)
            #expect(together[0]?.0.revokedAt == nil)

            // The statement for several keys gives each key the rows the statement for one gives it.
            if let postgres = (store as! SQLStore).db as? GatehouseServer.PostgresDatabase {
                for read in [SQLStore.sessionWithUserRead, SQLStore.sessionWithUserAndIdentitiesRead] {
                    let all = try await postgres.read(read, keys: sids + ["no-such-session"])
                    for key in sids + ["no-such-session"] {
                        let alone = try await postgres.read(read, key: key).map(\.values)
                        #expect(all.filter { (try? $0.text("id")) == key }.map(\.values) == alone, "\(read.name) \(key)")
                    }
                }
            }
        }
    }

    @Test func deleteRemovesTheUserAndEverySession() async throws {
        try await withGatehouse { gatehouse, client in
            let login = try await client.signUp("eve@example.com")
            let other = try await client.login("eve@example.com").decode(LoginResponse.self)
            #expect(try await client.call(Path.delete, .delete, bearer: login.accessToken).status == .noContent)

            let again = try await client.login("eve@example.com")
            #expect(again.status == .unauthorized)
            #expect(again.error?.errorCode == .invalidPassword)
            #expect(try await client.call(Path.session, bearer: other.refreshToken).status == .unauthorized)
            #expect(try await client.call(Path.profile, .get, bearer: login.accessToken).status == .unauthorized)
            #expect(try await gatehouse.env.store.user(id: login.userId) == nil)
            #expect(try await gatehouse.env.store.identities(userId: login.userId).isEmpty)
            // The address is free again.
            #expect(try await client.register("eve@example.com").status == .created)
        }
    }

    @Test(arguments: [
        ("Bearer abc.def", "abc.def"), ("bearer abc", "abc"), ("BEARER \tabc \t", "abc"), ("  Bearer abc", "abc"),
        ("Bearer a b", "a b"), ("Bearer", nil), ("Bearer   ", nil), ("Bearer \t", nil), ("Bearerabc", nil), ("Basic abc", nil),
        ("Bearex abc", nil), ("", nil), ("Bearer\tabc", nil),
    ] as [(String, String?)])
    func theBearerTokenIsTheAuthorizationValueAfterItsScheme(value: String, token: String?) {
        #expect(BearerToken.parse(value) == token)
    }

    @Test func aRequestWithoutExactlyOneBearerHeaderIsRefused() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("hdr@example.com")
            func refresh(_ values: [String]) async throws -> Reply {
                var headers: HTTPFields = [.contentType: "application/json"]
                for value in values { headers.append(HTTPField(name: .authorization, value: value)) }
                return try await client.execute(uri: Path.session, method: .post, headers: headers) { response in
                    Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
                }
            }
            #expect(try await refresh(["bearer \(login.refreshToken) "]).status == .created, "the scheme in any case, blanks around")
            for values in [[], ["Basic \(login.refreshToken)"], ["Bearer \(login.refreshToken)", "Bearer \(login.refreshToken)"]] {
                let reply = try await refresh(values)
                #expect(reply.status == .unauthorized, "\(values.count) headers")
                #expect(reply.error?.errorCode == .invalidSession)
            }
        }
    }
}

/// Records which hasher operations ran.
final class SpyHasher: PasswordHasher, @unchecked Sendable {
    let base: any PasswordHasher
    private let lock = NSLock()
    private var _calls: [String] = []
    var calls: [String] { lock.withLock { _calls } }
    init(base: any PasswordHasher) { self.base = base }
    private func note(_ call: String) { lock.withLock { _calls.append(call) } }

    func hash(_ password: String, parameters: Argon2Parameters) async throws -> String {
        note("hash")
        return try await base.hash(password, parameters: parameters)
    }
    func verify(_ password: String, against hash: String, parameters: Argon2Parameters) async throws -> Bool {
        note("verify")
        return try await base.verify(password, against: hash, parameters: parameters)
    }
    func needsRehash(_ hash: String, parameters: Argon2Parameters) -> Bool { base.needsRehash(hash, parameters: parameters) }
    func burnVerify(_ password: String, parameters: Argon2Parameters) async throws {
        note("burnVerify")
        try await base.burnVerify(password, parameters: parameters)
    }
}
