import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct NativeCodeTests {
    @Test func afterMaxAttemptsWrongCodesTheFlowIsDead() async throws {
        try await withGatehouse(nativeConfiguration(code: .init(maxAttempts: 3, resendInterval: 0))) { _, client in
            let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": "n@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let ct2 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
            let code = try await client.latestCode("n@example.com")
            let wrong = code == "00000000" ? "11111111" : "00000000"
            for _ in 0..<3 {
                let reply = try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": wrong])
                expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.invalidOOBValue, suberror: .invalidOOBValue)
            }
            let right = try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
            expectNativeError(right, .invalidGrant, code: NativeAuthErrorCode.tooManyAttempts)
            let resend = try await client.native(.signUpChallenge, ["continuation_token": ct2, "challenge_type": allChallengeTypes])
            expectNativeError(resend, .invalidGrant, code: NativeAuthErrorCode.tooManyAttempts)
        }
    }

    @Test func racingGuessesCannotExceedTheAttemptLimit() async throws {
        try await withGatehouse(nativeConfiguration(code: .init(maxAttempts: 2))) { gatehouse, client in
            let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": "o@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let ct2 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
            let code = try await client.latestCode("o@example.com")
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for guess in 0..<8 where String(format: "%08d", guess) != code {
                    group.addTask { try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": String(format: "%08d", guess)]) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.filter { $0.nativeError?.suberror == NativeAuthSuberror.invalidOOBValue.rawValue }.count == 2)
            let flow = try await storedFlow(gatehouse, ct2)
            #expect(flow.attempts == 2)
        }
    }

    @Test func aResendWaitsForTheIntervalAndReplacesTheCode() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(code: .init(resendInterval: 60)), clock: clock) { gatehouse, client in
            let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": "p@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let ct2 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
            let first = try await client.latestCode("p@example.com")

            clock.advance(by: 30)
            let early = try await client.native(.signUpChallenge, ["continuation_token": ct2, "challenge_type": allChallengeTypes])
            expectNativeError(early, .slowDown, code: NativeAuthErrorCode.resendTooSoon)
            #expect(early.nativeError?.retryAfter == 30)
            #expect(early.headers[.retryAfter] == "30")

            clock.advance(by: 30)
            let ct3 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct2, "challenge_type": allChallengeTypes]).continuationToken)
            let second = try await client.latestCode("p@example.com")
            #expect(try await client.mailbox("p@example.com").count == 2)
            // The resend retired the old token; the old code no longer works, the new one does.
            expectNativeError(
                try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": second]), .invalidGrant,
                code: NativeAuthErrorCode.invalidContinuationToken
            )
            if first != second {
                let old = try await client.native(.signUpContinue, ["continuation_token": ct3, "grant_type": "oob", "oob": first])
                expectNativeError(old, .invalidGrant, suberror: .invalidOOBValue)
            }
            #expect(try await client.native(.signUpContinue, ["continuation_token": ct3, "grant_type": "oob", "oob": second]).status == .ok)
            // Codes are stored hashed.
            let flow = try await storedFlow(gatehouse, ct3)
            #expect(flow.codeHash == nil)
        }
    }

    @Test func anExpiredCodeIsAnInvalidCode() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(code: .init(ttl: 120)), clock: clock) { gatehouse, client in
            let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": "q@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let ct2 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
            let code = try await client.latestCode("q@example.com")
            let flow = try await storedFlow(gatehouse, ct2)
            #expect(flow.codeHash == OneTimeCode.hash(code, flowId: flow.id))
            #expect(flow.codeHash != Array(code.utf8))
            clock.advance(by: 121)
            let reply = try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
            expectNativeError(reply, .invalidGrant, suberror: .invalidOOBValue)
            #expect(reply.nativeError?.errorDescription.contains("expired") == true)
        }
    }
}
