import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@Suite struct NativeContinuationTokenTests {
    /// A sign-up flow at `code_sent`: its token and code.
    private func flowAtCode(_ client: some TestClientProtocol, _ email: String) async throws -> (String, String) {
        let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": email, "challenge_type": allChallengeTypes]).continuationToken)
        let ct2 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
        return (ct2, try await client.latestCode(email))
    }

    @Test func replayedForeignAndWrongEndpointTokensAreInvalidGrant() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": "j@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            _ = try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes])
            // Replay of a token that already moved the flow on.
            let replay = try await client.native(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes])
            expectNativeError(replay, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)

            let (ct2, code) = try await flowAtCode(client, "k@example.com")
            // Another app, another endpoint, garbage.
            let otherApp = try await client.native(.signUpContinue, app: "auto-app", ["continuation_token": ct2, "grant_type": "oob", "oob": code])
            expectNativeError(otherApp, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            let otherFlow = try await client.native(.resetPasswordContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
            expectNativeError(otherFlow, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            let tokenGrant = try await client.native(.token, ["continuation_token": ct2, "grant_type": "continuation_token"])
            expectNativeError(tokenGrant, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            // The last two: another spelling of the same bytes (the last character's unused bits), and one changed secret bit.
            let middle = ct2.index(ct2.startIndex, offsetBy: 30)
            let flipped = String(ct2[..<middle]) + (ct2[middle] == "A" ? "B" : "A") + String(ct2[ct2.index(after: middle)...])
            let respelled = String(ct2.dropLast()) + String(Self.respell(ct2.last!))
            for garbage in ["x", String(repeating: "A", count: 59), respelled, flipped] {
                let reply = try await client.native(.signUpContinue, ["continuation_token": garbage, "grant_type": "oob", "oob": code])
                expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            }
            // None of that hurt the real flow.
            #expect(try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code]).status == .ok)
        }
    }

    /// Another base64url character with the same top four bits: in the last position of a 44-byte token only those
    /// carry data, so both spell the same bytes.
    static func respell(_ character: Character) -> Character {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let index = alphabet.firstIndex(of: character)!
        return alphabet[(index & ~0x3) | ((index + 1) & 0x3)]
    }

    @Test func anExpiredTokenIsExpiredToken() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { _, client in
            let (ct2, code) = try await flowAtCode(client, "l@example.com")
            clock.advance(by: 601)
            let reply = try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
            expectNativeError(reply, .expiredToken, code: NativeAuthErrorCode.expiredToken)
        }
    }

    @Test func twoRequestsRacingForOneTokenExactlyOneWins() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let (ct2, code) = try await flowAtCode(client, "m@example.com")
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<4 {
                    group.addTask { try await client.native(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code]) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.filter { $0.status == .ok }.count == 1)
            for loser in replies where loser.status != .ok {
                expectNativeError(loser, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            }
        }
    }
}
