import Foundation
internal import GatehouseWire

/// A user API key, as ``APIKeyAuth`` answers it. Printing it never shows ``key``.
public struct UserAPIKey: Sendable, Hashable, Identifiable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key's id.
    public let objectId: ObjectId
    /// The name it was created with (unique among the user's keys).
    public let name: String
    /// The secret to log in with (``Credentials/userAPIKey(_:)``). Only set on the value
    /// ``APIKeyAuth/createAPIKey(named:)`` returns: the server keeps only a hash of it, so store it then.
    public let key: String?
    /// A disabled key cannot log in.
    public let disabled: Bool

    public var id: ObjectId { objectId }

    init(_ response: APIKeyResponse) throws {
        guard let id = try? ObjectId(string: response.id) else {
            throw ClientError.malformedResponse("the server answered an API key id that is not an ObjectId: \(response.id)")
        }
        objectId = id
        name = response.name
        key = response.key
        disabled = response.disabled
    }

    public var description: String {
        "UserAPIKey(\(objectId), name: \(name), disabled: \(disabled)\(key == nil ? "" : ", key: \(redacted)"))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["objectId": objectId, "name": name, "key": redacted(key), "disabled": disabled])
    }
}

/// User API keys (`user.apiKeysAuth`): create, list, fetch, enable, disable and delete the keys that log in as a
/// user, as ``Credentials/userAPIKey(_:)``.
///
/// As in the Realm SDK, every call acts for the app's **current user** (``App/currentUser``), whichever `User`
/// the value was taken from, and authenticates with that user's refresh token. An answer of 401 (the session
/// ended) logs that user out, as Realm clients do. The app needs `providers.api-key` on; otherwise calls fail
/// with ``AppError`` `authProviderNotFound`.
///
/// ```swift
/// let key = try await user.apiKeysAuth.createAPIKey(named: "build-server")
/// // key.key is shown only now: hand it to the program that will log in with it.
/// let machine = try await app.login(credentials: .userAPIKey(key.key!))
/// ```
public struct APIKeyAuth: Sendable {
    let core: AppCore

    private static let path = "/api/client/v2.0/auth/api_keys"

    /// Makes a new key for the current user. Names are 1 to 64 letters, digits, `_` or `-`; a name the user already
    /// has fails with ``AppError`` `apiKeyAlreadyExists`.
    /// - Returns: the key, with its secret in ``UserAPIKey/key`` (the only time it is shown).
    public func createAPIKey(named name: String) async throws -> UserAPIKey {
        let response = try await core.withRefreshToken("POST", Self.path, body: .object(["name": .string(name)]))
        return try UserAPIKey(core.decode(response) as APIKeyResponse)
    }

    /// Completion form of ``createAPIKey(named:)``; `completion` runs on the configuration's callback queue.
    public func createAPIKey(named name: String, completion: @escaping @Sendable (Result<UserAPIKey, any Error>) -> Void) {
        core.complete(completion) { try await self.createAPIKey(named: name) }
    }

    /// One of the current user's keys (without its secret). An id the user has no key for fails with ``AppError``
    /// `apiKeyNotFound`.
    public func fetchAPIKey(_ objectId: ObjectId) async throws -> UserAPIKey {
        let response = try await core.withRefreshToken("GET", "\(Self.path)/\(objectId.stringValue)")
        return try UserAPIKey(core.decode(response) as APIKeyResponse)
    }

    /// Completion form of ``fetchAPIKey(_:)``.
    public func fetchAPIKey(_ objectId: ObjectId, _ completion: @escaping @Sendable (Result<UserAPIKey, any Error>) -> Void) {
        core.complete(completion) { try await self.fetchAPIKey(objectId) }
    }

    /// Every key of the current user, oldest first (without secrets).
    public func fetchAPIKeys() async throws -> [UserAPIKey] {
        let response = try await core.withRefreshToken("GET", Self.path)
        return try (core.decode(response) as [APIKeyResponse]).map(UserAPIKey.init)
    }

    /// Completion form of ``fetchAPIKeys()``.
    public func fetchAPIKeys(_ completion: @escaping @Sendable (Result<[UserAPIKey], any Error>) -> Void) {
        core.complete(completion) { try await self.fetchAPIKeys() }
    }

    /// Deletes a key of the current user; the sessions logged in with it end too.
    public func deleteAPIKey(_ objectId: ObjectId) async throws {
        _ = try await core.withRefreshToken("DELETE", "\(Self.path)/\(objectId.stringValue)")
    }

    /// Completion form of ``deleteAPIKey(_:)``.
    public func deleteAPIKey(_ objectId: ObjectId, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.deleteAPIKey(objectId) }
    }

    /// Enables a disabled key of the current user (enabling an enabled key changes nothing).
    public func enableAPIKey(_ objectId: ObjectId) async throws {
        _ = try await core.withRefreshToken("PUT", "\(Self.path)/\(objectId.stringValue)/enable")
    }

    /// Completion form of ``enableAPIKey(_:)``.
    public func enableAPIKey(_ objectId: ObjectId, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.enableAPIKey(objectId) }
    }

    /// Disables a key of the current user: it cannot log in until enabled again, and the sessions logged in with it
    /// end.
    public func disableAPIKey(_ objectId: ObjectId) async throws {
        _ = try await core.withRefreshToken("PUT", "\(Self.path)/\(objectId.stringValue)/disable")
    }

    /// Completion form of ``disableAPIKey(_:)``.
    public func disableAPIKey(_ objectId: ObjectId, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.disableAPIKey(objectId) }
    }
}

extension User {
    /// The app's user API keys. Calls act for the app's current user (as in the Realm SDK), not necessarily this one.
    public var apiKeysAuth: APIKeyAuth { APIKeyAuth(core: core) }
}
