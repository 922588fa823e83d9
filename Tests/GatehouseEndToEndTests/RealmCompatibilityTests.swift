import Foundation
import Gatehouse
import GatehouseDomain
import GatehouseServer
import Testing

/// Code written for the Realm Swift SDK compiles with only the `App` initialiser changed, and runs.
@Suite struct RealmCompatibilityTests {
    @Test func realmShapedCodeCompilesAndRuns() async throws {
        try await withLiveServer(reveal: true) { server in
            let appID = "test-app"
            let baseURL = server.base
            let email = "realm@example.com", password = "correct horse", newPassword = "new horse battery"
            let store = InMemoryUserStore()
            let queue = DispatchQueue(label: "realm-shapes")

            // The issue's snippet, verbatim but for the configuration's store and queue.
            let app = App(id: appID, configuration: AppConfiguration(baseURL: baseURL, userStore: store, callbackQueue: queue))
            let client = app.emailPasswordAuth
            try await client.registerUser(email: email, password: password)
            let registered: (any Error)? = await withCheckedContinuation { done in
                client.registerUser(email: email, password: password) { error in
                    _ = error?.localizedDescription
                    done.resume(returning: error)
                }
            }
            #expect((registered as? AppError)?.code == .accountNameInUse)
            let anonymous: Result<User, any Error> = await withCheckedContinuation { done in
                app.login(credentials: Credentials.anonymous) { result in
                    switch result { case .failure(let error): print(error.localizedDescription); case .success(let user): print(user) }
                    done.resume(returning: result)
                }
            }
            let anonymousUser = try anonymous.get()
            #expect(anonymousUser.identities.map(\.providerType) == ["anon-user"])

            let link = try await server.latestLink(email)
            try await client.confirmUser(link.token, tokenId: link.tokenId)
            let user = try await app.login(credentials: .emailPassword(email: email, password: password))
            let params: Document = ["username": "bob"]; _ = Credentials.function(payload: params)
            _ = Credentials.userAPIKey("key"); _ = Credentials.jwt(token: "t"); _ = Credentials.apple(idToken: "t")
            let args: [AnyBSON] = []
            // No reset function yet: the server says so with an error code.
            await #expect(throws: AppError.self) { try await client.callResetPasswordFunction(email: email, password: newPassword, args: args) }

            try await client.sendResetPasswordEmail(email)
            let reset = try await server.latestLink(email)
            let (token, tokenId) = reset
            try await client.resetPassword(to: newPassword, token: token, tokenId: tokenId)
            // The reset ended every session, so log in again with the new password.
            let again = try await app.login(credentials: .emailPassword(email: email, password: newPassword))
            #expect(again == user)
            try await user.refreshCustomData(); let accessToken: String = user.accessToken!
            #expect(!accessToken.isEmpty)
            if let cached = app.currentUser { print(cached.id) }
            let loggedOut: (any Error)? = await withCheckedContinuation { done in
                app.currentUser?.logOut { error in _ = error; done.resume(returning: error) }
            }
            #expect(loggedOut == nil)
            #expect(user.state == .loggedOut)
        }
    }
}

/// Completion handlers give the same results as the async forms, on the configured queue, and every server error
/// reaches the caller with its code, message, link and status.
@Suite struct CompletionAndErrorTests {
    static let queueKey = DispatchSpecificKey<String>()

    /// Runs a completion-form call and returns its outcome, checking it ran on `queue`.
    func completion<T: Sendable>(on queue: DispatchQueue, _ call: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void) async -> Result<T, any Error> {
        await withCheckedContinuation { done in
            call { result in
                #expect(DispatchQueue.getSpecific(key: Self.queueKey) == queue.label)
                done.resume(returning: result)
            }
        }
    }

    func completion(on queue: DispatchQueue, _ call: (@escaping @Sendable ((any Error)?) -> Void) -> Void) async -> (any Error)? {
        await withCheckedContinuation { done in
            call { error in
                #expect(DispatchQueue.getSpecific(key: Self.queueKey) == queue.label)
                done.resume(returning: error)
            }
        }
    }

    @Test func completionFormsMatchAsyncForms() async throws {
        try await withLiveServer(reveal: true) { server in
            let queue = DispatchQueue(label: "callbacks-\(UUID().uuidString)")
            queue.setSpecific(key: Self.queueKey, value: queue.label)
            let app = server.app(queue: queue)
            let auth = app.emailPasswordAuth

            #expect(await completion(on: queue) { auth.registerUser(email: "cb@example.com", password: "correct horse", completion: $0) } == nil)
            let viaCompletion = await completion(on: queue) { auth.registerUser(email: "cb@example.com", password: "correct horse", completion: $0) }
            let viaAsync = await #expect(throws: AppError.self) { try await auth.registerUser(email: "cb@example.com", password: "correct horse") }
            #expect((viaCompletion as? AppError) == viaAsync)

            let link = try await server.latestLink("cb@example.com")
            #expect(await completion(on: queue) { auth.confirmUser(link.token, tokenId: link.tokenId, completion: $0) } == nil)
            let asyncUser = try await app.login(credentials: .emailPassword(email: "cb@example.com", password: "correct horse"))
            let completionUser = try await completion(on: queue) { app.login(credentials: .emailPassword(email: "cb@example.com", password: "correct horse"), $0) }.get()
            #expect(completionUser == asyncUser)

            let profile = try await completion(on: queue) { asyncUser.refreshProfile($0) }.get()
            #expect(profile == (try await asyncUser.refreshProfile()))
            let data = try await completion(on: queue) { asyncUser.refreshCustomData($0) }.get()
            #expect(data == (try await asyncUser.refreshCustomData()))

            let wrongLogin = await completion(on: queue) { app.login(credentials: .emailPassword(email: "cb@example.com", password: "wrong"), $0) }
            let wrongAsync = await #expect(throws: AppError.self) { try await app.login(credentials: .emailPassword(email: "cb@example.com", password: "wrong")) }
            #expect((wrongLogin.failureValue as? AppError) == wrongAsync)

            #expect(await completion(on: queue) { asyncUser.logOut($0) } == nil)
            #expect(asyncUser.state == .loggedOut)
        }
    }

    @Test func everyErrorCodeReachesTheCallerIntact() async throws {
        try await withLiveServer(reveal: true) { server in
            let app = server.app()
            let auth = app.emailPasswordAuth
            func expectCode(_ code: AppError.Code, _ status: Int, _ message: String? = nil, _ call: () async throws -> Void) async {
                let error = await #expect(throws: AppError.self) { try await call() }
                #expect(error?.code == code)
                #expect(error?.httpStatus == status)
                #expect(error?.link?.hasSuffix("/openapi.yaml") == true)
                if let message { #expect(error?.message == message) }
            }
            try await server.signUp(app, "codes@example.com")
            await expectCode(.accountNameInUse, 409, "name already in use") { try await auth.registerUser(email: "codes@example.com", password: "correct horse") }
            await expectCode(.badRequest, 400, "email invalid") { try await auth.registerUser(email: "nope", password: "correct horse") }
            await expectCode(.badRequest, 400, "invalid token data") { try await auth.confirmUser("00", tokenId: "000000000000000000000000") }
            await expectCode(.userAlreadyConfirmed, 409) { try await auth.resendConfirmationEmail("codes@example.com") }
            await expectCode(.userNotFound, 404) { try await auth.resendConfirmationEmail("nobody@example.com") }
            await expectCode(.userNotFound, 404) { try await auth.sendResetPasswordEmail("nobody@example.com") }
            await expectCode(.invalidPassword, 401, "unauthorized") { _ = try await app.login(credentials: .emailPassword(email: "codes@example.com", password: "wrong")) }
            await expectCode(.authProviderNotFound, 404) { _ = try await app.login(credentials: .facebook(accessToken: "EAA")) }
            await expectCode(.invalidPassword, 401, "invalid custom auth token: invalid number of segments") {
                _ = try await app.login(credentials: .jwt(token: "not-a-jwt"))
            }
            await expectCode(.appNotFound, 404) { _ = try await server.app(id: "no-such-app").login(credentials: .emailPassword(email: "a@b.co", password: "x")) }
        }
    }

    @Test func anUnreachableServerIsATransportError() async throws {
        // A port nothing listens on: bind one, then close it.
        let app = App(
            id: "test-app",
            configuration: AppConfiguration(baseURL: "http://127.0.0.1:1", userStore: InMemoryUserStore(), requestTimeout: 5)
        )
        let error = await #expect(throws: ClientError.self) { try await app.emailPasswordAuth.registerUser(email: "a@b.co", password: "correct horse") }
        #expect(error?.isTransport == true)
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

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
