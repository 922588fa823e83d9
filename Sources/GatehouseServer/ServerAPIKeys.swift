import Foundation
import GatehouseDomain
import GatehouseWire

/// A server API key, as `gatehouse apikeys` shows it.
public struct ServerAPIKey: Sendable, Hashable {
    /// 24 hex digits.
    public var id: String
    public var name: String
    public var disabled: Bool
    public var createdAt: Date
    /// The secret: only in the answer to ``AuthServer/createServerAPIKey(appId:name:)``. Gatehouse keeps only its
    /// SHA-256 and cannot show it again.
    public var key: String?
    /// The user a login with the key logs in as (the key's "server" user); nil where not looked up.
    public var userId: String?
}

/// Server API keys: made by the operator, not by a user. A login with one logs in as a user that exists only for
/// that key (profile `type` `server`); deleting the key deletes that user, its sessions included.
extension AuthServer {
    /// Makes a server API key in `appId`. Names are 1 to 64 letters, digits, `_` or `-`, unique among the app's
    /// server keys. Logins with it are refused while the app has `providers.api-key` off.
    public func createServerAPIKey(appId: String, name: String) async throws(AdminError) -> ServerAPIKey {
        try await admin {
            let made = try await APIKeyService(env: env).createServerKey(appId: appId, name: name)
            return ServerAPIKey(
                id: made.key.id, name: made.key.name, disabled: made.key.disabled, createdAt: made.key.createdAt, key: made.secret,
                userId: made.userId
            )
        }
    }

    /// The app's server API keys, oldest first (without secrets).
    public func serverAPIKeys(appId: String) async throws(AdminError) -> [ServerAPIKey] {
        try await admin {
            try await APIKeyService(env: env).serverKeys(appId: appId).map {
                ServerAPIKey(id: $0.id, name: $0.name, disabled: $0.disabled, createdAt: $0.createdAt, key: nil, userId: nil)
            }
        }
    }

    /// Deletes a server API key with its user and that user's sessions.
    public func deleteServerAPIKey(appId: String, id: String) async throws(AdminError) {
        try await admin {
            guard try await APIKeyService(env: env).deleteServerKey(appId: appId, id: id) else {
                throw AdminError("no server API key \(id) in app \(appId)")
            }
        }
    }

    /// Enables or disables a server API key; disabling also ends the sessions logged in with it.
    public func setServerAPIKeyDisabled(appId: String, id: String, disabled: Bool) async throws(AdminError) {
        try await admin {
            guard try await APIKeyService(env: env).setServerKeyDisabled(appId: appId, id: id, disabled: disabled) else {
                throw AdminError("no server API key \(id) in app \(appId)")
            }
        }
    }

    /// Runs an administrative operation, turning domain refusals into messages for the operator.
    private func admin<T>(_ body: () async throws -> T) async throws(AdminError) -> T {
        do {
            return try await body()
        } catch let error as AdminError {
            throw error
        } catch AuthError.appNotFound(let id) {
            throw AdminError("no app with id \(id)")
        } catch AuthError.invalidAPIKeyName(let message) {
            throw AdminError(message)
        } catch AuthError.apiKeyAlreadyExists {
            throw AdminError("the app already has a server API key of that name")
        } catch {
            throw AdminError("the database refused: \(error)")
        }
    }
}
