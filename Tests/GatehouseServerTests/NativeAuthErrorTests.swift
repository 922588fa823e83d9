import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The native auth envelope and every error row of the spec's tables the server produces.
@Suite struct NativeAuthEnvelopeTests {
    @Test func appAndClientProblemsGetTheirErrors() async throws {
        var config = nativeConfiguration()
        config.apps[1].nativeAuth = nil  // auto-app: native auth off
        try await withGatehouse(config) { _, client in
            let start = ["username": "a@example.com", "challenge_type": allChallengeTypes]
            expectNativeError(try await client.native(.signUpStart, app: "no-such-app", start), .invalidRequest, code: NativeAuthErrorCode.appNotFound)
            let disabled = try await client.native(.signUpStart, app: "auto-app", start)
            expectNativeError(disabled, .invalidClient, code: NativeAuthErrorCode.nativeAuthDisabled, suberror: .nativeAuthAPIDisabled)

            var noClient = start
            noClient["client_id"] = ""
            let missing = try await client.native(.signUpStart, noClient)
            expectNativeError(missing, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
            #expect(missing.nativeError?.errorDescription.contains("client_id parameter is empty or not valid") == true)

            var otherClient = start
            otherClient["client_id"] = "android-app"
            expectNativeError(try await client.native(.signInInitiate, otherClient), .unauthorizedClient, code: NativeAuthErrorCode.unknownClient)

            for endpoint in [NativeAuthEndpoint.signUpStart, .signInInitiate, .resetPasswordStart] {
                let badName = try await client.native(endpoint, ["username": "not an email", "challenge_type": allChallengeTypes])
                expectNativeError(badName, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
                #expect(badName.nativeError?.errorDescription.contains("username parameter is empty or not valid") == true)
                let noRedirect = try await client.native(endpoint, ["username": "a@example.com", "challenge_type": "oob password"])
                expectNativeError(noRedirect, .unsupportedChallengeType, code: NativeAuthErrorCode.missingRedirectChallenge)
            }
        }
    }

    @Test func malformedRequestsAreInvalidRequestAndChangeNothing() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            func post(_ body: String, contentType: String = "application/x-www-form-urlencoded", path: String = NativeAuthEndpoint.signUpStart.path(appId: "test-app")) async throws -> Reply {
                try await client.execute(uri: path, method: .post, headers: [.contentType: contentType], body: ByteBuffer(string: body)) { response in
                    Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
                }
            }
            let json = try await post(#"{"client_id":"ios-app","username":"a@example.com"}"#, contentType: "application/json")
            expectNativeError(json, .invalidRequest)
            expectNativeError(try await post("client_id=ios-app&username=%E0%A4%A"), .invalidRequest)
            expectNativeError(try await post(""), .invalidRequest)
            expectNativeError(
                try await post("client_id=ios-app&username=a%40example.com&challenge_type=oob+redirect&attributes=%5B1%5D"), .invalidRequest
            )
            let huge = try await post("client_id=ios-app&username=" + String(repeating: "a", count: 70_000))
            expectNativeError(huge, .invalidRequest, status: .contentTooLarge)
            let unknown = try await post("client_id=ios-app", path: "/native/test-app/signup/v1.0/finish")
            expectNativeError(unknown, .invalidRequest, status: .notFound)
            let grant = try await client.native(.token, ["grant_type": "client_credentials", "client_info": "true"])
            expectNativeError(grant, .unsupportedGrantType, code: NativeAuthErrorCode.unsupportedGrantType)
            let noToken = try await client.native(.signUpChallenge, ["challenge_type": allChallengeTypes])
            expectNativeError(noToken, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
            #expect(try await gatehouse.env.store.mailbox(recipient: nil, limit: 10).isEmpty)
        }
    }

    @Test func theCorrelationIdComesBack() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let id = "7f3c6a9e-3b7a-4c61-9a55-1b2f5d2b8e11"
            let header = HTTPField.Name("client-request-id")!
            let ok = try await client.native(.signUpStart, headers: [header: id], ["username": "c@example.com", "challenge_type": allChallengeTypes])
            #expect(ok.headers[header] == id)
            let failed = try await client.native(.signUpStart, headers: [header: id], ["username": "nope", "challenge_type": allChallengeTypes])
            #expect(failed.headers[header] == id)
            #expect(failed.nativeError?.correlationId == id)
        }
    }
}

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

@Suite struct NativeRefreshTokenTests {
    private func signedIn(_ client: some TestClientProtocol, _ email: String) async throws -> NativeAuthTokenResponse {
        try await client.nativeSignedUp(email)
    }

    private func refresh(_ client: some TestClientProtocol, _ token: String) async throws -> Reply {
        try await client.nativeRefresh(token)
    }

    @Test func everyRefreshRotatesTheToken() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let first = try await signedIn(client, "r@example.com")
            let rt1 = try #require(first.refreshToken)
            let second = try await refresh(client, rt1).decode(NativeAuthTokenResponse.self)
            let rt2 = try #require(second.refreshToken)
            #expect(rt2 != rt1)
            #expect(try await client.call(Path.profile, .get, bearer: second.accessToken).status == .ok)
            let third = try await refresh(client, rt2).decode(NativeAuthTokenResponse.self)
            #expect(try #require(third.refreshToken) != rt2)
            #expect(try jwtPayload(try #require(third.idToken))["aud"] as? String == nativeClient)
        }
    }

    @Test func reuseInsideTheWindowAnswersTheSameTokenAndAfterItRevokesTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { _, client in
            let rt1 = try #require(try await signedIn(client, "s@example.com").refreshToken)
            let rotated = try await refresh(client, rt1).decode(NativeAuthTokenResponse.self)
            let rt2 = try #require(rotated.refreshToken)
            clock.advance(by: 10)
            let retried = try await refresh(client, rt1)
            #expect(retried.status == .ok)
            #expect(try retried.decode(NativeAuthTokenResponse.self).refreshToken == rt2)

            clock.advance(by: 60)
            let replayed = try await refresh(client, rt1)
            expectNativeError(replayed, .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            // The whole session is gone: the current token fails too, and so do its access tokens.
            expectNativeError(try await refresh(client, rt2), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
            #expect(try await client.call(Path.profile, .get, bearer: rotated.accessToken).status == .unauthorized)
        }
    }

    @Test func racingRefreshesRotateOnceAndAgree() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let rt1 = try #require(try await signedIn(client, "t@example.com").refreshToken)
            let replies = try await withThrowingTaskGroup(of: Reply.self) { group in
                for _ in 0..<4 { group.addTask { try await refresh(client, rt1) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(replies.allSatisfy { $0.status == .ok })
            let tokens = Set(try replies.map { try $0.decode(NativeAuthTokenResponse.self).refreshToken })
            #expect(tokens.count == 1)
            let session = try await storedSession(gatehouse, rt1)
            #expect(session.previousSecretHash == OpaqueToken(rt1)?.hash)
        }
    }

    @Test func anExpiredSessionIsExpiredRefreshToken() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { _, client in
            let rt = try #require(try await signedIn(client, "u@example.com").refreshToken)
            clock.advance(by: 5_184_001)
            expectNativeError(try await refresh(client, rt), .expiredRefreshToken, code: NativeAuthErrorCode.expiredRefreshToken)
            expectNativeError(try await refresh(client, "not-a-token"), .invalidGrant, code: NativeAuthErrorCode.invalidRefreshToken)
        }
    }
}

/// The stored flow behind a continuation token.
func storedFlow(_ gatehouse: AuthServer, _ token: String) async throws -> NativeFlowRecord {
    let id = try #require(OpaqueToken(token)).id
    return try #require(try await gatehouse.env.store.flow(id: id))
}

/// The stored session behind a native refresh token.
func storedSession(_ gatehouse: AuthServer, _ token: String) async throws -> SessionRecord {
    let id = try #require(OpaqueToken(token)).id
    return try #require(try await gatehouse.env.store.session(id: id))
}
