import Foundation
import GatehouseDomain
import Logging

/// The operator's commands (`gatehouse users`, `gatehouse keys`, `gatehouse mail`) as an embedding program calls them
/// too. Each opens what it needs and calls ``AdminService``, which ends the sessions and writes the audit rows; here
/// the domain's refusals become ``AdminError`` messages for the operator.
extension AuthServer {
    // MARK: Users

    /// Revokes every session of a user ("log out everywhere"): their refresh tokens stop working at once, and so do
    /// their access tokens (they are checked against their session). Returns how many sessions were live.
    public func logOutEverywhere(appId: String, userId: String) async throws(AdminError) -> Int {
        try await Self.admin { try await AdminService(env: env).logOutEverywhere(appId: appId, userId: userId) }
    }

    /// Disables a user (every session ends; logins answer `UserDisabled`) or enables them again.
    public func setUserDisabled(appId: String, userId: String, disabled: Bool) async throws(AdminError) {
        try await Self.admin { try await AdminService(env: env).setUserDisabled(appId: appId, userId: userId, disabled: disabled) }
    }

    /// Replaces a user's custom user data: a JSON object of at most ``maxCustomDataSize`` bytes. It reaches the
    /// user in the `user_data` claim of their next access token (the SDK's `refreshCustomData()`).
    public func setCustomData(appId: String, userId: String, json: String) async throws(AdminError) {
        try await Self.admin { try await AdminService(env: env).setCustomData(appId: appId, userId: userId, json: json) }
    }

    /// The largest custom user data document, in bytes of JSON: it travels in every access token.
    public static let maxCustomDataSize = AdminService.maxCustomDataSize

    /// One credential of a user as `gatehouse users credentials` shows it.
    public struct CredentialInfo: Sendable, Hashable {
        /// `mailbox`, `password`, `identity` or `api-key`.
        public var kind: String
        /// The address, the identity id or the API key id.
        public var id: String
        /// The address as registered, the provider type or the key's name.
        public var label: String
        public var addedAt: Date
        /// The signed-in session that added it, and the RFC 8176 methods it had proven; nil for one that came with
        /// the account (or a reset set it).
        public var addedBySession: String?
        public var addedWith: [String]
        /// A mailbox: whether its owner proved it.
        public var proven: Bool?
    }

    /// Every credential of a user, with who added it: `gatehouse users credentials`.
    public func credentials(appId: String, userId: String) async throws(AdminError) -> [CredentialInfo] {
        try await Self.admin {
            try await AdminService(env: env).credentials(appId: appId, userId: userId).map {
                CredentialInfo(
                    kind: $0.kind.rawValue, id: $0.id, label: $0.label, addedAt: $0.addedAt, addedBySession: $0.addedBy?.session,
                    addedWith: $0.addedBy?.methods.map(\.rawValue) ?? [], proven: $0.proven
                )
            }
        }
    }

    // MARK: Outbox

    /// Emails kept as failed (a permanent refusal, or retried past their budget), newest first: `gatehouse mail
    /// failed`. Their content is not returned (it holds tokens): id, app, kind, recipient, attempts, last error, time.
    public func failedMail(appId: String? = nil, limit: Int = 100) async throws(AdminError) -> [FailedMail] {
        try await Self.admin {
            try await AdminService(env: env).failedMail(appId: appId, limit: limit).map {
                FailedMail(id: $0.id, appId: $0.appId, kind: $0.kind, recipient: $0.recipient, attempts: $0.attempts, lastError: $0.lastError, createdAt: $0.createdAt)
            }
        }
    }

    /// Sends failed emails again (`ids` nil: all of them), with a fresh retry budget: `gatehouse mail retry`.
    /// Returns how many were queued.
    public func retryFailedMail(ids: [String]?) async throws(AdminError) -> Int {
        try await Self.admin { try await AdminService(env: env).retryFailedMail(ids: ids) }
    }

    // MARK: Signing keys

    /// A signing key as `gatehouse keys list` shows it.
    public struct SigningKeyInfo: Sendable, Hashable {
        public var kid: String
        public var createdAt: Date
        public var retiredAt: Date?
        /// The newest active key: new tokens are signed with it.
        public var signing: Bool
    }

    /// Every signing key of the configured database, oldest first.
    public static func signingKeys(configuration: GatehouseConfiguration, logger: Logger = Logger(label: "gatehouse")) async throws -> [SigningKeyInfo] {
        try await withAdminService(configuration, clock: .system, logger: logger) { admin in
            try await admin.signingKeys().map { SigningKeyInfo(kid: $0.key.kid, createdAt: $0.key.createdAt, retiredAt: $0.retiredAt, signing: $0.signing) }
        }
    }

    /// `gatehouse keys rotate`: a new key that signs from now on (each running instance takes it within
    /// a minute); older keys still verify until they are retired.
    public static func rotateSigningKey(
        configuration: GatehouseConfiguration, clock: GatehouseClock = .system, logger: Logger = Logger(label: "gatehouse")
    ) async throws -> SigningKeyInfo {
        try await withAdminService(configuration, clock: clock, logger: logger) { admin in
            let record = try await admin.rotateSigningKey()
            return SigningKeyInfo(kid: record.kid, createdAt: record.createdAt, retiredAt: nil, signing: true)
        }
    }

    /// `gatehouse keys retire KID`: the key stops verifying (on every instance within a minute), so every token it
    /// signed stops working, Client API refresh tokens included (native auth refresh tokens are opaque secrets, not
    /// signed: they keep working, and the access tokens they get are signed by the current key). The last active key
    /// cannot be retired.
    public static func retireSigningKey(
        configuration: GatehouseConfiguration, kid: String, clock: GatehouseClock = .system, logger: Logger = Logger(label: "gatehouse")
    ) async throws {
        try await withAdminService(configuration, clock: clock, logger: logger) { admin in
            do {
                try await admin.retireSigningKey(kid: kid)
            } catch let refusal as AdminRefusal {
                throw AdminError(refusal.description)
            }
        }
    }

    // MARK: Plumbing

    /// Runs an admin operation, turning the domain's refusals into messages for the operator.
    private static func admin<T>(_ body: () async throws -> T) async throws(AdminError) -> T {
        do {
            return try await body()
        } catch let refusal as AdminRefusal {
            throw AdminError(refusal.description)
        } catch {
            throw AdminError("the database refused: \(error)")
        }
    }

    /// Opens the configured database (migrated) for one command, with the admin service over an environment of the
    /// command line's own: no signing keys loaded or made (a `keys rotate` on an empty database makes only its own),
    /// no password hashing warmed up, no outbound calls.
    private static func withAdminService<T: Sendable>(
        _ configuration: GatehouseConfiguration, clock: GatehouseClock, logger: Logger, _ body: (AdminService) async throws -> T
    ) async throws -> T {
        try await withMigratedDatabase(configuration, logger: logger) { database, _ in
            let store = SQLStore(db: database)
            let outbound = NoOutbound()
            let env = AuthEnvironment(
                store: store, clock: clock, hasher: Argon2PasswordHasher(), keys: SigningKeys(keys: []), configuration: configuration,
                publicURLBox: PublicURL(configuration.server.resolvedPublicURL()), logger: logger, templates: [:],
                outbound: outbound, jwks: JWKSCache(http: outbound, clock: clock), auditWriter: AuditWriter(store: store)
            )
            return try await body(AdminService(env: env))
        }
    }
}

/// The outbound HTTP of a command-line environment: its admin operations call nobody.
private struct NoOutbound: OutboundHTTP {
    func send(_ request: OutboundRequest) async throws(OutboundError) -> OutboundResponse {
        throw OutboundError("no outbound calls from an admin command")
    }
}

/// An email the outbox gave up on (``AuthServer/failedMail(appId:limit:)``).
public struct FailedMail: Sendable, Hashable {
    public var id: String
    public var appId: String
    public var kind: String
    public var recipient: String
    public var attempts: Int
    public var lastError: String?
    public var createdAt: Date
}

/// An administrative command refused, with a message for the operator.
public struct AdminError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}
