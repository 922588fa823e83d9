import Foundation
internal import GatehouseWire

/// A Gatehouse app: the entry point of the SDK, as `App` is in the Realm Swift SDK.
///
/// ```swift
/// let app = App(id: "gatehouse-dev", configuration: AppConfiguration(baseURL: "http://127.0.0.1:9090"))
/// let user = try await app.login(credentials: .emailPassword(email: email, password: password))
/// ```
///
/// Users and their tokens are kept in the configuration's ``UserStore``, so a new `App` with the same id knows
/// ``currentUser`` and ``allUsers`` at once, without a network call.
public final class App: Sendable {
    /// The client app id.
    public let id: String
    let core: AppCore

    /// - Parameters:
    ///   - id: the client app id (`apps[].id` in the server's configuration).
    ///   - configuration: where the server is, and how to reach it and keep users.
    public init(id: String, configuration: AppConfiguration) {
        self.id = id
        core = AppCore(appId: id, configuration: configuration)
    }

    /// An `App` for an existing core: what ``EmailPasswordAuth/app`` and ``APIKeyAuth/app`` hand back.
    init(core: AppCore) {
        id = core.appId
        self.core = core
    }

    /// As in the Realm SDK: an app for ``AppConfiguration/defaultBaseURL`` with the default configuration.
    public convenience init(id: String) {
        self.init(id: id, configuration: AppConfiguration())
    }

    /// As in the Realm SDK: nil is the default configuration (``AppConfiguration/init()``).
    @_disfavoredOverload
    public convenience init(id: String, configuration: AppConfiguration?) {
        self.init(id: id, configuration: configuration ?? AppConfiguration())
    }

    /// The Realm SDK's name for ``id``.
    public var appId: String { id }

    /// The configuration the app was made with.
    public var configuration: AppConfiguration { core.configuration }

    /// The user calls act for by default: the last one logged in or switched to.
    public var currentUser: User? {
        core.read { $0.currentUserId }.map(core.user)
    }

    /// Every user on this device that has not been removed, logged in or out, by id.
    public var allUsers: [String: User] {
        Dictionary(uniqueKeysWithValues: core.read { $0.users.map(\.id) }.map { ($0, core.user($0)) })
    }

    /// Makes `user` the current user. Only a logged-in user of this app can become current; otherwise nothing
    /// changes.
    @discardableResult
    public func `switch`(to user: User) -> User {
        let changed = core.mutateAnyway { users -> Bool in
            guard user.core === core, users.user(user.id)?.loggedIn == true, users.currentUserId != user.id else { return false }
            users.currentUserId = user.id
            return true
        }.result
        if changed { core.events.emit(.currentUserChanged(userId: user.id)) }
        return currentUser ?? user
    }

    /// Email/password registration, confirmation and reset.
    public var emailPasswordAuth: EmailPasswordAuth { EmailPasswordAuth(core: core) }

    /// Logs in and makes the user current. Anonymous credentials reuse a logged-in anonymous user.
    public func login(credentials: Credentials) async throws -> User {
        if case .anonymous = credentials,
            let anonymous = core.read({ $0.users.first { $0.loggedIn && $0.isAnonymous } })
        {
            try core.mutate { $0.currentUserId = anonymous.id }
            core.events.emit(.signedIn(userId: anonymous.id))
            return core.user(anonymous.id)
        }
        var body = credentials.body
        body["options"] = ["device": .object(Self.deviceInfo(appId: id))]
        let login: LoginResponse = try core.decode(
            try await core.request("POST", "/api/client/v2.0/app/\(id)/auth/providers/\(credentials.provider)/login", body: .object(body))
        )
        let profile: ProfileResponse = try core.decode(
            try await core.request("GET", "/api/client/v2.0/auth/profile", bearer: login.accessToken)
        )
        var user = StoredUser(
            id: login.userId,
            deviceId: login.deviceId,
            accessToken: login.accessToken,
            refreshToken: login.refreshToken,
            loggedIn: true,
            identities: [],
            profileData: [:],
            lastLogin: Date()
        )
        user.apply(profile)
        try core.mutate { users in
            users.users.removeAll { $0.id == user.id }
            users.users.append(user)
            users.currentUserId = user.id
        }
        core.events.emit(.signedIn(userId: user.id))
        return core.user(user.id)
    }

    /// Completion form of ``login(credentials:)``; `completion` runs on the configuration's callback queue.
    public func login(credentials: Credentials, _ completion: @escaping @Sendable (Result<User, any Error>) -> Void) {
        core.complete(completion) { try await self.login(credentials: credentials) }
    }

    /// `options.device` of a login: what the server keeps with the session.
    static func deviceInfo(appId: String) -> [String: JSONValue] {
        #if os(iOS)
        let platform = "iOS"
        #elseif os(macOS)
        let platform = "macOS"
        #elseif os(tvOS)
        let platform = "tvOS"
        #elseif os(watchOS)
        let platform = "watchOS"
        #elseif os(Linux)
        let platform = "Linux"
        #else
        let platform = "unknown"
        #endif
        #if arch(arm64)
        let arch = "arm64"
        #elseif arch(x86_64)
        let arch = "x86_64"
        #else
        let arch = "unknown"
        #endif
        return [
            "appId": .string(appId),
            "platform": .string(platform),
            "platformVersion": .string(ProcessInfo.processInfo.operatingSystemVersionString),
            "sdk": "Gatehouse Swift",
            "sdkVersion": .string(GatehouseSDK.version),
            "cpuArch": .string(arch),
        ]
    }
}

/// The SDK's version.
public enum GatehouseSDK {
    /// The version, as sent in every login's device information.
    public static let version = "0.1.0"
}
