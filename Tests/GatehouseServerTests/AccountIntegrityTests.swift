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

@Suite struct RefreshTokenFamilyTests {
    /// A thief who copied the refresh token rotates twice; the owner's copy is then two rotations behind. Presented
    /// after the reuse window it must end the session, the thief's current token with it.
    @Test func aTokenSpentTwoRotationsAgoEndsTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { gatehouse, client in
            let stolen = try #require(try await client.nativeSignedUp("family@example.com").refreshToken)
            var thief = stolen
            var thiefAccess = ""
            for _ in 0..<2 {
                let rotated = try await client.nativeRefresh(thief).decode(NativeAuthTokenResponse.self)
                thief = try #require(rotated.refreshToken)
                thiefAccess = rotated.accessToken
                clock.advance(by: 5)
            }
            clock.advance(by: 60)
            expectNativeError(try await client.nativeRefresh(stolen), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await storedSession(gatehouse, stolen).revokedAt != nil)
            expectNativeError(try await client.nativeRefresh(thief), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: thiefAccess).status == .unauthorized)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100)
            #expect(events.contains { $0.kind == AuditKind.refreshTokenReused.rawValue })
        }
    }

    /// A session id alone (every access token carries it in `sid`) with a made-up secret learns nothing about the
    /// session: not that it was revoked, nor that its user is disabled.
    @Test func aForgedSecretLearnsNothingAboutTheSession() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let tokens = try await client.nativeSignedUp("forged@example.com")
            let real = try #require(tokens.refreshToken)
            let forged = OpaqueToken(id: try #require(OpaqueToken(real)).id, secret: Secrets.randomBytes(32)).encoded
            let live = try await client.nativeRefresh(forged)
            #expect(try await client.native(.revoke, ["token": real]).status == .ok)
            let revoked = try await client.nativeRefresh(forged)
            for reply in [live, revoked] {
                expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
                #expect(reply.nativeError?.errorDescription.contains("not valid") == true, "\(reply.text)")
            }
            #expect(try await storedSession(gatehouse, real).revokedAt != nil)
        }
    }

    /// Inside the window a grandparent token is a client's late retry of a race it already won: refused, but the
    /// session lives. Any number of rotations back, after the window, it ends the session.
    @Test func aSpentTokenInsideTheWindowIsRefusedWithoutEndingTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { gatehouse, client in
            let first = try #require(try await client.nativeSignedUp("window@example.com").refreshToken)
            var tokens = [first]
            for _ in 0..<5 {
                let rotated = try await client.nativeRefresh(tokens.last!).decode(NativeAuthTokenResponse.self)
                tokens.append(try #require(rotated.refreshToken))
                clock.advance(by: 1)
            }
            expectNativeError(try await client.nativeRefresh(tokens[1]), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await storedSession(gatehouse, first).revokedAt == nil)
            #expect(try await client.nativeRefresh(tokens.last!).status == .ok)
            clock.advance(by: 120)
            expectNativeError(try await client.nativeRefresh(tokens[2]), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await storedSession(gatehouse, first).revokedAt != nil)
        }
    }
}

@Suite struct NativeRevocationTests {
    private func revoke(_ client: some TestClientProtocol, _ token: String, clientId: String = nativeClient) async throws -> Reply {
        try await client.native(.revoke, ["token": token, "client_id": clientId])
    }

    /// Signing out ends the session on the server: the refresh token and every access token of the session stop
    /// working at once, on both protocols.
    @Test func revokingARefreshTokenEndsItsSessionAtOnce() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let tokens = try await client.nativeSignedUp("revoke@example.com")
            let refresh = try #require(tokens.refreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .ok)
            let answer = try await revoke(client, refresh)
            #expect(answer.status == .ok)
            #expect(answer.contentType == "application/json")
            #expect(answer.text == "{}")
            expectNativeError(try await client.nativeRefresh(refresh), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .unauthorized)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100)
            #expect(events.contains { $0.kind == AuditKind.logout.rawValue && $0.detail["via"] == "native auth" })
            // Revoking again, or a token that never was, is still 200.
            #expect(try await revoke(client, refresh).status == .ok)
            #expect(try await revoke(client, "not-a-token").status == .ok)
        }
    }

    /// An access token revokes its own session (RFC 7009 lets a client revoke either kind).
    @Test func revokingAnAccessTokenEndsItsSession() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let tokens = try await client.nativeSignedUp("access-revoke@example.com")
            #expect(try await revoke(client, tokens.accessToken).status == .ok)
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .unauthorized)
            expectNativeError(
                try await client.nativeRefresh(try #require(tokens.refreshToken)), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken
            )
        }
    }

    /// Tokens of other sessions are untouched: a token of another app, a Client API session, a wrong secret.
    @Test func revocationOnlyEndsTheSessionOfTheTokenGiven() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let victim = try await client.nativeSignedUp("victim@example.com")
            let victimRefresh = try #require(victim.refreshToken)
            let clientAPI = try await client.signUp("realm@example.com")
            // A token with the victim's session id and a made-up secret.
            let forged = OpaqueToken(id: try #require(OpaqueToken(victimRefresh)).id, secret: Secrets.randomBytes(32)).encoded
            for token in [forged, clientAPI.refreshToken, clientAPI.accessToken] {
                #expect(try await revoke(client, token).status == .ok)
            }
            #expect(try await storedSession(gatehouse, victimRefresh).revokedAt == nil)
            #expect(try await client.call(Path.session, bearer: clientAPI.refreshToken).status == .created)
            #expect(try await client.nativeRefresh(victimRefresh).status == .ok)
            // An unknown client is refused as every native endpoint refuses it.
            expectNativeError(try await revoke(client, victimRefresh, clientId: "someone-else"), .unauthorizedClient)
        }
    }
}

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

    /// The confirmation link of the registration that set a password confirms that password, and only that one: a
    /// registration over a pending one replaces it, and the older link stops working.
    @Test func aRegistrationOverAPendingOneReplacesItAndItsLink() async throws {
        try await withGatehouse { _, client in
            #expect(try await client.register("twice@example.com", "first password").status == .created)
            let first = try await client.latestLink("twice@example.com")
            #expect(try await client.register("twice@example.com", "second password").status == .created)
            let second = try await client.latestLink("twice@example.com")
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: first.token, tokenId: first.tokenId)).status == .badRequest)
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: second.token, tokenId: second.tokenId)).status == .ok)
            #expect(try await client.login("twice@example.com", "first password").status == .unauthorized)
            #expect(try await client.login("twice@example.com", "second password").status == .ok)
        }
    }
}

/// With `revealUserExistence: false`, a known and an unknown address get the same answers.
@Suite struct ExistenceHidingTests {
    /// The parts of an answer that do not vary from call to call (nor with the address: the masked address an
    /// answer names is the caller's own).
    static func shape(_ reply: Reply) throws -> String {
        guard var object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any] else { return reply.text }
        for volatile in ["continuation_token", "trace_id", "correlation_id", "timestamp", "challenge_target_label"] where object[volatile] != nil { object[volatile] = "…" }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return "\(reply.status.code) " + String(decoding: data, as: UTF8.self)
    }

    /// The sign-in challenge depends on the app and the client, never on the account: unknown, pending, code-only
    /// and password accounts all get the same answer.
    @Test func theSignInChallengeIsTheSameForEveryAddress() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            #expect(try await client.register("pending@example.com").status == .created)
            _ = try await client.nativeSignUp("codes@example.com")
            _ = try await client.signUp("password@example.com")
            for types in [allChallengeTypes, "oob redirect", "password redirect"] {
                var shapes: [String: String] = [:]
                for email in ["nobody@example.com", "pending@example.com", "codes@example.com", "password@example.com"] {
                    let ct = try #require(try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": types]).continuationToken)
                    shapes[email] = try Self.shape(try await client.native(.signInChallenge, ["continuation_token": ct, "challenge_type": types]))
                }
                #expect(Set(shapes.values).count == 1, "\(types): \(shapes)")
            }
        }
    }

    /// A native sign-up for a taken address looks like any other to the caller; the owner gets a notice, never a
    /// code, and the flow can never complete.
    @Test func aNativeSignUpForATakenAddressTellsTheOwnerNotTheCaller() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            _ = try await client.signUp("taken@example.com", "owner password")
            var shapes: [String] = []
            var tokens: [String] = []
            for email in ["taken@example.com", "fresh@example.com"] {
                let start = try await client.native(.signUpStart, ["username": email, "challenge_type": allChallengeTypes, "password": "a new password"])
                let ct = try #require(start.step?.continuationToken)
                let challenge = try await client.native(.signUpChallenge, ["continuation_token": ct, "challenge_type": allChallengeTypes])
                shapes.append(try Self.shape(start) + " " + Self.shape(challenge))
                tokens.append(try #require(challenge.step?.continuationToken))
            }
            #expect(shapes[0] == shapes[1])
            let notice = try #require(try await client.mailbox("taken@example.com").first)
            #expect(notice.subject.contains("tried to create"))
            #expect(notice.text.firstMatch(of: /\d{8}/) == nil)
            // No code works for the taken address's flow.
            let guess = try await client.native(.signUpContinue, ["continuation_token": tokens[0], "grant_type": "oob", "oob": "12345678"])
            expectNativeError(guess, .invalidGrant, suberror: .invalidOOBValue)
            #expect(try await client.login("taken@example.com", "owner password").status == .ok)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100)
            #expect(events.contains { $0.kind == AuditKind.registrationRefused.rawValue })
        }
    }

    /// `confirm/call` and `reset/call` answer 200 for any address (the functions run after the answer), and count
    /// the same per-address limit for each: the 429 comes at the same request for an unknown, a pending and a
    /// confirmed address.
    @Test func functionRoutesAnswerAndCountAlikeForEveryAddress() async throws {
        var config = testConfiguration()
        config.apps[0].localUserpass?.confirmation = .function
        config.apps[0].localUserpass?.reset = .function
        // Nothing listens there: the calls made for known addresses after the answer fail, which the caller never sees.
        let nowhere = WebhookSettings(url: "http://127.0.0.1:9/unreachable", secret: FunctionTests.secret, timeout: 2)
        config.apps[0].localUserpass?.confirmationFunction = nowhere
        config.apps[0].localUserpass?.resetFunction = nowhere
        let clock = ManualClock()
        let limit = config.apps[0].emailLimit
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            for (email, confirmed) in [("confirmed@example.com", true), ("pending@example.com", false)] {
                let now = clock.now
                let user = UserRecord(id: Secrets.objectID(at: now), appId: "test-app", createdAt: now, disabled: false, customData: [:])
                let identity = IdentityRecord(
                    id: Secrets.objectID(at: now), userId: user.id, appId: "test-app", providerType: "local-userpass", externalId: email,
                    data: [:], createdAt: now
                )
                let account = EmailAccountRecord(
                    appId: "test-app", email: email, userId: user.id, passwordHash: "", confirmedAt: confirmed ? now : nil,
                    mailboxProvenAt: confirmed ? now : nil
                )
                try await gatehouse.env.store.createEmailUser(user: user, identity: identity, account: account, token: nil, mail: nil)
            }
            for (route, body) in [("confirm/call", #"{"email":"EMAIL"}"#), ("reset/call", #"{"email":"EMAIL","password":"a long password","arguments":[]}"#)] {
                var answers: [String: [String]] = [:]
                for email in ["nobody@example.com", "pending@example.com", "confirmed@example.com"] {
                    for _ in 0...limit {
                        let reply = try await client.call(Path.local(route), .post, body: body.replacingOccurrences(of: "EMAIL", with: email))
                        answers[email, default: []].append("\(reply.status.code) \(reply.status == .tooManyRequests ? "" : reply.text)")
                    }
                }
                #expect(Set(answers.values).count == 1, "\(route): \(answers)")
                #expect(answers["nobody@example.com"] == Array(repeating: "200 {}", count: limit) + ["429 "], "\(route)")
            }
            await gatehouse.env.background.drain()
        }
    }
}
