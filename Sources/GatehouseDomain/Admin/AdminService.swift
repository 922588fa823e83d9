import Foundation
import GatehouseWire
import Logging

/// The operator's actions on users, signing keys and the outbox (`gatehouse users`, `gatehouse keys`, `gatehouse
/// mail`, and the same calls of an embedding program): written once here, so that every admin façade ends the same
/// sessions and writes the same audit rows. Each audit row carries `by: admin` in its detail: no user did it.
package struct AdminService: Sendable {
    package let env: AuthEnvironment

    package init(env: AuthEnvironment) {
        self.env = env
    }

    /// The detail every admin audit row carries.
    package static let origin = ["by": "admin"]

    // MARK: Users

    /// Revokes every session of a user ("log out everywhere"): their refresh tokens stop working at once, and so do
    /// their access tokens (they are checked against their session). Returns how many sessions were live.
    package func logOutEverywhere(appId: String, userId: String) async throws -> Int {
        guard try await env.store.user(id: userId)?.appId == appId else { throw AdminRefusal.userNotFound(appId: appId, userId: userId) }
        let revoked = try await env.store.revokeAllSessions(userId: userId, now: env.clock.now)
        await env.audit(.logoutEverywhere, app: appId, user: userId, detail: Self.origin.merging(["sessions": "\(revoked)"]) { $1 })
        return revoked
    }

    /// Disables a user (every session ends in the same transaction; logins answer `UserDisabled`) or enables them
    /// again.
    package func setUserDisabled(appId: String, userId: String, disabled: Bool) async throws {
        guard try await env.store.setUserDisabled(appId: appId, userId: userId, disabled: disabled, now: env.clock.now) else {
            throw AdminRefusal.userNotFound(appId: appId, userId: userId)
        }
        env.logger.info(disabled ? "user disabled" : "user enabled", metadata: ["app": "\(appId)", "user": "\(userId)"])
        await env.audit(disabled ? .userDisabled : .userEnabled, app: appId, user: userId, detail: Self.origin)
    }

    /// The largest custom user data document, in bytes of JSON: it travels in every access token.
    package static let maxCustomDataSize = 16 * 1024

    /// Replaces a user's custom user data with `json`, a JSON object of at most ``maxCustomDataSize`` bytes. It
    /// reaches the user in the `user_data` claim of their next access token.
    package func setCustomData(appId: String, userId: String, json: String) async throws {
        guard env.configuration.app(id: appId) != nil else { throw AdminRefusal.appNotFound(appId) }
        guard json.utf8.count <= Self.maxCustomDataSize else { throw AdminRefusal.customDataTooLarge(bytes: json.utf8.count) }
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)) else {
            throw AdminRefusal.customDataNotAnObject
        }
        guard try await env.store.setCustomData(appId: appId, userId: userId, data: object) else {
            throw AdminRefusal.userNotFound(appId: appId, userId: userId)
        }
    }

    /// Every credential of a user (``CredentialKind``), with who added it: the admin view.
    package func credentials(appId: String, userId: String) async throws -> [Credential] {
        guard try await env.store.user(id: userId)?.appId == appId else { throw AdminRefusal.userNotFound(appId: appId, userId: userId) }
        return try await env.store.credentials(userId: userId)
    }

    // MARK: Signing keys

    /// A signing key and its state.
    package struct KeyState: Sendable, Hashable {
        package var key: SigningKeyRecord
        package var retiredAt: Date?
        /// The newest active key: new tokens are signed with it.
        package var signing: Bool
    }

    /// Every signing key, oldest first.
    package func signingKeys() async throws -> [KeyState] {
        let all = try await env.store.allSigningKeys()
        let newest = all.filter { $0.retiredAt == nil }.max { $0.key.createdAt < $1.key.createdAt }?.key.kid
        return all.map { KeyState(key: $0.key, retiredAt: $0.retiredAt, signing: $0.key.kid == newest) }
    }

    /// A new key that signs from now on (each running instance takes it within a minute); older keys still verify
    /// until they are retired.
    package func rotateSigningKey() async throws -> SigningKeyRecord {
        // The newest key signs: the new one must be newer than every other, even on a clock that stands still.
        let newest = try await env.store.allSigningKeys().map(\.key.createdAt).max() ?? .distantPast
        let record = SigningKeys.makeRecord(now: max(env.clock.now, newest.addingTimeInterval(0.001)))
        try await env.store.insertSigningKey(record)
        await env.audit(.keyRotated, app: AuthEnvironment.serverWideApp, detail: Self.origin.merging(["kid": record.kid]) { $1 })
        return record
    }

    /// The key stops verifying (on every instance within a minute), so every token it signed stops working, refresh
    /// tokens included. The last active key is never retired: the store retires it only while another active key is
    /// left, and racing retirements take turns there, so two of them cannot leave none.
    package func retireSigningKey(kid: String) async throws {
        guard try await env.store.retireSigningKey(kid: kid, at: env.clock.now) else { throw AdminRefusal.keyNotRetirable(kid) }
        await env.audit(.keyRetired, app: AuthEnvironment.serverWideApp, detail: Self.origin.merging(["kid": kid]) { $1 })
    }

    // MARK: Outbox

    /// Emails kept as failed (a permanent refusal, or retried past their budget), newest first, of `appId` when given.
    package func failedMail(appId: String?, limit: Int) async throws -> [OutboxMessage] {
        try await env.store.failedMail(appId: appId, limit: limit)
    }

    /// Sends failed emails again (`ids` nil: all of them), due now, with a fresh retry budget. Returns how many were
    /// queued.
    package func retryFailedMail(ids: [String]?) async throws -> Int {
        try await env.store.retryFailedMail(ids: ids, now: env.clock.now)
    }
}

/// An admin operation refused by a fact of the domain; its description is the operator's message.
package enum AdminRefusal: Error, Hashable, Sendable, CustomStringConvertible {
    case appNotFound(String)
    case userNotFound(appId: String, userId: String)
    case customDataTooLarge(bytes: Int)
    case customDataNotAnObject
    /// No active key of that id, or it is the last active one.
    case keyNotRetirable(String)

    package var description: String {
        switch self {
        case .appNotFound(let id): "no app with id \(id)"
        case .userNotFound(let appId, let userId): "no user \(userId) in app \(appId)"
        case .customDataTooLarge(let bytes): "custom data is \(bytes) bytes; the limit is \(AdminService.maxCustomDataSize)"
        case .customDataNotAnObject: "custom data must be a JSON object, like {\"plan\":\"pro\"}"
        case .keyNotRetirable(let kid): "no active key \(kid), or it is the last active key (rotate first)"
        }
    }
}
