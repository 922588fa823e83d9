// App Services auth code in the shapes of realm-swift 10.x's documentation, written fresh for Gatehouse with only
// `import RealmSwift` changed to `import Gatehouse` and the app's server given (`App(id:)` reads
// `AppConfiguration.defaultBaseURL`). It must compile; what realm-swift offers that Gatehouse does not (sync, MongoDB
// access, functions, Combine publishers) is listed in docs/migrating.md ("From realm-swift and Atlas App Services").
import Foundation
import Gatehouse

public enum RealmSamples {
    /// The app, as in realm-swift: `App(id:)` or with a configuration, in its several spellings.
    public static func makeApp(id: String, baseURL: String?) -> App {
        guard let baseURL else { return App(id: id) }
        var configuration = AppConfiguration(baseURL: baseURL, transport: nil, localAppName: nil, localAppVersion: nil)
        configuration.defaultRequestTimeoutMS = 30_000
        _ = AppConfiguration(baseURL: baseURL, transport: nil)
        _ = AppConfiguration(baseURL: nil, transport: nil, defaultRequestTimeoutMS: 10_000)
        let app = App(id: id, configuration: configuration)
        _ = app.emailPasswordAuth.app.appId
        return app
    }

    /// Register, confirm, log in, read the profile and custom data: async/await.
    public static func emailPasswordFlow(app: App, email: String, password: String, confirm: (token: String, tokenId: String)?) async throws -> User {
        let client = app.emailPasswordAuth
        try await client.registerUser(email: email, password: password)
        if let confirm {
            try await client.confirmUser(confirm.token, tokenId: confirm.tokenId)
        }
        let user = try await app.login(credentials: Credentials.emailPassword(email: email, password: password))
        print("Successfully logged in user: \(user.id), app \(app.appId)")
        _ = user.profile.email
        _ = user.identities.map(\.providerType)
        _ = user.customData["plan"]
        try await user.refreshCustomData()
        return user
    }

    /// The completion-handler forms, as realm-swift's older samples write them.
    public static func completionForms(app: App, email: String, password: String, done: @escaping @Sendable (String) -> Void) {
        app.emailPasswordAuth.registerUser(email: email, password: password) { error in
            guard error == nil else {
                done("Failed to register: \(error!.localizedDescription)")
                return
            }
            app.login(credentials: Credentials.emailPassword(email: email, password: password)) { result in
                switch result {
                case .failure(let error):
                    done("Login failed: \(error.localizedDescription)")
                case .success(let user):
                    user.logOut { error in
                        done(error == nil ? "Logged out \(user.id)" : "Logout failed")
                    }
                }
            }
        }
    }

    /// Password reset by email and by function, resending a confirmation.
    public static func recovery(app: App, email: String, reset: (token: String, tokenId: String)?) async throws {
        let client = app.emailPasswordAuth
        try await client.resendConfirmationEmail(email)
        try await client.sendResetPasswordEmail(email)
        if let reset {
            try await client.resetPassword(to: "a new password", token: reset.token, tokenId: reset.tokenId)
        }
        try? await client.callResetPasswordFunction(email: email, password: "another password", args: [])
        try? await client.retryCustomConfirmation(email)
    }

    /// Anonymous login, then linking an email/password identity; API keys; the other credentials.
    public static func linkingAndKeys(app: App, email: String, password: String) async throws -> String {
        let anonymous = try await app.login(credentials: Credentials.anonymous)
        let linked = try await anonymous.linkUser(credentials: Credentials.emailPassword(email: email, password: password))
        let key = try await linked.apiKeysAuth.createAPIKey(named: "someKeyName")
        let keys = try await linked.apiKeysAuth.fetchAPIKeys()
        try await linked.apiKeysAuth.disableAPIKey(key.objectId)
        try await linked.apiKeysAuth.enableAPIKey(key.objectId)
        _ = keys.map { ($0.name, $0.disabled) }
        let credentials: [Credentials] = [
            .userAPIKey(key.key ?? ""), .serverAPIKey("server-key"), .jwt(token: "a.jwt.token"),
            .function(payload: ["username": "someone"]), .facebook(accessToken: "t"), .googleId(token: "t"),
            .google(serverAuthCode: "c"), .apple(idToken: "t"),
        ]
        _ = credentials
        if let current = app.currentUser, app.allUsers.count > 1 { app.switch(to: current) }
        try await linked.apiKeysAuth.deleteAPIKey(key.objectId)
        try await linked.remove()
        return key.name
    }

    /// Error handling, custom data and API keys in realm-swift's older styles.
    public static func realmStyles(app: App, user: User, done: @escaping @Sendable (String) -> Void) async {
        do {
            _ = try await app.login(credentials: .emailPassword(email: "someone@example.com", password: "wrong"))
        } catch AppError.invalidPassword {
            done("invalid password")
        } catch let error as AppError where error.code == .userNotFound {
            done("no such user: \(error.localizedDescription)")
        } catch {
            done("other: \(error)")
        }
        user.refreshCustomData { result in
            switch result {
            case .success(let customData):
                done("favourite colour: \(customData["favoriteColor"] as? String ?? "none")")
            case .failure(let error):
                done("failed to refresh custom data: \(error.localizedDescription)")
            }
        }
        user.apiKeysAuth.createAPIKey(named: "someKeyName") { key, error in
            done(key.map { "created \($0.name)" } ?? "error \(String(describing: error))")
        }
        user.apiKeysAuth.fetchAPIKeys { keys, error in
            done("\(keys?.count ?? 0) keys, \(error == nil ? "no error" : "an error")")
        }
        let id = ObjectId()
        _ = id.timestamp
        user.apiKeysAuth.fetchAPIKey(ObjectId("00112233445566778899aabb")) { key, error in
            done(key?.name ?? "no key: \(String(describing: error))")
        }
        if let parsed = try? ObjectId(string: "00112233445566778899aabb") {
            user.apiKeysAuth.enableAPIKey(parsed) { error in done(error == nil ? "enabled" : "not enabled") }
        }
        do {
            _ = try await user.linkUser(credentials: .anonymous)
        } catch AppError.unknown {
            done("unknown")
        } catch {
            done("\(error)")
        }
        let login: UserCompletionBlock = { user, error in done(user?.id ?? "no user") }
        _ = (login, app.baseURL)
        for (_, each) in app.allUsers where !each.isLoggedIn { each.remove { _ in } }
        let plan = user.customData["plan"]??.stringValue
        let visits = user.customData["visits"]??.asInt() ?? 0
        let since = user.customData["since"]??.dateValue
        _ = (plan, visits, since, AnyBSON(visits), AnyBSON(Date()), user.profile.pictureURL ?? "")
        user.remove(completion: { error in done(error == nil ? "removed" : "not removed") })
    }
}
