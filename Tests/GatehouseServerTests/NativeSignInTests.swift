import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct NativeSignInTests {
    @Test func signInWithAPasswordKeepsTheTokenAfterAWrongOne() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            _ = try await client.signUp("fay@example.com", "correct horse")
            let ct1 = try #require(try await client.nativeStep(.signInInitiate, ["username": "fay@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let challenge = try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes])
            #expect(challenge.challengeType == .password)
            let ct2 = try #require(challenge.continuationToken)
            let fields = ["continuation_token": ct2, "grant_type": "password", "username": "fay@example.com", "scope": "openid profile offline_access", "challenge_type": allChallengeTypes]

            var wrong = fields
            wrong["password"] = "wrong horse"
            expectNativeError(try await client.native(.token, wrong), .invalidGrant, code: NativeAuthErrorCode.invalidCredentials)
            var right = fields
            right["password"] = "correct horse"
            let reply = try await client.native(.token, right)
            #expect(reply.status == .ok)
            let tokens = try reply.decode(NativeAuthTokenResponse.self)
            #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .ok)
        }
    }

    /// Where the app reveals user existence, a pending account signs in with a code, as Entra's unverified accounts
    /// do. The code proves the mailbox: the account is confirmed, and the password its registration chose (someone
    /// who never proved the mailbox chose it) is discarded.
    @Test func signInWithACodeConfirmsAPendingAccountAndDiscardsItsPassword() async throws {
        try await withGatehouse(nativeConfiguration(reveal: true)) { gatehouse, client in
            _ = try await client.register("gil@example.com")  // Client API, not confirmed
            let ct1 = try #require(try await client.nativeStep(.signInInitiate, ["username": "gil@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let challenge = try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes])
            #expect(challenge.challengeType == .oob)
            let code = try await client.latestCode("gil@example.com")
            let reply = try await client.native(
                .token, ["continuation_token": try #require(challenge.continuationToken), "grant_type": "oob", "oob": code, "scope": "openid offline_access"]
            )
            #expect(reply.status == .ok, "\(reply.text)")
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "gil@example.com"))
            #expect(account.confirmedAt != nil && account.mailboxProvenAt != nil)
            #expect(account.passwordHash.isEmpty)
            #expect(try await client.login("gil@example.com").status == .unauthorized)
        }
    }

    @Test func aCodeOnlyAccountSignsInWithACodeEvenWhenTheClientTakesPasswordsWhereExistenceIsRevealed() async throws {
        try await withGatehouse(nativeConfiguration(reveal: true)) { _, client in
            _ = try await client.nativeSignUp("hal@example.com")
            let ct1 = try #require(try await client.nativeStep(.signInInitiate, ["username": "hal@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let challenge = try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes])
            #expect(challenge.challengeType == .oob)
            // A password client sign-in fails for it on the Client API too.
            #expect(try await client.login("hal@example.com", "").status == .unauthorized)
        }
    }
}
