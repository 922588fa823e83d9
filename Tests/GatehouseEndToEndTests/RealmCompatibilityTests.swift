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

            // The snippet, verbatim but for the configuration's store and queue.
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
