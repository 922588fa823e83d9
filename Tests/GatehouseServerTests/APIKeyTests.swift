import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

extension Path {
    static let apiKeys = "/api/client/v2.0/auth/api_keys"
    static func apiKey(_ id: String, _ action: String? = nil) -> String { apiKeys + "/" + id + (action.map { "/" + $0 } ?? "") }
    static func apiKeyLogin(app: String = "test-app") -> String { self.app(app) + "/auth/providers/api-key/login" }
}

extension TestClientProtocol {
    /// `POST auth/api_keys` with `name`, answered 201; the created key.
    func createKey(_ name: String, refreshToken: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> APIKeyResponse {
        let reply = try await call(Path.apiKeys, json: CreateAPIKeyRequest(name: name), bearer: refreshToken)
        #expect(reply.status == .created, "\(reply.text)", sourceLocation: sourceLocation)
        return try reply.decode(APIKeyResponse.self)
    }

    func loginWithKey(_ key: String, app: String = "test-app") async throws -> Reply {
        try await call(Path.apiKeyLogin(app: app), json: APIKeyLoginRequest(key: key, options: LoginOptions(device: ["platform": "Linux"])))
    }
}

/// The JSON object of a reply, to check which members it has.
private func object(_ reply: Reply) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any], "\(reply.text)")
}

/// The `api-key` provider: user keys over `/auth/api_keys` with a refresh token, server keys, and logins with both.
@Suite struct APIKeyTests {
    /// Turning a disabled key back on adds a way in again: like creating one, it asks for a recent proof, and the
    /// account's address hears of it. Otherwise a thief's stale session turns back on the key the owner disabled (the
    /// documented remedy for a key one did not make). Disabling asks for nothing.
    @Test func turningAKeyBackOnNeedsARecentProofAndTellsTheOwner() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let owner = try await client.signUp("keys@example.com")
            let key = try await client.createKey("planted", refreshToken: owner.refreshToken)
            let id = key.id
            clock.advance(by: 301)
            #expect(try await client.call(Path.apiKey(id, "disable"), .put, bearer: owner.refreshToken).status == .noContent)
            let before = try await client.mailbox("keys@example.com").count
            let stale = try await client.call(Path.apiKey(id, "enable"), .put, bearer: owner.refreshToken)
            #expect(stale.status == .forbidden)
            #expect(stale.error?.errorCode == .reauthenticationRequired)
            #expect(try await client.loginWithKey(try #require(key.key)).status == .unauthorized)
            #expect(try await gatehouse.env.store.apiKey(appId: "test-app", id: id)?.disabled == true)

            let fresh = try await client.login("keys@example.com").decode(LoginResponse.self)
            #expect(try await client.call(Path.apiKey(id, "enable"), .put, bearer: fresh.refreshToken).status == .noContent)
            #expect(try await client.loginWithKey(try #require(key.key)).status == .ok)
            let notice = try #require(try await client.mailbox("keys@example.com").first)
            #expect(try await client.mailbox("keys@example.com").count == before + 1)
            #expect(notice.text.contains("planted, disabled before,"), "\(notice.text)")
            // Enabling an enabled key adds nothing: no proof asked, no notice.
            clock.advance(by: 301)
            #expect(try await client.call(Path.apiKey(id, "enable"), .put, bearer: fresh.refreshToken).status == .noContent)
            #expect(try await client.mailbox("keys@example.com").count == before + 1)
        }
    }

    /// Two requests turning one disabled key back on at once both read it as off: the one whose write changes it is
    /// audited and tells the owner; the other succeeds and adds nothing (one notice, one `api_key_enabled`).
    @Test func twoEnablesOfOneKeyTellTheOwnerOnce() async throws {
        try await withGatehouse { gatehouse, client in
            let owner = try await client.signUp("keys@example.com")
            let key = try await client.createKey("twice", refreshToken: owner.refreshToken)
            #expect(try await client.call(Path.apiKey(key.id, "disable"), .put, bearer: owner.refreshToken).status == .noContent)
            let keys = APIKeyService(env: gatehouse.env)
            let read = try #require(try await gatehouse.env.store.apiKey(appId: "test-app", id: key.id))
            #expect(read.disabled)
            let before = try await client.mailbox("keys@example.com").count
            let manager = try await keys.caller(refreshToken: owner.refreshToken).manager(to: "enable a key")
            try await keys.setDisabled(manager, key: read, disabled: false)
            try await keys.setDisabled(manager, key: read, disabled: false)

            #expect(try await gatehouse.env.store.apiKey(appId: "test-app", id: key.id)?.disabled == false)
            #expect(try await client.mailbox("keys@example.com").count == before + 1)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100).map(\.kind)
            #expect(events.filter { $0 == "api_key_enabled" }.count == 1, "\(events)")
        }
    }

    @Test func createListFetchDisableEnableDelete() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("keys@example.com")
            let created = try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "build-server"), bearer: login.refreshToken)
            #expect(created.status == .created)
            #expect(created.contentType == "application/json")
            let raw = try object(created)
            #expect(Set(raw.keys) == ["_id", "key", "name", "disabled"])
            // `_id` is a plain string (Realm clients refuse {"$oid": …}); the key 64 hex digits; enabled.
            let id = try #require(raw["_id"] as? String)
            #expect(Secrets.isObjectID(id) && id == id.lowercased())
            let key = try #require(raw["key"] as? String)
            #expect(key.count == 64 && key.allSatisfy(\.isHexDigit))
            #expect(raw["name"] as? String == "build-server")
            #expect(raw["disabled"] as? Bool == false)

            // The key is shown once: neither the list nor a fetch has it.
            let listed = try await client.call(Path.apiKeys, .get, bearer: login.refreshToken)
            #expect(listed.status == .ok)
            let array = try #require(try JSONSerialization.jsonObject(with: listed.body) as? [[String: Any]])
            #expect(array.count == 1)
            #expect(Set(array[0].keys) == ["_id", "name", "disabled"])
            #expect(array[0]["_id"] as? String == id)
            let fetched = try await client.call(Path.apiKey(id), .get, bearer: login.refreshToken)
            #expect(fetched.status == .ok)
            #expect(Set(try object(fetched).keys) == ["_id", "name", "disabled"])
            #expect(try fetched.decode(APIKeyResponse.self) == APIKeyResponse(id: id, name: "build-server", disabled: false))

            #expect(try await client.call(Path.apiKey(id, "disable"), .put, bearer: login.refreshToken).status == .noContent)
            #expect(try await client.call(Path.apiKey(id), .get, bearer: login.refreshToken).decode(APIKeyResponse.self).disabled)
            // Twice is fine: enabling and disabling are idempotent.
            #expect(try await client.call(Path.apiKey(id, "disable"), .put, bearer: login.refreshToken).status == .noContent)
            #expect(try await client.call(Path.apiKey(id, "enable"), .put, bearer: login.refreshToken).status == .noContent)
            #expect(try await client.call(Path.apiKey(id, "enable"), .put, bearer: login.refreshToken).status == .noContent)
            #expect(try await client.call(Path.apiKey(id), .get, bearer: login.refreshToken).decode(APIKeyResponse.self).disabled == false)

            // Ids may come in upper case (they are hex).
            #expect(try await client.call(Path.apiKey(id.uppercased()), .get, bearer: login.refreshToken).status == .ok)

            #expect(try await client.call(Path.apiKey(id), .delete, bearer: login.refreshToken).status == .noContent)
            let gone = try await client.call(Path.apiKey(id), .get, bearer: login.refreshToken)
            #expect(gone.status == .notFound)
            #expect(gone.error?.errorCode == .apiKeyNotFound)
            #expect(gone.error?.error == "API key not found")
            #expect(try await client.call(Path.apiKey(id), .delete, bearer: login.refreshToken).error?.errorCode == .apiKeyNotFound)
            #expect(try await client.call(Path.apiKeys, .get, bearer: login.refreshToken).text == "[]")
        }
    }

    @Test func aUserKeyLogsInAsItsOwnerWithAnAPIKeyIdentity() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let owner = try await client.signUp("owner@example.com")
            // Identities are listed oldest first: the key's comes after the email's.
            clock.advance(by: 1)
            let key = try await client.createKey("laptop", refreshToken: owner.refreshToken)
            let reply = try await client.loginWithKey(try #require(key.key))
            #expect(reply.status == .ok, "\(reply.text)")
            let login = try reply.decode(LoginResponse.self)
            #expect(login.userId == owner.userId)
            #expect(login.deviceId != owner.deviceId)

            let profile = try await client.call(Path.profile, .get, bearer: login.accessToken).decode(ProfileResponse.self)
            #expect(profile.type == "normal")
            #expect(profile.identities.map(\.providerType) == ["local-userpass", "api-key"])
            #expect(profile.identities.last?.id == key.id)
            // A user key adds nothing to its owner's profile data.
            #expect(profile.data == ["email": "owner@example.com"])
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .created)

            // The Realm body shape, without options, works too.
            let bare = try await client.call(Path.apiKeyLogin(), body: #"{"provider":"api-key","key":"\#(key.key!)"}"#)
            #expect(try bare.decode(LoginResponse.self).userId == owner.userId)
        }
    }

    @Test func unknownDisabledAndDeletedKeysAreRefusedAlike() async throws {
        try await withGatehouse { _, client in
            let owner = try await client.signUp("refused@example.com")
            let key = try await client.createKey("ci", refreshToken: owner.refreshToken)
            let secret = try #require(key.key)
            let session = try await client.loginWithKey(secret).decode(LoginResponse.self)

            func expectRefused(_ reply: Reply, sourceLocation: SourceLocation = #_sourceLocation) {
                #expect(reply.status == .unauthorized, "\(reply.text)", sourceLocation: sourceLocation)
                #expect(reply.error?.errorCode == .invalidPassword, sourceLocation: sourceLocation)
                #expect(reply.error?.error == "invalid API key", sourceLocation: sourceLocation)
            }
            expectRefused(try await client.loginWithKey(String(repeating: "0", count: 64)))
            expectRefused(try await client.loginWithKey(""))
            expectRefused(try await client.loginWithKey(secret.uppercased()))

            // Disabling refuses logins and ends the sessions logged in with the key, not the owner's others.
            #expect(try await client.call(Path.apiKey(key.id, "disable"), .put, bearer: owner.refreshToken).status == .noContent)
            expectRefused(try await client.loginWithKey(secret))
            #expect(try await client.call(Path.session, bearer: session.refreshToken).status == .unauthorized)
            #expect(try await client.call(Path.profile, .get, bearer: session.accessToken).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .created)

            #expect(try await client.call(Path.apiKey(key.id, "enable"), .put, bearer: owner.refreshToken).status == .noContent)
            let again = try await client.loginWithKey(secret).decode(LoginResponse.self)
            #expect(try await client.call(Path.apiKey(key.id), .delete, bearer: owner.refreshToken).status == .noContent)
            expectRefused(try await client.loginWithKey(secret))
            #expect(try await client.call(Path.session, bearer: again.refreshToken).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .created)
            // The key's identity went with it.
            let profile = try await client.call(Path.profile, .get, bearer: owner.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["local-userpass"])
        }
    }

    @Test func keysCannotBreedKeysAndAreCapped() async throws {
        try await withGatehouse { _, client in
            let owner = try await client.signUp("breeder@example.com")
            let key = try await client.createKey("first", refreshToken: owner.refreshToken)
            let keyLogin = try await client.loginWithKey(try #require(key.key)).decode(LoginResponse.self)
            let bred = try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "second"), bearer: keyLogin.refreshToken)
            expectForbidden(bred)
            #expect(bred.error?.error.contains("logged in with an API key") == true)
            for index in 2...APIKeyService.maxKeysPerUser {
                _ = try await client.createKey("key-\(index)", refreshToken: owner.refreshToken)
            }
            let over = try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "one-too-many"), bearer: owner.refreshToken)
            #expect(over.status == .badRequest)
            #expect(over.error?.error.contains("at most \(APIKeyService.maxKeysPerUser)") == true)
        }
    }

    @Test func anotherUsersKeyIsNotFound() async throws {
        try await withGatehouse { _, client in
            let alice = try await client.signUp("alice@example.com")
            let bob = try await client.signUp("bob@example.com")
            let key = try await client.createKey("alices", refreshToken: alice.refreshToken)
            for (path, method) in [
                (Path.apiKey(key.id), HTTPRequest.Method.get), (Path.apiKey(key.id), .delete),
                (Path.apiKey(key.id, "enable"), .put), (Path.apiKey(key.id, "disable"), .put),
                (Path.apiKey("000000000000000000000000"), .get), (Path.apiKey("not-an-id"), .get),
            ] {
                let reply = try await client.call(path, method, bearer: bob.refreshToken)
                #expect(reply.status == .notFound, "\(method) \(path)")
                #expect(reply.error?.errorCode == .apiKeyNotFound, "\(method) \(path)")
            }
            #expect(try await client.call(Path.apiKeys, .get, bearer: bob.refreshToken).text == "[]")
            // Bob's attempts changed nothing.
            #expect(try await client.call(Path.apiKey(key.id), .get, bearer: alice.refreshToken).decode(APIKeyResponse.self).disabled == false)
            #expect(try await client.loginWithKey(key.key!).decode(LoginResponse.self).userId == alice.userId)
        }
    }

    @Test func aDuplicateNameIsAConflictForTheSameUserOnly() async throws {
        try await withGatehouse { _, client in
            let carol = try await client.signUp("carol@example.com")
            let dave = try await client.signUp("dave@example.com")
            _ = try await client.createKey("phone", refreshToken: carol.refreshToken)
            let duplicate = try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "phone"), bearer: carol.refreshToken)
            #expect(duplicate.status == .conflict)
            #expect(duplicate.error?.errorCode == .apiKeyAlreadyExists)
            #expect(try await client.call(Path.apiKeys, .get, bearer: carol.refreshToken).decode([APIKeyResponse].self).count == 1)
            // Names are case-sensitive, and per user.
            _ = try await client.createKey("Phone", refreshToken: carol.refreshToken)
            _ = try await client.createKey("phone", refreshToken: dave.refreshToken)
        }
    }

    @Test(arguments: [
        (nil, ClientAPIErrorCode.badRequest),
        ("not json", .badRequest),
        ("[]", .badRequest),
        ("{}", .missingParameter),
        (#"{"name":null}"#, .invalidParameter),
        (#"{"name":5}"#, .invalidParameter),
        (#"{"name":""}"#, .invalidParameter),
        (#"{"name":"%s"}"#, .invalidParameter),
        (#"{"name":"two words"}"#, .invalidParameter),
        (#"{"name":"ключ"}"#, .invalidParameter),
        ("{\"name\":\"\(String(repeating: "k", count: 65))\"}", .invalidParameter),
    ] as [(String?, ClientAPIErrorCode)])
    func badCreateBodiesAre400(body: String?, code: ClientAPIErrorCode) async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("bodies@example.com")
            let reply = try await client.call(Path.apiKeys, .post, body: body, bearer: login.refreshToken)
            #expect(reply.status == .badRequest, "\(reply.text)")
            #expect(reply.contentType == "application/json")
            #expect(reply.error?.errorCode == code, "\(reply.text)")
            #expect(try await client.call(Path.apiKeys, .get, bearer: login.refreshToken).text == "[]")
            // The longest and the most varied allowed names pass.
            _ = try await client.createKey(String(repeating: "k", count: 64), refreshToken: login.refreshToken)
            _ = try await client.createKey("Build_server-2", refreshToken: login.refreshToken)
        }
    }

    @Test func badLoginBodiesAre400() async throws {
        try await withGatehouse { _, client in
            let missing = try await client.call(Path.apiKeyLogin(), body: #"{"provider":"api-key"}"#)
            #expect(missing.status == .badRequest)
            #expect(missing.error?.errorCode == .missingParameter)
            #expect(missing.error?.error == "missing parameter 'key'")
            let wrongType = try await client.call(Path.apiKeyLogin(), body: #"{"key":42}"#)
            #expect(wrongType.error?.errorCode == .invalidParameter)
            #expect(try await client.call(Path.apiKeyLogin(), body: "{").error?.errorCode == .badRequest)
        }
    }

    @Test func theRoutesTakeTheRefreshTokenOnly() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("tokens@example.com")
            let key = try await client.createKey("mine", refreshToken: login.refreshToken)
            for bearer in [login.accessToken, nil, "garbage"] as [String?] {
                for (path, method) in [
                    (Path.apiKeys, HTTPRequest.Method.get), (Path.apiKey(key.id), .get), (Path.apiKey(key.id), .delete),
                    (Path.apiKey(key.id, "enable"), .put), (Path.apiKey(key.id, "disable"), .put),
                ] {
                    let reply = try await client.call(path, method, bearer: bearer)
                    #expect(reply.status == .unauthorized, "\(method) \(path) with \(bearer ?? "no token")")
                    #expect(reply.error?.errorCode == .invalidSession)
                }
                // Checked before the body is read: a bad body with a bad token is still a 401.
                let create = try await client.call(Path.apiKeys, .post, body: "{}", bearer: bearer)
                #expect(create.status == .unauthorized)
                #expect(create.error?.errorCode == .invalidSession)
            }
            // After logout the refresh token is refused too.
            #expect(try await client.call(Path.session, .delete, bearer: login.refreshToken).status == .noContent)
            #expect(try await client.call(Path.apiKeys, .get, bearer: login.refreshToken).status == .unauthorized)
            // Nothing changed.
            #expect(try await client.loginWithKey(key.key!).status == .ok)
        }
    }

    @Test func anAppWithoutTheProviderRefusesKeysAndKeyLogins() async throws {
        try await withGatehouse { _, client in
            #expect(try await client.register("off@example.com", app: "auto-app").status == .created)
            let login = try await client.login("off@example.com", app: "auto-app").decode(LoginResponse.self)
            let create = try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "k"), bearer: login.refreshToken)
            #expect(create.status == .notFound)
            #expect(create.error?.errorCode == .authProviderNotFound)
            #expect(try await client.call(Path.apiKeys, .get, bearer: login.refreshToken).error?.errorCode == .authProviderNotFound)
            let refused = try await client.loginWithKey(String(repeating: "a", count: 64), app: "auto-app")
            #expect(refused.status == .notFound)
            #expect(refused.error?.errorCode == .authProviderNotFound)
            #expect(refused.error?.error == "authentication via 'api-key' is unsupported")
        }
    }

    @Test func keysOfOneAppDoNotLogInToAnother() async throws {
        var configuration = testConfiguration()
        configuration.apps[1].apiKeys = true
        try await withGatehouse(configuration) { _, client in
            let owner = try await client.signUp("apps@example.com")
            let key = try await client.createKey("k", refreshToken: owner.refreshToken)
            let reply = try await client.loginWithKey(key.key!, app: "auto-app")
            #expect(reply.status == .unauthorized)
            #expect(reply.error?.error == "invalid API key")
        }
    }

    @Test func onlyTheSHA256OfTheKeyIsStored() async throws {
        try await withGatehouse { gatehouse, client in
            let login = try await client.signUp("hash@example.com")
            let key = try await client.createKey("stored", refreshToken: login.refreshToken)
            let secret = try #require(key.key)
            let record = try #require(try await gatehouse.env.store.apiKey(appId: "test-app", id: key.id))
            #expect(record.keyHash == Secrets.sha256(secret))
            #expect(record.userId == login.userId && record.name == "stored" && !record.disabled)
            // No column of the row holds the secret, in any form.
            let db = try #require(gatehouse.env.store as? SQLStore).db
            let rows = try await db.query("SELECT * FROM api_keys", [])
            #expect(rows.count == 1)
            for value in rows[0].values.values {
                switch value {
                case .text(let text): #expect(!text.lowercased().contains(secret))
                case .blob(let bytes): #expect(bytes != Array(secret.utf8) && !Secrets.hex(bytes).contains(secret))
                case .int, .null: break
                }
            }
        }
    }

    @Test func deletingTheUserDeletesTheirKeys() async throws {
        try await withGatehouse { gatehouse, client in
            let erin = try await client.signUp("erin@example.com")
            let frank = try await client.signUp("frank@example.com")
            let one = try await client.createKey("one", refreshToken: erin.refreshToken)
            _ = try await client.createKey("two", refreshToken: erin.refreshToken)
            let franks = try await client.createKey("one", refreshToken: frank.refreshToken)
            #expect(try await client.call(Path.delete, .delete, bearer: erin.accessToken).status == .noContent)
            #expect(try await gatehouse.env.store.apiKeys(appId: "test-app", userId: erin.userId).isEmpty)
            let db = try #require(gatehouse.env.store as? SQLStore).db
            let left = try await db.query("SELECT id FROM api_keys", []).map { try $0.text("id") }
            #expect(left == [franks.id])
            let identities = try await db.query("SELECT external_id FROM identities WHERE provider_type = 'api-key'", []).map { try $0.text("external_id") }
            #expect(identities == [franks.id])
            #expect(try await client.loginWithKey(one.key!).status == .unauthorized)
            #expect(try await client.loginWithKey(franks.key!).status == .ok)
        }
    }

    @Test func aServerKeyLogsInAsAServerUserOfItsOwn() async throws {
        try await withGatehouse { gatehouse, client in
            let made = try await gatehouse.createServerAPIKey(appId: "test-app", name: "backend")
            let secret = try #require(made.key)
            #expect(Secrets.isObjectID(made.id) && secret.count == 64)
            let login = try await client.loginWithKey(secret).decode(LoginResponse.self)
            #expect(login.userId == made.userId)
            let profile = try await client.call(Path.profile, .get, bearer: login.accessToken).decode(ProfileResponse.self)
            #expect(profile.type == "server")
            #expect(profile.identities.map(\.providerType) == ["api-key"])
            #expect(profile.identities.first?.id == made.id)
            #expect(profile.data == ["name": "backend"])
            // Same key, same user.
            #expect(try await client.loginWithKey(secret).decode(LoginResponse.self).userId == made.userId)

            // Listed without the secret; not among any user's keys; duplicate names refused.
            let listed = try await gatehouse.serverAPIKeys(appId: "test-app")
            #expect(listed.map(\.id) == [made.id] && listed.allSatisfy { $0.key == nil && !$0.disabled })
            let user = try await client.signUp("someone@example.com")
            #expect(try await client.call(Path.apiKey(made.id), .get, bearer: user.refreshToken).status == .notFound)
            await #expect(throws: AdminError.self) { _ = try await gatehouse.createServerAPIKey(appId: "test-app", name: "backend") }
            await #expect(throws: AdminError.self) { _ = try await gatehouse.createServerAPIKey(appId: "test-app", name: "bad name") }
            await #expect(throws: AdminError.self) { _ = try await gatehouse.createServerAPIKey(appId: "no-app", name: "x") }
            // A user key of the same name is another namespace.
            _ = try await client.createKey("backend", refreshToken: user.refreshToken)

            try await gatehouse.setServerAPIKeyDisabled(appId: "test-app", id: made.id, disabled: true)
            #expect(try await client.loginWithKey(secret).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .unauthorized)
            #expect(try await gatehouse.serverAPIKeys(appId: "test-app").first?.disabled == true)
            try await gatehouse.setServerAPIKeyDisabled(appId: "test-app", id: made.id, disabled: false)
            let again = try await client.loginWithKey(secret).decode(LoginResponse.self)

            // Deleting the key deletes its user, and so every session of it.
            try await gatehouse.deleteServerAPIKey(appId: "test-app", id: made.id)
            #expect(try await client.loginWithKey(secret).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: again.refreshToken).status == .unauthorized)
            #expect(try await gatehouse.env.store.user(id: made.userId!) == nil)
            #expect(try await gatehouse.serverAPIKeys(appId: "test-app").isEmpty)
            await #expect(throws: AdminError.self) { try await gatehouse.deleteServerAPIKey(appId: "test-app", id: made.id) }
            // A user key's id is not a server key's.
            let userKey = try await client.createKey("other", refreshToken: user.refreshToken)
            await #expect(throws: AdminError.self) { try await gatehouse.deleteServerAPIKey(appId: "test-app", id: userKey.id) }
            #expect(try await client.loginWithKey(userKey.key!).status == .ok)
        }
    }

    /// A server key's session may not delete its user (no key session may): the operator deletes the key, and its
    /// user with it, with `gatehouse apikeys delete`.
    @Test func aServerUserCannotDeleteItselfTheOperatorDeletesItsKey() async throws {
        try await withGatehouse { gatehouse, client in
            let made = try await gatehouse.createServerAPIKey(appId: "test-app", name: "self-deleting")
            let login = try await client.loginWithKey(made.key!).decode(LoginResponse.self)
            expectForbidden(try await client.call(Path.delete, .delete, bearer: login.accessToken))
            #expect(try await gatehouse.serverAPIKeys(appId: "test-app").count == 1)
            #expect(try await client.loginWithKey(made.key!).status == .ok)
            try await gatehouse.deleteServerAPIKey(appId: "test-app", id: made.id)
            #expect(try await gatehouse.env.store.user(id: made.userId!) == nil)
            #expect(try await client.loginWithKey(made.key!).status == .unauthorized)
        }
    }

    /// `gatehouse export` carries the keys (as hashes) with their users, and the sessions' keys; import restores them.
    @Test func keysMoveWithTheirUsersThroughExportAndImport() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("source.sqlite").path))
        let clock = ManualClock()
        let (owner, userKey, serverKey, keySession) = try await withGatehouseResult(source, clock: clock) { gatehouse, client in
            let owner = try await client.signUp("mover@example.com")
            let userKey = try await client.createKey("laptop", refreshToken: owner.refreshToken)
            let disabled = try await client.createKey("old", refreshToken: owner.refreshToken)
            #expect(try await client.call(Path.apiKey(disabled.id, "disable"), .put, bearer: owner.refreshToken).status == .noContent)
            let serverKey = try await gatehouse.createServerAPIKey(appId: "test-app", name: "backend")
            let keySession = try await client.loginWithKey(userKey.key!).decode(LoginResponse.self)
            return (owner, userKey, serverKey, keySession)
        }
        let lines = try await TransferTests.export(source, clock: clock, sessions: true)
        #expect(lines.contains { $0.contains(#""apiKeys":["#) && $0.contains(#""name":"laptop""#) && $0.contains(#""name":"old""#) })
        #expect(lines.contains { $0.contains(#""server":true"#) && $0.contains(#""name":"backend""#) })
        #expect(!lines.contains { $0.contains(userKey.key!) || $0.contains(serverKey.key!) })

        let (target, drop) = try await TransferTests.target(in: folder)
        let summary = try await TransferTests.importLines(lines, into: target)
        #expect(summary.users == 2)
        #expect(TransferTests.userLines(try await TransferTests.export(target, clock: clock, sessions: true)) == TransferTests.userLines(lines))
        try await withGatehouse(target, clock: clock) { gatehouse, client in
            let viaUserKey = try await client.loginWithKey(userKey.key!)
            #expect(try viaUserKey.decode(LoginResponse.self).userId == owner.userId)
            #expect(try await client.loginWithKey(serverKey.key!).decode(LoginResponse.self).userId == serverKey.userId)
            let listed = try await client.call(Path.apiKeys, .get, bearer: owner.refreshToken).decode([APIKeyResponse].self)
                .sorted { $0.name < $1.name }
            #expect(listed.map(\.name) == ["laptop", "old"] && listed.map(\.disabled) == [false, true])
            #expect(try await gatehouse.serverAPIKeys(appId: "test-app").map(\.id) == [serverKey.id])
            // The moved session still knows its key: disabling the key ends it.
            #expect(try await client.call(Path.session, bearer: keySession.refreshToken).status == .created)
            #expect(try await client.call(Path.apiKey(userKey.id, "disable"), .put, bearer: owner.refreshToken).status == .noContent)
            #expect(try await client.call(Path.session, bearer: keySession.refreshToken).status == .unauthorized)
        }
        await drop()

        // A key whose identity is missing is refused, and nothing is written.
        let (other, dropOther) = try await TransferTests.target(in: folder.appendingPathComponent("second"))
        var broken = lines
        let index = try #require(broken.firstIndex { $0.contains(#""name":"laptop""#) })
        broken[index] = broken[index].replacingOccurrences(of: #""providerType":"api-key""#, with: #""providerType":"custom-token""#)
        let error = await #expect(throws: TransferError.self) { _ = try await TransferTests.importLines(broken, into: other) }
        #expect(error?.message.contains("has no api-key identity") == true, "\(String(describing: error))")
        await dropOther()
    }

    // MARK: Configuration

    @Test func theProviderIsOffUnlessConfigured() throws {
        let loader = ConfigurationLoader(environment: [:])
        #expect(try loader.parse(yaml: "apps: [{id: a}]").apps[0].apiKeys == false)
        #expect(try loader.parse(yaml: "apps: [{id: a, providers: {api-key: {enabled: true}}}]").apps[0].apiKeys)
        #expect(try loader.parse(yaml: "apps: [{id: a, providers: {api-key: {}}}]").apps[0].apiKeys)
        #expect(try loader.parse(yaml: "apps: [{id: a, providers: {api-key: {enabled: false}}}]").apps[0].apiKeys == false)
        #expect(GatehouseConfiguration.development.apps.allSatisfy { !$0.apiKeys })
        for (yaml, key) in [
            ("apps: [{id: a, providers: {api-key: {enabled: maybe}}}]", "apps[0].providers.api-key.enabled"),
            ("apps: [{id: a, providers: {api-key: {enable: true}}}]", "apps[0].providers.api-key.enable"),
            ("apps: [{id: a, providers: {api-key: true}}]", "apps[0].providers.api-key"),
        ] {
            let error = #expect(throws: ConfigurationError.self) { try loader.parse(yaml: yaml) }
            #expect(error?.key == key, "\(String(describing: error))")
        }
    }
}
