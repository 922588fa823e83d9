import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct NativeResetPasswordTests {
    @Test func resetThenSignInAfterReset() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let old = try await client.signUp("ida@example.com", "correct horse")
            let ct1 = try #require(try await client.nativeStep(.resetPasswordStart, ["username": "ida@example.com", "challenge_type": "oob redirect"]).continuationToken)
            let challenge = try await client.nativeStep(.resetPasswordChallenge, ["continuation_token": ct1, "challenge_type": "oob redirect"])
            #expect(challenge.challengeType == .oob)
            #expect(challenge.challengeTargetLabel == "i***a@e***e.com")
            let ct2 = try #require(challenge.continuationToken)

            let wrong = try await client.native(.resetPasswordContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": "00000000"])
            expectNativeError(wrong, .invalidGrant, suberror: .invalidOOBValue)
            let verified = try await client.nativeStep(
                .resetPasswordContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": try await client.latestCode("ida@example.com")]
            )
            #expect(verified.expiresIn == 600)
            let ct3 = try #require(verified.continuationToken)

            let weak = try await client.native(.resetPasswordSubmit, ["continuation_token": ct3, "new_password": "x"])
            expectNativeError(weak, .invalidGrant, suberror: .passwordTooShort)
            let submitted = try await client.native(.resetPasswordSubmit, ["continuation_token": ct3, "new_password": "battery staple"])
            #expect(submitted.status == .ok)
            let submit = try submitted.decode(NativeAuthSubmitResponse.self)
            #expect(submit.pollInterval >= 1)

            let polled = try await client.native(.resetPasswordPollCompletion, ["continuation_token": submit.continuationToken])
            let poll = try polled.decode(NativeAuthPollResponse.self)
            #expect(poll.status == .succeeded)
            _ = try await client.nativeTokens(try #require(poll.continuationToken), username: "ida@example.com")

            #expect(try await client.login("ida@example.com", "correct horse").status == .unauthorized)
            #expect(try await client.login("ida@example.com", "battery staple").status == .ok)
            // Sessions from before the reset are gone.
            #expect(try await client.call(Path.session, bearer: old.refreshToken).status == .unauthorized)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ida@example.com")?.confirmedAt != nil)
        }
    }
}
