import Foundation
internal import GatehouseWire

/// A user of an ``App`` on this device: logged in, logged out (tokens gone, still listed in `allUsers`), or
/// removed.
///
/// There is one `User` object per user id and app; its properties always show the current state.
public final class User: Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// Where a user stands on this device.
    public enum State: String, Sendable, Hashable {
        /// Has tokens: calls act for it.
        case loggedIn
        /// Logged out: no tokens, still in ``App/allUsers``.
        case loggedOut
        /// Removed from this device (or deleted).
        case removed
    }

    /// The user id (24 hex digits).
    public let id: String
    let core: AppCore

    init(id: String, core: AppCore) {
        self.id = id
        self.core = core
    }

    private var stored: StoredUser? { core.read { $0.user(id) } }

    /// The current access token; nil once logged out.
    public var accessToken: String? { stored?.accessToken }
    /// The refresh token; nil once logged out.
    public var refreshToken: String? { stored?.refreshToken }
    /// The device id the server gave this login.
    public var deviceId: String { stored?.deviceId ?? "000000000000000000000000" }

    /// Where the user stands on this device now.
    public var state: State {
        guard let stored else { return .removed }
        return stored.loggedIn ? .loggedIn : .loggedOut
    }

    /// ``state`` is ``State/loggedIn``.
    public var isLoggedIn: Bool { state == .loggedIn }

    /// How the user signs in, in link order.
    public var identities: [UserIdentity] {
        (stored?.identities ?? []).map { UserIdentity(providerType: $0.providerType, identifier: $0.id) }
    }

    /// Profile data from the server (`email`, `name`, …), as of the last login, link, ``refreshProfile()`` or
    /// ``confirmEmailChange(code:)``.
    public var profile: UserProfile { UserProfile(data: stored?.profileData ?? [:]) }

    /// Custom user data, from the access token's `user_data` claim. ``refreshCustomData()`` fetches it anew.
    public var customData: Document {
        guard let token = accessToken, let data = JWTClaims(token)?.userData else { return [:] }
        return data.mapValues { AnyBSON(extendedJSON: $0) }
    }

    // MARK: Session

    /// Logs out: local state is cleared first (even if the server cannot be reached), then the session is revoked on
    /// the server. Anonymous users are removed, since nobody could log in as them again. When the user store cannot
    /// save the change, the user is logged out all the same (here and on the server), and then this throws
    /// ``ClientError/storage(_:)``: the store may still hold the session, which the server no longer accepts.
    public func logOut() async throws {
        let (refreshToken, unsaved) = core.signOutLocally(id)
        if let refreshToken {
            _ = try await core.request("DELETE", "/api/client/v2.0/auth/session", bearer: refreshToken)
        }
        if let unsaved { throw unsaved }
    }

    /// Completion form of ``logOut()``, with the Realm SDK's label.
    public func logOut(completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.logOut() }
    }

    /// Completion form of ``logOut()`` without a label (earlier Gatehouse releases).
    @available(*, deprecated, renamed: "logOut(completion:)")
    @_disfavoredOverload
    public func logOut(_ completion: @escaping @Sendable ((any Error)?) -> Void) {
        logOut(completion: completion)
    }

    /// Logs out (if logged in) and forgets the user on this device. Local state goes first; a server error is still
    /// reported.
    public func remove() async throws {
        let refreshToken = try core.mutate { users -> String? in
            let token = users.user(id).flatMap { $0.loggedIn ? $0.refreshToken : nil }
            users.users.removeAll { $0.id == id }
            return token
        }
        core.events.emit(.signedOut(userId: id))
        if let refreshToken {
            _ = try await core.request("DELETE", "/api/client/v2.0/auth/session", bearer: refreshToken)
        }
    }

    /// Completion form of ``remove()``, with the Realm SDK's label.
    public func remove(completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.remove() }
    }

    /// Completion form of ``remove()`` without a label (earlier Gatehouse releases).
    @available(*, deprecated, renamed: "remove(completion:)")
    @_disfavoredOverload
    public func remove(_ completion: @escaping @Sendable ((any Error)?) -> Void) {
        remove(completion: completion)
    }

    /// Deletes the user on the server (identities, sessions and all), then forgets it locally. The server mails the
    /// account's addresses that it was deleted.
    ///
    /// Deletion cannot be undone, so the server asks for a recent proof, as for a credential change: a session signed
    /// in more than the app's `recentProofWindow` ago (five minutes by default) fails with ``AppError``
    /// `reauthenticationRequired`; call ``reauthenticate(password:)`` (or sign in again) and try again. An anonymous
    /// user that never linked anything may always delete itself.
    public func delete() async throws {
        _ = try await core.authorized("DELETE", "/api/client/v2.0/auth/delete", userId: id)
        try core.mutate { $0.users.removeAll { $0.id == self.id } }
        core.events.emit(.signedOut(userId: id))
    }

    /// Completion form of ``delete()``, with the Realm SDK's label.
    public func delete(completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.delete() }
    }

    /// Completion form of ``delete()`` without a label (earlier Gatehouse releases).
    @available(*, deprecated, renamed: "delete(completion:)")
    @_disfavoredOverload
    public func delete(_ completion: @escaping @Sendable ((any Error)?) -> Void) {
        delete(completion: completion)
    }

    /// Fetches a new access token and returns the custom user data it carries.
    @discardableResult
    public func refreshCustomData() async throws -> Document {
        _ = try await core.refresh(id)
        return customData
    }

    /// Completion form of ``refreshCustomData()`` with the data as a ``Document`` (earlier Gatehouse releases; the
    /// Realm SDK's form hands out `[AnyHashable: Any]`).
    @available(*, deprecated, message: "use refreshCustomData() async, or the completion form with [AnyHashable: Any]")
    @_disfavoredOverload
    public func refreshCustomData(_ completion: @escaping @Sendable (Result<Document, any Error>) -> Void) {
        core.complete(completion) { try await self.refreshCustomData() }
    }

    /// Fetches the profile anew from the server (a Gatehouse addition to the Realm API; Realm fetches it only at
    /// login). Refreshes the access token first when it is about to expire, and once more on a 401.
    @discardableResult
    public func refreshProfile() async throws -> UserProfile {
        let profile: ProfileResponse = try core.decode(try await core.authorized("GET", "/api/client/v2.0/auth/profile", userId: id))
        try core.mutate { users in
            users.update(id) { $0.apply(profile) }
        }
        return self.profile
    }

    /// Completion form of ``refreshProfile()``.
    public func refreshProfile(_ completion: @escaping @Sendable (Result<UserProfile, any Error>) -> Void) {
        core.complete(completion) { try await self.refreshProfile() }
    }

    /// Links another identity to this user: afterwards either credential logs in as this user.
    public func linkUser(credentials: Credentials) async throws -> User {
        if case .anonymous = credentials { throw ClientError.anonymousLink }
        let token = try await core.freshAccessToken(id)
        let session = core.read { $0.user(id)?.refreshToken }
        var body = credentials.body
        body["options"] = ["device": [:]]
        let response = try await core.request(
            "POST", "/api/client/v2.0/app/\(core.appId)/auth/providers/\(credentials.provider)/login?link=true",
            body: .object(body), bearer: token
        )
        let linked: SessionResponse = try core.decode(response)
        let profile: ProfileResponse = try core.decode(
            try await core.request("GET", "/api/client/v2.0/auth/profile", bearer: linked.accessToken)
        )
        try core.mutate { users in
            users.update(id) { user in
                // The link's access token only for the session that asked: a user that logged out meanwhile (or
                // logged in again) keeps what it has, as a refresh that ends late leaves it.
                if user.loggedIn, user.refreshToken == session { user.accessToken = linked.accessToken }
                user.apply(profile)
            }
        }
        return self
    }

    /// Completion form of ``linkUser(credentials:)``.
    public func linkUser(credentials: Credentials, _ completion: @escaping @Sendable (Result<User, any Error>) -> Void) {
        core.complete(completion) { try await self.linkUser(credentials: credentials) }
    }

    // MARK: Identity

    public static func == (lhs: User, rhs: User) -> Bool { lhs.id == rhs.id && lhs.core === rhs.core }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
    public var description: String { "User(\(id), \(state.rawValue))" }
}

/// One way a user signs in.
public struct UserIdentity: Sendable, Hashable {
    /// `local-userpass`, `anon-user`, `api-key`, …
    public let providerType: String
    /// The identity's id within its provider.
    public let identifier: String

    /// An identity of `providerType` with `identifier`.
    public init(providerType: String, identifier: String) {
        self.providerType = providerType
        self.identifier = identifier
    }
}

/// A user's profile data. The well-known fields are strings; everything is in ``metadata``.
public struct UserProfile: Sendable, Hashable {
    /// The whole profile document.
    public let metadata: Document

    init(data: [String: JSONValue]) {
        metadata = data.mapValues { AnyBSON(extendedJSON: $0) }
    }

    private func string(_ key: String) -> String? { metadata[key]??.stringValue }

    /// `name`.
    public var name: String? { string("name") }
    /// `email`.
    public var email: String? { string("email") }
    /// The picture's address as the server has it (the Realm SDK's type).
    public var pictureURL: String? { string("picture_url") }
    /// ``pictureURL`` as a `URL`, when it parses as one.
    public var pictureURLValue: URL? { pictureURL.flatMap(URL.init(string:)) }
    /// `first_name`.
    public var firstName: String? { string("first_name") }
    /// `last_name`.
    public var lastName: String? { string("last_name") }
    /// `gender`.
    public var gender: String? { string("gender") }
    /// `birthday`.
    public var birthday: String? { string("birthday") }
    /// `min_age`.
    public var minAge: String? { string("min_age") }
    /// `max_age`.
    public var maxAge: String? { string("max_age") }
}
