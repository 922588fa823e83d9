import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct NativeEnumerationTests {
    @Test func withoutRevealAnUnknownUserPlaysAlongAndGetsNoEmail() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            _ = try await client.signUp("known@example.com")
            // Password sign-in: the unknown address is asked for a password like a known one, then fails as invalid credentials.
            for email in ["known@example.com", "ghost@example.com"] {
                let ct1 = try #require(try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": allChallengeTypes]).continuationToken)
                let challenge = try await client.nativeStep(.signInChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes])
                #expect(challenge.challengeType == .password)
                let reply = try await client.native(
                    .token,
                    ["continuation_token": try #require(challenge.continuationToken), "grant_type": "password", "username": email, "password": "wrong horse"]
                )
                expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.invalidCredentials)
            }
            // Code sign-in and reset: a "code" goes nowhere, and every code fails.
            let signIn = try #require(try await client.nativeStep(.signInInitiate, ["username": "ghost@example.com", "challenge_type": "oob redirect"]).continuationToken)
            let codeChallenge = try await client.nativeStep(.signInChallenge, ["continuation_token": signIn, "challenge_type": "oob redirect"])
            #expect(codeChallenge.challengeType == .oob)
            #expect(codeChallenge.challengeTargetLabel == "g***t@e***e.com")
            #expect(codeChallenge.codeLength == 8)
            let signInCode = try await client.native(
                .token, ["continuation_token": try #require(codeChallenge.continuationToken), "grant_type": "oob", "oob": "12345678"]
            )
            expectNativeError(signInCode, .invalidGrant, suberror: .invalidOOBValue)

            let reset = try #require(try await client.nativeStep(.resetPasswordStart, ["username": "ghost@example.com", "challenge_type": "oob redirect"]).continuationToken)
            let resetChallenge = try await client.nativeStep(.resetPasswordChallenge, ["continuation_token": reset, "challenge_type": "oob redirect"])
            #expect(resetChallenge.challengeType == .oob)
            let resetCode = try await client.native(
                .resetPasswordContinue, ["continuation_token": try #require(resetChallenge.continuationToken), "grant_type": "oob", "oob": "12345678"]
            )
            expectNativeError(resetCode, .invalidGrant, suberror: .invalidOOBValue)
            #expect(try await client.mailbox("ghost@example.com").isEmpty)
            #expect(try await gatehouse.env.store.mailbox(recipient: "ghost@example.com", limit: 10).isEmpty)
        }
    }

    @Test func withRevealUnknownUsersAreUserNotFound() async throws {
        try await withGatehouse(nativeConfiguration(reveal: true)) { _, client in
            let signIn = try await client.native(.signInInitiate, ["username": "ghost@example.com", "challenge_type": allChallengeTypes])
            expectNativeError(signIn, .userNotFound, code: NativeAuthErrorCode.userNotFound)
            let reset = try await client.native(.resetPasswordStart, ["username": "ghost@example.com", "challenge_type": "oob redirect"])
            expectNativeError(reset, .userNotFound, code: NativeAuthErrorCode.userNotFound)
            // A code-only account has no password to reset.
            _ = try await client.nativeSignUp("codes@example.com")
            let noPassword = try await client.native(.resetPasswordStart, ["username": "codes@example.com", "challenge_type": "oob redirect"])
            expectNativeError(noPassword, .invalidRequest, code: NativeAuthErrorCode.userHasNoPassword)
        }
    }
}
