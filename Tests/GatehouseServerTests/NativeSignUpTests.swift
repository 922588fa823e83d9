import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct NativeSignUpTests {
    @Test func signUpWithACodeOnlyThenSignInAfterSignUp() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let started = try await client.nativeStep(.signUpStart, ["username": "Ada@Example.com", "challenge_type": "oob redirect"])
            let ct1 = try #require(started.continuationToken)
            #expect(started.challengeType == nil)
            // Nothing exists before the flow completes.
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ada@example.com") == nil)

            let challenge = try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": "oob redirect"])
            #expect(challenge.challengeType == .oob)
            #expect(challenge.bindingMethod == "prompt")
            #expect(challenge.challengeChannel == "email")
            #expect(challenge.challengeTargetLabel == "A***a@E***e.com")
            #expect(challenge.codeLength == 8)
            #expect(challenge.interval == 60)
            let ct2 = try #require(challenge.continuationToken)
            #expect(ct2 != ct1)

            let code = try await client.latestCode("ada@example.com")
            #expect(code.count == 8 && code.allSatisfy(\.isNumber))
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ada@example.com") == nil)

            let done = try await client.nativeStep(.signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": code])
            let ct3 = try #require(done.continuationToken)
            #expect(done.expiresIn == 600)
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "ada@example.com"))
            #expect(account.confirmedAt != nil)
            #expect(account.passwordHash.isEmpty)

            let tokens = try await client.nativeTokens(ct3, username: "ada@example.com")
            #expect(tokens.tokenType == "Bearer")
            #expect(tokens.scope == "openid profile offline_access")
            #expect(tokens.expiresIn == 1800)
            #expect(tokens.refreshToken != nil)
            let id = try jwtPayload(try #require(tokens.idToken))
            #expect(id["sub"] as? String == account.userId)
            #expect(id["aud"] as? String == nativeClient)
            #expect(id["iss"] as? String == "http://gatehouse.test")
            #expect(id["preferred_username"] as? String == "Ada@Example.com")
            #expect(id["email"] as? String == "Ada@Example.com")
            #expect(id["exp"] as? Int == (id["iat"] as? Int).map { $0 + 1800 })
            let info = try jsonSegment(Substring(tokens.clientInfo))
            #expect(info["uid"] as? String == account.userId)
            #expect(info["utid"] as? String == "test-app")

            // The access token is the Client API's: the profile answers with it.
            let profile = try await client.call(Path.profile, .get, bearer: tokens.accessToken)
            #expect(profile.status == .ok)
            #expect(try profile.decode(ProfileResponse.self).userId == account.userId)

            // The sign-in token works once.
            let again = try await client.native(
                .token, ["continuation_token": ct3, "grant_type": "continuation_token", "username": "ada@example.com"]
            )
            expectNativeError(again, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
        }
    }

    @Test func aPasswordGivenAtStartIsTheAccountsPasswordForBothAPIs() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let weak = try await client.native(.signUpStart, ["username": "bo@example.com", "password": "short", "challenge_type": allChallengeTypes])
            expectNativeError(weak, .invalidGrant, suberror: .passwordTooShort)
            let long = try await client.native(
                .signUpStart, ["username": "bo@example.com", "password": String(repeating: "x", count: 257), "challenge_type": allChallengeTypes]
            )
            expectNativeError(long, .invalidGrant, suberror: .passwordTooLong)

            let ct = try await client.nativeSignUp("bo@example.com", password: "correct horse")
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "bo@example.com"))
            #expect(account.passwordHash.hasPrefix("$argon2id$"))
            _ = try await client.nativeTokens(ct, username: "bo@example.com")
            #expect(try await client.login("bo@example.com", "correct horse").status == .ok)
            #expect(try await client.login("bo@example.com", "wrong horse").status == .unauthorized)
        }
    }

    @Test func aPasswordAskedForAfterTheCodeWithCredentialRequired() async throws {
        try await withGatehouse(nativeConfiguration(methods: [.emailPassword])) { gatehouse, client in
            let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": "cy@example.com", "challenge_type": allChallengeTypes]).continuationToken)
            let ct2 = try #require(
                try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken
            )
            let afterCode = try await client.native(
                .signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": try await client.latestCode("cy@example.com")]
            )
            expectNativeError(afterCode, .credentialRequired, code: NativeAuthErrorCode.credentialRequired)
            let ct3 = try #require(afterCode.nativeError?.continuationToken)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "cy@example.com") == nil)

            let challenge = try await client.nativeStep(.signUpChallenge, ["continuation_token": ct3, "challenge_type": allChallengeTypes])
            #expect(challenge.challengeType == .password)
            let ct4 = try #require(challenge.continuationToken)

            // A weak password keeps the token: the user tries again with the same one.
            let weak = try await client.native(.signUpContinue, ["continuation_token": ct4, "grant_type": "password", "password": "1234"])
            expectNativeError(weak, .invalidGrant, suberror: .passwordTooShort)
            let done = try await client.nativeStep(
                .signUpContinue, ["continuation_token": ct4, "grant_type": "password", "password": "correct horse"]
            )
            _ = try await client.nativeTokens(try #require(done.continuationToken), username: "cy@example.com")
            #expect(try await client.login("cy@example.com", "correct horse").status == .ok)
        }
    }

    @Test func anAppThatRequiresAPasswordRedirectsAClientThatTakesOnlyCodes() async throws {
        try await withGatehouse(nativeConfiguration(methods: [.emailPassword])) { _, client in
            let reply = try await client.native(.signUpStart, ["username": "dee@example.com", "challenge_type": "oob redirect"])
            #expect(reply.status == .ok)
            #expect(reply.step?.challengeType == .redirect)
            #expect(reply.step?.redirectReason?.isEmpty == false)
            #expect(reply.step?.continuationToken == nil)
        }
    }

    @Test func requiredAttributesAcrossTwoStepsAndInvalidOnesByName() async throws {
        let attributes: [NativeAuthSettings.Attribute] = [
            .init(name: "displayName", required: true),
            .init(name: "country", required: false, regex: "^[A-Z]{2}$"),
        ]
        try await withGatehouse(nativeConfiguration(attributes: attributes)) { gatehouse, client in
            // Invalid at start: named, no flow.
            let badStart = try await client.native(
                .signUpStart, ["username": "eve@example.com", "challenge_type": allChallengeTypes, "attributes": #"{"country":"France","displayName":""}"#]
            )
            expectNativeError(badStart, .invalidGrant, suberror: .attributeValidationFailed)
            #expect(Set(badStart.nativeError?.invalidAttributes?.map(\.name) ?? []) == ["country", "displayName"])

            let ct1 = try #require(
                try await client.nativeStep(.signUpStart, ["username": "eve@example.com", "challenge_type": allChallengeTypes, "attributes": #"{"country":"FR","shoeSize":44}"#])
                    .continuationToken
            )
            let ct2 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
            let afterCode = try await client.native(
                .signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": try await client.latestCode("eve@example.com")]
            )
            expectNativeError(afterCode, .attributesRequired, code: NativeAuthErrorCode.attributesRequired)
            #expect(afterCode.nativeError?.requiredAttributes == [NativeAuthRequiredAttribute(name: "displayName", type: "string", required: true)])
            let ct3 = try #require(afterCode.nativeError?.continuationToken)

            let invalid = try await client.native(
                .signUpContinue, ["continuation_token": ct3, "grant_type": "attributes", "attributes": #"{"displayName":"Eve","country":"fr"}"#]
            )
            expectNativeError(invalid, .invalidGrant, suberror: .attributeValidationFailed)
            #expect(invalid.nativeError?.invalidAttributes == [NativeAuthAttributeName(name: "country")])
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "eve@example.com") == nil)

            let done = try await client.nativeStep(
                .signUpContinue, ["continuation_token": ct3, "grant_type": "attributes", "attributes": #"{"displayName":"Eve"}"#]
            )
            let tokens = try await client.nativeTokens(try #require(done.continuationToken), username: "eve@example.com")
            #expect(try jwtPayload(try #require(tokens.idToken))["name"] as? String == "Eve")
            let profile = try await client.call(Path.profile, .get, bearer: tokens.accessToken).decode(ProfileResponse.self)
            #expect(profile.data["displayName"] == .string("Eve"))
            #expect(profile.data["country"] == .string("FR"))
            #expect(profile.data["shoeSize"] == nil)
        }
    }

    /// Where the app reveals user existence, as Entra does. (Without it, see AccountIntegrityTests.)
    @Test func aTakenAddressIsUserAlreadyExistsAndTwoRacingSignUpsMakeOneAccount() async throws {
        try await withGatehouse(nativeConfiguration(reveal: true)) { gatehouse, client in
            _ = try await client.signUp("taken@example.com")
            let taken = try await client.native(.signUpStart, ["username": "TAKEN@example.com", "challenge_type": allChallengeTypes])
            expectNativeError(taken, .userAlreadyExists, code: NativeAuthErrorCode.userAlreadyExists)

            // Two flows for one new address, both verified; only one can complete.
            var pending: [(String, String)] = []
            for _ in 0..<2 {
                let ct1 = try #require(try await client.nativeStep(.signUpStart, ["username": "race@example.com", "challenge_type": allChallengeTypes]).continuationToken)
                let ct2 = try #require(try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken)
                pending.append((ct2, try await client.latestCode("race@example.com")))
            }
            let statuses = try await withThrowingTaskGroup(of: Reply.self) { group in
                for (ct, code) in pending {
                    group.addTask { try await client.native(.signUpContinue, ["continuation_token": ct, "grant_type": "oob", "oob": code]) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0.status == .ok }.count == 1)
            let loser = try #require(statuses.first { $0.status != .ok })
            expectNativeError(loser, .userAlreadyExists)
            let users = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "race@example.com")
            #expect(users != nil)
        }
    }
}
