import Foundation
@testable import Gatehouse
import GatehouseDomain
import GatehouseServer
import Testing

/// `user.apiKeysAuth` and `Credentials.userAPIKey` against a live server.
@Suite struct APIKeyEndToEndTests {
    @Test func createLogInListDisableEnableDelete() async throws {
        try await withLiveServer { server in
            let app = server.app()
            let owner = try await server.signedInUser(app, "keys-sdk@example.com")
            let auth = owner.apiKeysAuth
            server.clock.advance(by: 1)  // identities are listed oldest first: the key's after the email's

            let created = try await auth.createAPIKey(named: "build-server")
            #expect(created.name == "build-server")
            #expect(!created.disabled)
            let secret = try #require(created.key)
            #expect(secret.count == 64)

            // A second app (another device) logs in with the key, as the owner.
            let machine = server.app()
            let viaKey = try await machine.login(credentials: .userAPIKey(secret))
            #expect(viaKey.id == owner.id)
            #expect(viaKey.identities.map(\.providerType) == ["local-userpass", "api-key"])
            #expect(viaKey.identities.last?.identifier == created.objectId.stringValue)
            // The server-key credentials travel the same way.
            #expect(try await server.app().login(credentials: .serverAPIKey(secret)).id == owner.id)

            let listed = try await auth.fetchAPIKeys()
            #expect(listed.map(\.objectId) == [created.objectId])
            #expect(listed.allSatisfy { $0.key == nil })
            let fetched = try await auth.fetchAPIKey(created.objectId)
            #expect(fetched.name == "build-server" && fetched.key == nil && !fetched.disabled)

            try await auth.disableAPIKey(created.objectId)
            #expect(try await auth.fetchAPIKey(created.objectId).disabled)
            let refused = await #expect(throws: AppError.self) { _ = try await server.app().login(credentials: .userAPIKey(secret)) }
            #expect(refused?.code == .invalidPassword)
            #expect(refused?.message == "invalid API key")
            // Disabling ended the machine's session: its next refresh is refused and logs it out there.
            await #expect(throws: AppError.self) { try await viaKey.refreshCustomData() }
            #expect(viaKey.state == .loggedOut)

            try await auth.enableAPIKey(created.objectId)
            #expect(try await server.app().login(credentials: .userAPIKey(secret)).id == owner.id)

            let duplicate = await #expect(throws: AppError.self) { _ = try await auth.createAPIKey(named: "build-server") }
            #expect(duplicate?.code == .apiKeyAlreadyExists)
            #expect(duplicate?.httpStatus == 409)

            try await auth.deleteAPIKey(created.objectId)
            let missing = await #expect(throws: AppError.self) { _ = try await auth.fetchAPIKey(created.objectId) }
            #expect(missing?.code == .apiKeyNotFound)
            #expect(missing?.httpStatus == 404)
            #expect(try await auth.fetchAPIKeys().isEmpty)
            await #expect(throws: AppError.self) { _ = try await server.app().login(credentials: .userAPIKey(secret)) }
            // None of that logged the owner out.
            #expect(owner.state == .loggedIn)
        }
    }

    @Test func completionHandlersReportOnTheCallbackQueue() async throws {
        try await withLiveServer { server in
            let queue = DispatchQueue(label: "api-key-callbacks")
            let marker = DispatchSpecificKey<String>()
            queue.setSpecific(key: marker, value: "callbacks")
            let app = server.app(queue: queue)
            let user = try await server.signedInUser(app, "keys-callbacks@example.com")
            let auth = user.apiKeysAuth

            let (created, onQueue): (Result<UserAPIKey, any Error>, Bool) = await withCheckedContinuation { done in
                auth.createAPIKey(named: "callback") { result in
                    done.resume(returning: (result, DispatchQueue.getSpecific(key: marker) == "callbacks"))
                }
            }
            #expect(onQueue)
            let key = try created.get()
            let all: Result<[UserAPIKey], any Error> = await withCheckedContinuation { done in
                auth.fetchAPIKeys { done.resume(returning: $0) }
            }
            #expect(try all.get().map(\.objectId) == [key.objectId])
            let one: Result<UserAPIKey, any Error> = await withCheckedContinuation { done in
                auth.fetchAPIKey(key.objectId) { done.resume(returning: $0) }
            }
            #expect(try one.get().name == "callback")
            let disabled: (any Error)? = await withCheckedContinuation { done in auth.disableAPIKey(key.objectId) { done.resume(returning: $0) } }
            #expect(disabled == nil)
            let enabled: (any Error)? = await withCheckedContinuation { done in auth.enableAPIKey(key.objectId) { done.resume(returning: $0) } }
            #expect(enabled == nil)
            let deleted: (any Error)? = await withCheckedContinuation { done in auth.deleteAPIKey(key.objectId) { done.resume(returning: $0) } }
            #expect(deleted == nil)
            let again: (any Error)? = await withCheckedContinuation { done in auth.deleteAPIKey(key.objectId) { done.resume(returning: $0) } }
            #expect((again as? AppError)?.code == .apiKeyNotFound)
        }
    }

    /// As in the Realm SDK, `apiKeysAuth` acts for the app's current user, and a 401 logs that user out.
    @Test func callsActForTheCurrentUserAndA401LogsItOut() async throws {
        try await withLiveServer { server in
            let app = server.app()
            let first = try await server.signedInUser(app, "first-keys@example.com")
            let second = try await server.signedInUser(app, "second-keys@example.com")
            #expect(app.currentUser == second)
            _ = try await first.apiKeysAuth.createAPIKey(named: "whose")
            #expect(try await second.apiKeysAuth.fetchAPIKeys().map(\.name) == ["whose"])
            app.switch(to: first)
            #expect(try await second.apiKeysAuth.fetchAPIKeys().isEmpty)

            // The session ends on the server (logged out elsewhere): the next key call is a 401 and logs out here.
            let refreshToken = try #require(first.refreshToken)
            _ = try await server.app().core.request("DELETE", "/api/client/v2.0/auth/session", bearer: refreshToken)
            let error = await #expect(throws: AppError.self) { _ = try await first.apiKeysAuth.fetchAPIKeys() }
            #expect(error?.httpStatus == 401)
            #expect(first.state == .loggedOut)
            // With nobody logged in there is nothing to act for.
            try await second.logOut()
            await #expect(throws: ClientError.userNotLoggedIn) { _ = try await first.apiKeysAuth.fetchAPIKeys() }
        }
    }
}
