import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// The attacker's tests: someone who holds a leaked API key, an old refresh token, or a registration of the
/// victim's address, and who mixes both protocols. Each test is one path an outside review found into another
/// person's account; each fails on a server without the rule it names (the security model in
/// `docs/security-model.md`).
@Suite struct APIKeySessionPowerTests {
    /// A session logged in with an API key may read, but never change the account: no link, no delete, no ending
    /// other sessions, no key management. The key's holder must not be able to outlive the key.
    @Test func aKeySessionCannotChangeTheAccount() async throws {
        try await withGatehouse { gatehouse, client in
            let owner = try await client.signUp("owner@example.com")
            let key = try await client.createKey("build-server", refreshToken: owner.refreshToken)
            let spare = try await client.createKey("spare", refreshToken: owner.refreshToken)
            #expect(try await client.call(Path.apiKey(spare.id, "disable"), .put, bearer: owner.refreshToken).status == .noContent)
            let thief = try await client.loginWithKey(try #require(key.key)).decode(LoginResponse.self)

            // It can read.
            #expect(try await client.call(Path.profile, .get, bearer: thief.accessToken).status == .ok)
            #expect(try await client.call(Path.session, bearer: thief.refreshToken).status == .created)
            #expect(try await client.call(Path.apiKeys, .get, bearer: thief.refreshToken).status == .ok)

            // A fresh email/password identity of the thief's, which a link would adopt into the owner's user.
            #expect(try await client.register("thief@example.com", "thief password").status == .created)
            let link = try await client.latestLink("thief@example.com")
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
            let linked = try await client.call(
                Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: "thief@example.com", password: "thief password"),
                bearer: thief.accessToken
            )
            expectForbidden(linked)

            expectForbidden(try await client.call(Path.delete, .delete, bearer: thief.accessToken))
            expectForbidden(try await client.call("/api/client/v2.0/auth/sessions", .delete, bearer: thief.accessToken))
            expectForbidden(try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "another"), bearer: thief.refreshToken))
            expectForbidden(try await client.call(Path.apiKey(spare.id, "enable"), .put, bearer: thief.refreshToken))
            expectForbidden(try await client.call(Path.apiKey(key.id, "disable"), .put, bearer: thief.refreshToken))
            expectForbidden(try await client.call(Path.apiKey(spare.id), .delete, bearer: thief.refreshToken))

            // Nothing changed: the owner's session lives, the thief's identity is its own user, the keys are as they were.
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .created)
            let profile = try await client.call(Path.profile, .get, bearer: owner.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.filter { $0.providerType == "local-userpass" }.count == 1)
            let thiefAccount = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "thief@example.com"))
            #expect(thiefAccount.userId != profile.userId)
            let keys = try await gatehouse.env.store.apiKeys(appId: "test-app", userId: profile.userId)
            #expect(keys.count == 2)
            #expect(keys.first { $0.id == key.id }?.disabled == false)
            #expect(keys.first { $0.id == spare.id }?.disabled == true)
        }
    }

    /// A password reset ends every session of the user, those logged in with its API keys too. The keys themselves
    /// stay enabled (docs/security-model.md says why); a new login with one works.
    @Test func aPasswordResetEndsKeySessions() async throws {
        try await withGatehouse { _, client in
            let owner = try await client.signUp("reset-keys@example.com")
            let key = try await client.createKey("ci", refreshToken: owner.refreshToken)
            let keySession = try await client.loginWithKey(try #require(key.key)).decode(LoginResponse.self)
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "reset-keys@example.com")).status == .ok)
            let link = try await client.latestLink("reset-keys@example.com")
            let reset = ResetPasswordRequest(password: "a new password", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            #expect(try await client.call(Path.session, bearer: keySession.refreshToken).status == .unauthorized)
            #expect(try await client.call(Path.profile, .get, bearer: keySession.accessToken).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .unauthorized)
            #expect(try await client.loginWithKey(try #require(key.key)).status == .ok)
        }
    }
}

/// A 403 `Forbidden` in the Client API envelope: never 401, which Realm clients take for an expired token.
func expectForbidden(_ reply: Reply, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(reply.status == .forbidden, "\(reply.text)", sourceLocation: sourceLocation)
    #expect(reply.error?.errorCode == .forbidden, "\(reply.text)", sourceLocation: sourceLocation)
    #expect(reply.contentType == "application/json", sourceLocation: sourceLocation)
}
