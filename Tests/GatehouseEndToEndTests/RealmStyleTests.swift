import Foundation
import Gatehouse
import GatehouseDomain
import GatehouseServer
import Testing

/// realm-swift's older styles, run: error patterns, custom data as `[AnyHashable: Any]`, the two-value API key callbacks.
@Suite struct RealmStyleTests {
    @Test func errorPatternsCustomDataAndTwoValueCallbacks() async throws {
        try await withLiveServer { server in
            let app = server.app()
            try await server.signUp(app, "styles@example.com")
            do {
                _ = try await app.login(credentials: .emailPassword(email: "styles@example.com", password: "wrong password"))
                Issue.record("a wrong password logged in")
            } catch AppError.invalidPassword {
                // Realm's pattern matches.
            } catch {
                Issue.record("expected AppError.invalidPassword, got \(error)")
            }
            let user = try await app.login(credentials: .emailPassword(email: "styles@example.com", password: "correct horse"))
            try await server.gatehouse.setCustomData(appId: "test-app", userId: user.id, json: #"{"plan":"pro","seats":5,"tags":["a"]}"#)
            // The values a Realm app reads out of `[AnyHashable: Any]`, taken inside the callback.
            let read: (plan: String?, seats: Int64?, tag: String?) = try await withCheckedThrowingContinuation { done in
                user.refreshCustomData { (result: Result<[AnyHashable: Any], any Error>) in
                    switch result {
                    case .success(let data):
                        let seats = (data["seats"] as? Int32).map(Int64.init) ?? data["seats"] as? Int64
                        done.resume(returning: (data["plan"] as? String, seats, (data["tags"] as? [Any])?.first as? String))
                    case .failure(let error):
                        done.resume(throwing: error)
                    }
                }
            }
            #expect(read.plan == "pro")
            #expect(read.seats == 5)
            #expect(read.tag == "a")
            #expect(user.customData["seats"]??.asInt() == 5)

            let created: (name: String?, failed: Bool) = await withCheckedContinuation { done in
                user.apiKeysAuth.createAPIKey(named: "styles-key") { key, error in done.resume(returning: (key?.name, error != nil)) }
            }
            #expect(created.name == "styles-key" && !created.failed)
            let listed: Int? = await withCheckedContinuation { done in
                user.apiKeysAuth.fetchAPIKeys { keys, _ in done.resume(returning: keys?.count) }
            }
            #expect(listed == 1)
            // An error arrives as the second value.
            let missing: Bool = await withCheckedContinuation { done in
                user.apiKeysAuth.fetchAPIKey(ObjectId()) { key, error in done.resume(returning: key == nil && error != nil) }
            }
            #expect(missing)
        }
    }

    @Test func objectIdsAndBSONValues() throws {
        let first = ObjectId(), second = ObjectId()
        #expect(first != second)
        #expect(abs(first.timestamp.timeIntervalSinceNow) < 120)
        #expect(try ObjectId(string: "000000010000000000000000") < ObjectId("000000020000000000000000"))
        #expect(throws: ObjectIdError.self) { try ObjectId(string: "not hex") }
        #expect(AnyBSON(Int32(7)).asInt64() == 7)
        #expect(AnyBSON(7).int64Value == 7)
        #expect(AnyBSON(7.5).asInt() == nil)
        #expect(AnyBSON.null.isNull)
        let document: Document = ["a": .int32(1), "b": .array([.string("x"), nil])]
        let plain = AnyBSON.document(document).foundationValue as? [String: Any]
        #expect(plain?["a"] as? Int32 == 1)
        #expect((plain?["b"] as? [Any])?.last is NSNull)
    }
}
