import Foundation
import Logging

/// The `anon-user` provider: every login creates a new user with an `anon-user` identity and empty profile data.
/// (Clients reuse a logged-in anonymous user themselves; the server never does.)
package struct AnonymousService: Sendable {
    package let env: AuthEnvironment

    package static let providerType = "anon-user"

    package func login(appId: String) async throws -> (UserRecord, AppSettings) {
        let app = try env.app(appId)
        guard app.anonymousUsers else { throw AuthError.providerNotEnabled(Self.providerType) }
        let now = env.clock.now
        let user = UserRecord(id: Secrets.objectID(at: now), appId: app.id, createdAt: now, disabled: false, customData: [:])
        let identityId = Secrets.objectID(at: now)
        let identity = IdentityRecord(
            id: identityId, userId: user.id, appId: app.id, providerType: Self.providerType, externalId: identityId, data: [:], createdAt: now
        )
        try await env.store.createUser(user, identity: identity)
        env.logger.info("anonymous user created", metadata: ["app": "\(app.id)", "user": "\(user.id)"])
        return (user, app)
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
