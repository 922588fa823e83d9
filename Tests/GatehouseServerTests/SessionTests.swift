import GatehouseArgon2
import Crypto
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import GatehouseTestSupport
import Testing

@Suite struct LoginTests {
    @Test func loginReturnsBothTokensAndObjectIds() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("quinn@example.com")
            #expect(Secrets.isObjectID(login.userId))
            #expect(Secrets.isObjectID(login.deviceId))
            #expect(login.userId == login.userId.lowercased())
            // The same credentials give the same user.
            let again = try await client.login("QUINN@example.com").decode(LoginResponse.self)
            #expect(again.userId == login.userId)
            #expect(again.deviceId != login.deviceId)
        }
    }

    @Test func wrongPasswordAndUnknownUserGetTheSameAnswer() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("rita@example.com")
            let wrong = try await client.login("rita@example.com", "wrong password")
            let unknown = try await client.login("nobody@example.com", "wrong password")
            let notAnEmail = try await client.login("nobody", "wrong password")
            for reply in [wrong, unknown, notAnEmail] {
                #expect(reply.status == .unauthorized)
                #expect(reply.error?.errorCode == .invalidPassword)
                #expect(reply.error?.error == "unauthorized")
            }
        }
    }

    /// An unknown user costs a password verification too (against a dummy hash), so the timing matches.
    @Test func unknownUsersCostAHashVerification() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.signUp("sam@example.com")
            let spy = SpyHasher(base: gatehouse.env.hasher)
            var env = gatehouse.env
            env.hasher = spy
            let service = LoginService(env: env)
            let app = try #require(env.configuration.app(id: "test-app"))
            await #expect(throws: AuthError.invalidCredentials) { try await service.prove(.emailPassword(username: "sam@example.com", password: "nope"), app: app) }
            await #expect(throws: AuthError.invalidCredentials) { try await service.prove(.emailPassword(username: "zed@example.com", password: "nope"), app: app) }
            #expect(spy.calls == ["verify", "burnVerify"])
        }
    }

    @Test func deviceOptionsAreKeptWithTheSession() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.signUp("tess@example.com")
            let body = #"{"provider":"local-userpass","username":"tess@example.com","password":"correct horse","options":{"device":{"platform":"iOS","sdkVersion":"10.54.6","extra":{"nested":true}}}}"#
            let login = try await client.call(Path.local("login"), body: body).decode(LoginResponse.self)
            let claims = try jwtPayload(login.refreshToken)
            let sid = try #require(claims["sid"] as? String)
            let session = try #require(try await gatehouse.env.store.session(id: sid))
            #expect(session.device["platform"] == "iOS")
            #expect(session.device["extra"] == ["nested": true])
            #expect(session.deviceId == login.deviceId)
        }
    }

    @Test func aChangedHashCostIsAppliedAtTheNextLogin() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-rehash-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("db.sqlite").path))
        try await withGatehouse(testConfiguration(database: url)) { _, client in
            _ = try await client.signUp("uma@example.com")
        }
        let stronger = Argon2ParametersForTests.stronger
        try await withGatehouse(testConfiguration(database: url, hash: stronger)) { gatehouse, client in
            let before = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "uma@example.com"))
            #expect(before.passwordHash.contains("m=64,t=1,p=1"))
            #expect(try await client.login("uma@example.com", "wrong password").status == .unauthorized)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "uma@example.com")?.passwordHash == before.passwordHash)
            #expect(try await client.login("uma@example.com").status == .ok)
            let after = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "uma@example.com"))
            #expect(after.passwordHash.contains("m=128,t=2,p=1"))
            #expect(try await client.login("uma@example.com").status == .ok)
        }
        await drop()
    }
}

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

/// Passwords are compared in Unicode NFC: the same characters typed as composed or decomposed code points match.
@Suite struct PasswordNormalizationTests {
    @Test func composedAndDecomposedPasswordsMatch() async throws {
        try await withGatehouse { _, client in
            let decomposed = "cafe\u{301} au lait"  // e + combining acute
            let composed = "caf\u{E9} au lait"
            #expect(decomposed.unicodeScalars.count != composed.unicodeScalars.count)
            _ = try await client.signUp("nfc@example.com", decomposed)
            #expect(try await client.login("nfc@example.com", composed).status == .ok)
            #expect(try await client.login("nfc@example.com", "cafe au lait").status == .unauthorized)
        }
    }

    @Test func aStoredHashAskingForHugeMemoryIsRefusedWithoutHashing() async throws {
        let hasher = Argon2PasswordHasher()
        let tampered = "$argon2id$v=19$m=4000000000,t=1,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA"
        #expect(try await hasher.verify("anything", against: tampered) == false)
    }
}

enum Argon2ParametersForTests {
    static let stronger = Argon2Parameters(memoryKiB: 128, iterations: 2, parallelism: 1)
}

@Suite struct TokenTests {
    @Test func bothTokensAreES256JWTsWithIntegerTimes() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let login = try await client.signUp("vera@example.com")
            for (token, kind) in [(login.accessToken, "access"), (login.refreshToken, "refresh")] {
                let parts = token.split(separator: ".", omittingEmptySubsequences: false)
                #expect(parts.count == 3)
                #expect(parts.allSatisfy { !$0.isEmpty })
                let header = try jsonSegment(parts[0])
                #expect(header["alg"] as? String == "ES256")
                #expect((header["kid"] as? String)?.isEmpty == false)

                let raw = String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self)
                // Integers, not floats: Realm clients assert on the JSON type.
                #expect(raw.firstMatch(of: /"exp":\d+[,}]/) != nil, "\(raw)")
                #expect(raw.firstMatch(of: /"iat":\d+[,}]/) != nil, "\(raw)")
                let claims = try jwtPayload(token)
                #expect(claims["sub"] as? String == login.userId)
                #expect(claims["typ"] as? String == kind)
                #expect(claims["iat"] as? Int == Int(clock.now.timeIntervalSince1970))
            }
            let access = try jwtPayload(login.accessToken)
            #expect(access["exp"] as? Int == Int(clock.now.timeIntervalSince1970) + 1800)
            #expect((access["user_data"] as? [String: Any])?.isEmpty == true)
            let refresh = try jwtPayload(login.refreshToken)
            #expect(refresh["exp"] as? Int == Int(clock.now.timeIntervalSince1970) + 5_184_000)
        }
    }

    @Test func tokensVerifyWithTheJWKS() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("wes@example.com")
            let jwks = try await client.call("/.well-known/jwks.json", .get).decode(JWKS.self)
            let parts = login.accessToken.split(separator: ".")
            let kid = try jsonSegment(parts[0])["kid"] as? String
            let jwk = try #require(jwks.keys.first { $0.kid == kid })
            #expect(jwk.kty == "EC" && jwk.crv == "P-256" && jwk.alg == "ES256")
            let x = try #require(Base64URL.decode(jwk.x))
            let y = try #require(Base64URL.decode(jwk.y))
            let key = try P256.Signing.PublicKey(x963Representation: [0x04] + x + y)
            let signatureBytes = try #require(Base64URL.decode(parts[2]))
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
            #expect(key.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
            #expect(!key.isValidSignature(signature, for: Data("\(parts[0]).e30".utf8)))
        }
    }

    @Test func tamperedAndUnsignedTokensAreRefused() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("xena@example.com")
            let parts = login.refreshToken.split(separator: ".").map(String.init)
            var claims = try jwtPayload(login.refreshToken)
            claims["sub"] = "000000000000000000000000"
            let forgedPayload = Base64URL.encode(try JSONSerialization.data(withJSONObject: claims))
            let noneHeader = Base64URL.encode(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
            for token in [
                "\(parts[0]).\(forgedPayload).\(parts[2])",
                "\(noneHeader).\(parts[1]).",
                "\(noneHeader).\(parts[1]).\(parts[2])",
                "\(parts[0]).\(parts[1])",
            ] {
                let reply = try await client.call(Path.session, bearer: token)
                #expect(reply.status == .unauthorized)
                #expect(reply.error?.errorCode == .invalidSession)
            }
        }
    }

    @Test func aTokenOfTheWrongKindIsRefused() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("yann@example.com")
            let asRefresh = try await client.call(Path.session, bearer: login.accessToken)
            #expect(asRefresh.status == .unauthorized)
            #expect(asRefresh.error?.errorCode == .invalidSession)
            let asAccess = try await client.call(Path.profile, .get, bearer: login.refreshToken)
            #expect(asAccess.status == .unauthorized)
            #expect(asAccess.error?.errorCode == .invalidSession)
        }
    }
}

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
    func verify(_ password: String, against hash: String) async throws -> Bool {
        note("verify")
        return try await base.verify(password, against: hash)
    }
    func needsRehash(_ hash: String, parameters: Argon2Parameters) -> Bool { base.needsRehash(hash, parameters: parameters) }
    func burnVerify(_ password: String, parameters: Argon2Parameters) async throws {
        note("burnVerify")
        try await base.burnVerify(password, parameters: parameters)
    }
}
