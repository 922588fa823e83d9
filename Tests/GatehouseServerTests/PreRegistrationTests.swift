import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// Someone registers the victim's address first, with a password of their own. Whoever then proves the mailbox
/// (a code, a reset) gets the account, and everything the registrant set is gone.
@Suite struct PreRegistrationTests {
    /// The client an app uses for code sign-in when it hides user existence (a client that takes passwords is asked
    /// for one whatever the account).
    static let codeTypes = "oob redirect"

    /// A native sign-in by code for `email`, all the way to tokens.
    static func codeSignIn(_ client: some TestClientProtocol, _ email: String, app: String = "test-app") async throws -> NativeAuthTokenResponse {
        let ct1 = try #require(try await client.nativeStep(.signInInitiate, app: app, ["username": email, "challenge_type": codeTypes]).continuationToken)
        let challenge = try await client.nativeStep(.signInChallenge, app: app, ["continuation_token": ct1, "challenge_type": codeTypes])
        #expect(challenge.challengeType == .oob)
        let reply = try await client.native(
            .token, app: app,
            [
                "continuation_token": try #require(challenge.continuationToken), "grant_type": "oob", "oob": try await client.latestCode(email),
                "scope": "openid offline_access",
            ]
        )
        #expect(reply.status == .ok, "\(reply.text)")
        return try reply.decode(NativeAuthTokenResponse.self)
    }

    /// A native password sign-in: the `/token` answer.
    static func passwordSignIn(_ client: some TestClientProtocol, _ email: String, _ password: String) async throws -> Reply {
        let ct1 = try #require(try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": allChallengeTypes]).continuationToken)
        let challenge = try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes])
        return try await client.native(
            .token,
            [
                "continuation_token": try #require(challenge.continuationToken), "grant_type": "password", "username": email,
                "password": password, "scope": "openid offline_access",
            ]
        )
    }

    @Test func aCodeSignInByTheOwnerDiscardsThePendingRegistrantsPassword() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            #expect(try await client.register("victim@example.com", "attacker password").status == .created)
            let owner = try await Self.codeSignIn(client, "victim@example.com")
            #expect(try await client.login("victim@example.com", "attacker password").status == .unauthorized)
            expectNativeError(try await Self.passwordSignIn(client, "victim@example.com", "attacker password"), .invalidGrant)
            #expect(try await client.call(Path.profile, .get, bearer: owner.accessToken).status == .ok)
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "victim@example.com"))
            #expect(account.confirmedAt != nil && account.mailboxProvenAt != nil && account.passwordHash.isEmpty)
            // The registration's confirmation link died with it.
            let link = try #require(try await client.mailbox("victim@example.com").last?.link)
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .badRequest)
        }
    }

    /// A native sign-up for an address that is only pending restarts that account: the sign-up's password works,
    /// the registrant's does not.
    @Test func aNativeSignUpOverAPendingRegistrationRestartsIt() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            #expect(try await client.register("restart@example.com", "attacker password").status == .created)
            let pending = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "restart@example.com"))
            let tokens = try await client.nativeSignedUp("restart@example.com", password: "owner password")
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .ok)
            #expect(try await client.login("restart@example.com", "attacker password").status == .unauthorized)
            #expect(try await client.login("restart@example.com", "owner password").status == .ok)
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "restart@example.com"))
            #expect(account.userId != pending.userId)
            #expect(try await gatehouse.env.store.user(id: pending.userId) == nil)
        }
    }

    /// A reset link proves the mailbox too: it confirms a pending account with the owner's new password.
    @Test func aResetOfAPendingRegistrationConfirmsItWithTheOwnersPassword() async throws {
        try await withGatehouse { _, client in
            #expect(try await client.register("reset-pending@example.com", "attacker password").status == .created)
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "reset-pending@example.com")).status == .ok)
            let link = try await client.latestLink("reset-pending@example.com")
            let reset = ResetPasswordRequest(password: "owner password", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            #expect(try await client.login("reset-pending@example.com", "attacker password").status == .unauthorized)
            #expect(try await client.login("reset-pending@example.com", "owner password").status == .ok)
        }
    }

    /// An app that confirms registrations automatically never proved the mailbox: whoever registered it could log in,
    /// make API keys, link another address of theirs. The owner's first proof ends all of it.
    @Test func theOwnersFirstProofOfAnAutomaticallyConfirmedAccountEndsEverythingTheRegistrantSet() async throws {
        var config = nativeConfiguration()
        config.apps[0].localUserpass?.confirmation = .auto
        try await withGatehouse(config) { gatehouse, client in
            #expect(try await client.register("owner@example.com", "attacker password").status == .created)
            let attacker = try await client.login("owner@example.com", "attacker password").decode(LoginResponse.self)
            let key = try await client.createKey("backdoor", refreshToken: attacker.refreshToken)
            // A second address of the attacker's, linked into the victim's user.
            #expect(try await client.register("attacker@example.com", "second password").status == .created)
            let linked = try await client.call(
                Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: "attacker@example.com", password: "second password"),
                bearer: attacker.accessToken
            )
            #expect(linked.status == .ok, "\(linked.text)")

            let owner = try await Self.codeSignIn(client, "owner@example.com")
            #expect(try await client.call(Path.session, bearer: attacker.refreshToken).status == .unauthorized)
            #expect(try await client.login("owner@example.com", "attacker password").status == .unauthorized)
            #expect(try await client.loginWithKey(try #require(key.key)).status == .unauthorized)
            #expect(try await client.login("attacker@example.com", "second password").status == .unauthorized)
            let profile = try await client.call(Path.profile, .get, bearer: owner.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["local-userpass"])
            #expect(profile.userId == attacker.userId)
            // The address linked by the attacker is free again, for whoever owns it.
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "attacker@example.com") == nil)
            // Later proofs of a proven mailbox change nothing but what they set.
            _ = try await Self.codeSignIn(client, "owner@example.com")
            #expect(try await client.call(Path.profile, .get, bearer: owner.accessToken).status == .ok)
        }
    }

    /// A registration over a pending one replaces it, and the older link stops working; since two registrations named
    /// the address, the newest link proves the mailbox and confirms neither password: the owner sets one with a reset.
    @Test func aRegistrationOverAPendingOneReplacesItAndItsLink() async throws {
        try await withGatehouse { _, client in
            #expect(try await client.register("twice@example.com", "first password").status == .created)
            let first = try await client.latestLink("twice@example.com")
            #expect(try await client.register("twice@example.com", "second password").status == .created)
            let second = try await client.latestLink("twice@example.com")
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: first.token, tokenId: first.tokenId)).status == .badRequest)
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: second.token, tokenId: second.tokenId)).status == .ok)
            #expect(try await client.login("twice@example.com", "first password").status == .unauthorized)
            #expect(try await client.login("twice@example.com", "second password").status == .unauthorized)
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "twice@example.com")).status == .ok)
            let reset = try await client.latestLink("twice@example.com")
            #expect(try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "third password", token: reset.token, tokenId: reset.tokenId)).status == .ok)
            #expect(try await client.login("twice@example.com", "third password").status == .ok)
        }
    }
}
