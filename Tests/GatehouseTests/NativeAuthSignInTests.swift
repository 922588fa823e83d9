import Foundation
import Testing

@testable import Gatehouse
import GatehouseWire

/// Sign-in (spec §2.5–2.6) in both forms, its error mapping, local validation and kept states.
@Suite struct NativeAuthSignInTests {
    static let email = "ada@example.com"

    static func initiate(_ reply: Exchange.Reply = Reply.continuation("ct1")) -> Exchange {
        Exchange(endpoint: .signInInitiate, fields: Form.start(email), reply: reply)
    }

    static func challenge(_ reply: Exchange.Reply) -> Exchange {
        Exchange(endpoint: .signInChallenge, fields: Form.challenge("ct1"), reply: reply)
    }

    static func passwordGrant(_ token: String, _ password: String, scope: String = Form.scope, _ reply: Exchange.Reply) -> Exchange {
        Exchange(
            endpoint: .token,
            fields: Form.token(grant: "password", ["continuation_token": token, "username": email, "password": password], scope: scope),
            reply: reply
        )
    }

    static func oobGrant(_ token: String, _ code: String, _ reply: Exchange.Reply) -> Exchange {
        Exchange(endpoint: .token, fields: Form.token(grant: "oob", ["continuation_token": token, "oob": code]), reply: reply)
    }

    @Test func passwordSignInAsync() async throws {
        let harness = Harness([
            Self.initiate(),
            Self.challenge(Reply.passwordChallenge("ct2")),
            Self.passwordGrant(
                "ct2",
                "pw",
                scope: "notes.read openid profile offline_access",
                Reply.tokens(access: "at-9", scope: "notes.read openid profile offline_access")
            ),
        ])
        guard case .completed(let result) = try await harness.client.signIn(username: Self.email, password: "pw", scopes: ["notes.read", "openid"])
        else {
            Issue.record("expected completion")
            return
        }
        #expect(result.account.username == "ada@example.com")
        #expect(result.account.homeAccountId == "u1.my-app")
        #expect(result.account.claims?.name == "Ada")
        #expect(result.idToken?.hasPrefix("eyJhbGciOiJFUzI1NiJ9.") == true)
        let token = try await result.getAccessToken()
        #expect(token.accessToken == "at-9")
        #expect(token.scopes == ["notes.read", "openid", "profile", "offline_access"])
        harness.verify()
    }

    @Test func codeSignInAsyncSendsNoChallengeTypeOrUsernameWithTheCode() async throws {
        let harness = Harness([Self.initiate(), Self.challenge(Reply.codeSent("ct2")), Self.oobGrant("ct2", "12345678", Reply.tokens())])
        guard case .codeRequired(let state, let sentTo, _, let length) = try await harness.client.signIn(username: Self.email) else {
            Issue.record("expected a code")
            return
        }
        #expect(sentTo == "a***@e******e.com" && length == 8)
        let result = try await state.submitCode("12345678")
        #expect(result.account.userId == "u1")
        let sent = try #require(harness.transport.seen.last?.fields)
        #expect(sent["challenge_type"] == nil && sent["username"] == nil && sent["client_info"] == "true")
        harness.verify()
    }

    @Test func aPasswordGivenToACodeOnlyAccountIsIgnored() async throws {
        let harness = Harness([Self.initiate(), Self.challenge(Reply.codeSent("ct2"))])
        guard case .codeRequired = try await harness.client.signIn(username: Self.email, password: "pw") else {
            Issue.record("expected a code")
            return
        }
        harness.verify()
    }

    @Test func passwordStateKeepsItsTokenAfterAWrongPassword() async throws {
        let harness = Harness([
            Self.initiate(),
            Self.challenge(Reply.passwordChallenge("ct2")),
            Self.passwordGrant("ct2", "wrong", Reply.error("invalid_grant", "AADSTS50126: Error validating credentials", codes: [50126])),
            Self.passwordGrant("ct2", "other", Reply.error("invalid_request", "something else")),
            Self.passwordGrant("ct2", "right", Reply.tokens()),
        ])
        guard case .passwordRequired(let state) = try await harness.client.signIn(username: Self.email) else {
            Issue.record("expected the password step")
            return
        }
        let wrong = try #require(await thrown { () async throws(PasswordRequiredError) in try await state.submitPassword("wrong") })
        #expect(wrong.isInvalidPassword)
        #expect(wrong.errorCodes == [50126])
        #expect(wrong.keepsState)
        let general = try #require(await thrown { () async throws(PasswordRequiredError) in try await state.submitPassword("other") })
        #expect(general.kind == .generalError && general.keepsState)
        _ = try await state.submitPassword("right")
        harness.verify()
    }

    @Test @MainActor func wholeFlowsInDelegateForm() async throws {
        let harness = Harness([
            Self.initiate(),
            Self.challenge(Reply.codeSent("ct2")),
            Exchange(endpoint: .signInChallenge, fields: Form.challenge("ct2"), reply: Reply.codeSent("ct3")),
            Self.oobGrant("ct3", "00000000", Reply.error("invalid_grant", "Wrong code", suberror: "invalid_oob_value")),
            Self.oobGrant("ct3", "12345678", Reply.tokens()),
            Self.initiate(),
            Self.challenge(Reply.passwordChallenge("ct2")),
            Self.passwordGrant("ct2", "wrong", Reply.error("invalid_grant", "bad", codes: [50126])),
            Self.passwordGrant("ct2", "right", Reply.tokens(user: "u2")),
        ])
        let recorder = Recorder()
        let started = await recorder.next { harness.client.signIn(parameters: SignInParameters(username: Self.email), delegate: recorder) }
        #expect(started.method == "onSignInCodeRequired(newState:sentTo:channelTargetType:codeLength:)")
        let first = try started.state(SignInCodeRequiredState.self)
        let resent = await recorder.next { first.resendCode(delegate: recorder) }
        #expect(resent.method == "onSignInResendCodeCodeRequired(newState:sentTo:channelTargetType:codeLength:)")
        let second = try resent.state(SignInCodeRequiredState.self)
        let wrong = await recorder.next { second.submitCode(code: "00000000", delegate: recorder) }
        #expect(wrong.method == "onSignInVerifyCodeError(error:newState:)")
        #expect((wrong.error as? VerifyCodeError)?.isInvalidCode == true)
        #expect(try wrong.state(SignInCodeRequiredState.self) === second)
        let done = await recorder.next { second.submitCode(code: "12345678", delegate: recorder) }
        #expect(done.method == "onSignInCompleted(result:)")
        #expect(done.account?.account.userId == "u1")

        let password = await recorder.next { harness.client.signIn(username: Self.email, delegate: recorder) }
        #expect(password.method == "onSignInPasswordRequired(newState:)")
        let state = try password.state(SignInPasswordRequiredState.self)
        let rejected = await recorder.next { state.submitPassword(password: "wrong", delegate: recorder) }
        #expect(rejected.method == "onSignInPasswordRequiredError(error:newState:)")
        #expect((rejected.error as? PasswordRequiredError)?.isInvalidPassword == true)
        #expect(try rejected.state(SignInPasswordRequiredState.self) === state)
        let accepted = await recorder.next { state.submitPassword(password: "right", delegate: recorder) }
        #expect(accepted.method == "onSignInCompleted(result:)")
        // Single account: the second sign-in replaced the first.
        #expect(harness.client.getNativeAuthUserAccount()?.account.userId == "u2")
        harness.verify()
    }

    static let startErrors: [([Exchange], String)] = [
        ([initiate(Reply.error("user_not_found", "AADSTS50034", codes: [50034]))], "userNotFound"),
        ([initiate(Reply.error("invalid_request", "AADSTS90100: username parameter is empty or not valid.", codes: [90100]))], "invalidUsername"),
        ([initiate(Reply.error("invalid_client", "off", suberror: "nativeauthapi_disabled"))], "generalError"),
        ([initiate(Reply.redirect)], "browserRequired"),
        ([initiate(), challenge(Reply.redirect)], "browserRequired"),
        ([initiate(), challenge(Reply.error("expired_token", "late"))], "generalError"),
        (
            [initiate(), challenge(Reply.passwordChallenge("ct2")), passwordGrant("ct2", "pw", Reply.error("invalid_grant", "bad", codes: [50126]))],
            "invalidCredentials"
        ),
        (
            [initiate(), challenge(Reply.passwordChallenge("ct2")), passwordGrant("ct2", "pw", Reply.error("invalid_grant", "who", codes: [50034]))],
            "userNotFound"
        ),
        (
            [
                initiate(), challenge(Reply.passwordChallenge("ct2")),
                passwordGrant("ct2", "pw", Reply.error("invalid_grant", "no pw", codes: [500_222])),
            ], "generalError"
        ),
        (
            [
                initiate(), challenge(Reply.passwordChallenge("ct2")),
                passwordGrant("ct2", "pw", Reply.error("invalid_request", "reset", codes: [50142])),
            ], "generalError"
        ),
        ([initiate(), challenge(Reply.passwordChallenge("ct2")), passwordGrant("ct2", "pw", Reply.redirect)], "browserRequired"),
        (
            [initiate(), challenge(Reply.passwordChallenge("ct2")), passwordGrant("ct2", "pw", Reply.error("slow_down", "wait", status: 429))],
            "generalError"
        ),
    ]

    @Test(arguments: startErrors) func startErrorsMapAsTheSpecSays(_ script: [Exchange], _ kind: String) async throws {
        let harness = Harness(script)
        let error = try #require(
            await thrown { () async throws(SignInStartError) in try await harness.client.signIn(username: Self.email, password: "pw") }
        )
        #expect("\(error.kind)" == kind)
        #expect(error.isUserNotFound == (kind == "userNotFound"))
        #expect(error.isInvalidCredentials == (kind == "invalidCredentials"))
        #expect(error.isInvalidUsername == (kind == "invalidUsername"))
        #expect(error.isBrowserRequired == (kind == "browserRequired"))
        #expect(harness.client.getNativeAuthUserAccount() == nil)
        harness.verify()
    }

    @Test @MainActor func startErrorsReachTheDelegate() async throws {
        let harness = Harness([Self.initiate(Reply.error("user_not_found", "nobody", codes: [50034]))])
        let recorder = Recorder()
        let event = await recorder.next { harness.client.signIn(username: Self.email, password: "pw", delegate: recorder) }
        #expect(event.method == "onSignInStartError(error:)")
        #expect((event.error as? SignInStartError)?.isUserNotFound == true)
        #expect(event.error?.errorDescription == "nobody")
        harness.verify()
    }

    @Test func emptyInputFailsWithoutARequest() async throws {
        let harness = Harness()
        let username = try #require(await thrown { () async throws(SignInStartError) in try await harness.client.signIn(username: "") })
        #expect(username.isInvalidUsername)
        let password = try #require(
            await thrown { () async throws(SignInStartError) in try await harness.client.signIn(username: Self.email, password: "") }
        )
        #expect(password.isInvalidCredentials)
        let context = FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email)
        let codeState = SignInCodeRequiredState(context: context, options: SignInOptions(), continuationToken: "ct2")
        let code = try #require(await thrown { () async throws(VerifyCodeError) in try await codeState.submitCode("") })
        #expect(code.isInvalidCode && code.keepsState)
        let passwordState = SignInPasswordRequiredState(context: context, options: SignInOptions(), continuationToken: "ct2")
        let empty = try #require(await thrown { () async throws(PasswordRequiredError) in try await passwordState.submitPassword("") })
        #expect(empty.isInvalidPassword && empty.keepsState)
        #expect(harness.transport.seen.isEmpty)
    }

    @Test @MainActor func verifyAndResendErrorsKeepTheStateExceptRedirect() async throws {
        let harness = Harness([
            Self.oobGrant("ct2", "1", Reply.error("invalid_request", "bad")),
            Self.oobGrant("ct2", "1", Reply.redirect),
            Exchange(endpoint: .signInChallenge, fields: Form.challenge("ct2"), reply: Reply.error("invalid_request", "bad")),
            Exchange(endpoint: .signInChallenge, fields: Form.challenge("ct2"), reply: Reply.redirect),
        ])
        let state = SignInCodeRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            options: SignInOptions(),
            continuationToken: "ct2"
        )
        let recorder = Recorder()
        let general = await recorder.next { state.submitCode(code: "1", delegate: recorder) }
        #expect((general.error as? VerifyCodeError)?.kind == .generalError)
        #expect(try general.state(SignInCodeRequiredState.self) === state)
        let redirect = await recorder.next { state.submitCode(code: "1", delegate: recorder) }
        #expect(redirect.error?.isBrowserRequired == true && redirect.state == nil)
        let resend = await recorder.next { state.resendCode(delegate: recorder) }
        #expect(resend.method == "onSignInResendCodeError(error:newState:)")
        #expect(try resend.state(SignInCodeRequiredState.self) === state)
        let resendRedirect = await recorder.next { state.resendCode(delegate: recorder) }
        #expect(resendRedirect.error?.isBrowserRequired == true && resendRedirect.state == nil)
        harness.verify()
    }

    @Test func theCallersCorrelationIdIsSentAndReported() async throws {
        let correlationId = UUID()
        let serverId = UUID()
        let harness = Harness([
            Self.initiate(),
            Self.challenge(
                .answer(
                    status: 400,
                    body: #"{"error":"expired_token","error_description":"late","error_codes":[]}"#,
                    headers: ["client-request-id": serverId.uuidString]
                )
            ),
        ])
        let parameters = SignInParameters(username: Self.email)
        parameters.correlationId = correlationId
        let error = try #require(await thrown { () async throws(SignInStartError) in try await harness.client.signIn(parameters: parameters) })
        #expect(harness.transport.seen.map { $0.headers["client-request-id"] } == [correlationId.uuidString, correlationId.uuidString])
        // The SDK adopts the server's correlation id when it answers with another one.
        #expect(error.correlationId == serverId)
        harness.verify()
    }

    @Test func capabilitiesAndChallengeTypesAreSentAsConfigured() async throws {
        let harness = Harness(
            [
                Exchange(
                    endpoint: .signInInitiate,
                    fields: [
                        "client_id": "ios-app", "username": Self.email, "challenge_type": "oob redirect",
                        "capabilities": "mfa_required registration_required",
                    ],
                    reply: Reply.continuation("ct1")
                ),
                Exchange(
                    endpoint: .signInChallenge,
                    fields: ["client_id": "ios-app", "continuation_token": "ct1", "challenge_type": "oob redirect"],
                    reply: Reply.codeSent("ct2")
                ),
            ],
            challengeTypes: [.oob],
            capabilities: [.mfaRequired, .registrationRequired]
        )
        _ = try await harness.client.signIn(username: Self.email)
        harness.verify()
    }
}
