import Foundation
import Testing

@testable import Gatehouse
import GatehouseWire

/// Password reset with polling (spec §2.4) in both forms, and its errors.
@Suite struct NativeAuthResetPasswordTests {
    static let email = "ada@example.com"

    static func submit(_ token: String, _ password: String, _ reply: Exchange.Reply) -> Exchange {
        Exchange(
            endpoint: .resetPasswordSubmit,
            fields: ["client_id": "ios-app", "continuation_token": token, "new_password": password],
            reply: reply
        )
    }

    static func poll(_ token: String, _ reply: Exchange.Reply) -> Exchange {
        Exchange(endpoint: .resetPasswordPollCompletion, fields: ["client_id": "ios-app", "continuation_token": token], reply: reply)
    }

    static let submitted = Reply.ok(#"{"continuation_token":"ct4","poll_interval":2}"#)

    func requiredState(_ harness: Harness, token: String = "ct3") -> ResetPasswordRequiredState {
        ResetPasswordRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: token
        )
    }

    @Test func wholeResetAsyncPollsUntilSucceededThenSignsIn() async throws {
        let harness = Harness([
            Exchange(endpoint: .resetPasswordStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
            Exchange(
                endpoint: .resetPasswordContinue,
                fields: Form.proceed("ct2", grant: "oob", ["oob": "12345678"]),
                reply: Reply.continuation("ct3")
            ),
            Self.submit("ct3", "N3w-password", Self.submitted),
            Self.poll("ct4", Reply.poll("not_started")),
            Self.poll("ct4", Reply.poll("in_progress")),
            Self.poll("ct4", Reply.poll("succeeded", "ct5")),
            Exchange(
                endpoint: .token,
                fields: Form.token(grant: "continuation_token", ["continuation_token": "ct5", "username": Self.email]),
                reply: Reply.tokens()
            ),
        ])
        let sent = try await harness.client.resetPassword(username: Self.email)
        #expect(sent.sentTo == "a***@e******e.com" && sent.codeLength == 8 && sent.channelTargetType.isEmailType)
        let passwordState = try await sent.newState.submitCode("12345678")
        let after = try await passwordState.submitPassword("N3w-password")
        #expect(harness.sleeps.recorded == [2, 2])
        let account = try await after.signIn()
        #expect(account.account.username == "ada@example.com")
        harness.verify()
    }

    @Test func pollingGivesUpAfterFiveRetries() async throws {
        let harness = Harness(
            [Self.submit("ct3", "N3w-password", Self.submitted)] + Array(repeating: Self.poll("ct4", Reply.poll("in_progress")), count: 6)
        )
        let state = requiredState(harness)
        let error = try #require(await thrown { () async throws(PasswordRequiredError) in try await state.submitPassword("N3w-password") })
        #expect(error.kind == .generalError && !error.keepsState)
        #expect(harness.transport.seen.count == 7)
        #expect(harness.sleeps.recorded == [2, 2, 2, 2, 2])
        harness.verify()
    }

    @Test func pollFailedEndsTheFlow() async throws {
        let harness = Harness([Self.submit("ct3", "N3w-password", Self.submitted), Self.poll("ct4", Reply.poll("failed"))])
        let error = try #require(
            await thrown { () async throws(PasswordRequiredError) in try await requiredState(harness).submitPassword("N3w-password") }
        )
        #expect(error.kind == .generalError && !error.keepsState)
        harness.verify()
    }

    @Test @MainActor func aPasswordRefusedBySubmitKeepsTheOldToken() async throws {
        let harness = Harness([
            Self.submit("ct3", "weak", Reply.error("invalid_grant", "too weak", codes: [399246], suberror: "password_too_weak")),
            Self.submit("ct3", "N3w-password", Self.submitted),
            Self.poll("ct4", Reply.poll("succeeded", "ct5")),
        ])
        let state = requiredState(harness)
        let recorder = Recorder()
        let weak = await recorder.next { state.submitPassword(password: "weak", delegate: recorder) }
        #expect(weak.method == "onResetPasswordRequiredError(error:newState:)")
        #expect((weak.error as? PasswordRequiredError)?.isInvalidPassword == true)
        let kept = try weak.state(ResetPasswordRequiredState.self)
        #expect(kept === state && kept.continuationToken == "ct3")
        let done = await recorder.next { kept.submitPassword(password: "N3w-password", delegate: recorder) }
        #expect(done.method == "onResetPasswordCompleted(newState:)")
        #expect(try done.state(SignInAfterResetPasswordState.self).continuationToken == "ct5")
        #expect(harness.sleeps.recorded == [])
        harness.verify()
    }

    @Test func aPasswordRefusedWhilePollingMovesTheStateToTheSubmitToken() async throws {
        let harness = Harness([
            Self.submit("ct3", "recent", Self.submitted),
            Self.poll("ct4", Reply.error("invalid_grant", "recently used", suberror: "password_recently_used")),
            Self.submit("ct4", "N3w-password", Reply.ok(#"{"continuation_token":"ct6","poll_interval":1}"#)),
            Self.poll("ct6", Reply.poll("succeeded", "ct7")),
        ])
        let state = requiredState(harness)
        let error = try #require(await thrown { () async throws(PasswordRequiredError) in try await state.submitPassword("recent") })
        #expect(error.isInvalidPassword && error.keepsState)
        #expect(state.continuationToken == "ct4")
        let after = try await state.submitPassword("N3w-password")
        #expect(after.continuationToken == "ct7")
        harness.verify()
    }

    static let startErrors: [([Exchange], String)] = [
        ([Exchange(endpoint: .resetPasswordStart, fields: Form.start(email), reply: Reply.error("user_not_found", "nobody"))], "userNotFound"),
        (
            [
                Exchange(
                    endpoint: .resetPasswordStart,
                    fields: Form.start(email),
                    reply: Reply.error("invalid_request", "no password", codes: [500_222])
                )
            ], "userDoesNotHavePassword"
        ),
        (
            [
                Exchange(
                    endpoint: .resetPasswordStart,
                    fields: Form.start(email),
                    reply: Reply.error("invalid_request", "username parameter is empty or not valid", codes: [90100])
                )
            ],
            "invalidUsername"
        ),
        (
            [Exchange(endpoint: .resetPasswordStart, fields: Form.start(email), reply: Reply.error("invalid_request", "other", codes: [90100]))],
            "generalError"
        ),
        ([Exchange(endpoint: .resetPasswordStart, fields: Form.start(email), reply: Reply.redirect)], "browserRequired"),
        (
            [
                Exchange(endpoint: .resetPasswordStart, fields: Form.start(email), reply: Reply.continuation("ct1")),
                Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct1"), reply: Reply.passwordChallenge("ct2")),
            ],
            "generalError"
        ),
        (
            [
                Exchange(endpoint: .resetPasswordStart, fields: Form.start(email), reply: Reply.continuation("ct1")),
                Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct1"), reply: Reply.ok(#"{"continuation_token":"ct2"}"#)),
            ],
            "generalError"
        ),
    ]

    @Test(arguments: startErrors) func startErrorsMapAsTheSpecSays(_ script: [Exchange], _ kind: String) async throws {
        let harness = Harness(script)
        let error = try #require(
            await thrown { () async throws(ResetPasswordStartError) in try await harness.client.resetPassword(username: Self.email) }
        )
        #expect("\(error.kind)" == kind)
        #expect(error.isUserNotFound == (kind == "userNotFound"))
        #expect(error.isUserDoesNotHavePassword == (kind == "userDoesNotHavePassword"))
        #expect(error.isInvalidUsername == (kind == "invalidUsername"))
        #expect(error.isBrowserRequired == (kind == "browserRequired"))
        harness.verify()
    }

    @Test @MainActor func wholeResetInDelegateForm() async throws {
        let harness = Harness([
            Exchange(endpoint: .resetPasswordStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
            Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct2"), reply: Reply.codeSent("ct2b")),
            Exchange(
                endpoint: .resetPasswordContinue,
                fields: Form.proceed("ct2b", grant: "oob", ["oob": "0"]),
                reply: Reply.error("invalid_grant", "wrong", suberror: "invalid_oob_value")
            ),
            Exchange(endpoint: .resetPasswordContinue, fields: Form.proceed("ct2b", grant: "oob", ["oob": "1"]), reply: Reply.continuation("ct3")),
            Self.submit("ct3", "N3w-password", Self.submitted),
            Self.poll("ct4", Reply.poll("succeeded", "ct5")),
            Exchange(
                endpoint: .token,
                fields: Form.token(grant: "continuation_token", ["continuation_token": "ct5", "username": Self.email]),
                reply: Reply.tokens()
            ),
        ])
        let recorder = Recorder()
        let started = await recorder.next { harness.client.resetPassword(username: Self.email, delegate: recorder) }
        #expect(started.method == "onResetPasswordCodeRequired(newState:sentTo:channelTargetType:codeLength:)")
        let resent = await recorder.next { try! started.state(ResetPasswordCodeRequiredState.self).resendCode(delegate: recorder) }
        #expect(resent.method == "onResetPasswordResendCodeRequired(newState:sentTo:channelTargetType:codeLength:)")
        let codeState = try resent.state(ResetPasswordCodeRequiredState.self)
        let wrong = await recorder.next { codeState.submitCode(code: "0", delegate: recorder) }
        #expect(wrong.method == "onResetPasswordVerifyCodeError(error:newState:)")
        #expect((wrong.error as? VerifyCodeError)?.isInvalidCode == true)
        #expect(try wrong.state(ResetPasswordCodeRequiredState.self) === codeState)
        let right = await recorder.next { codeState.submitCode(code: "1", delegate: recorder) }
        #expect(right.method == "onPasswordRequired(newState:)")
        let done = await recorder.next {
            try! right.state(ResetPasswordRequiredState.self).submitPassword(password: "N3w-password", delegate: recorder)
        }
        #expect(done.method == "onResetPasswordCompleted(newState:)")
        let signedIn = await recorder.next { try! done.state(SignInAfterResetPasswordState.self).signIn(delegate: recorder) }
        #expect(signedIn.method == "onSignInCompleted(result:)")
        harness.verify()
    }

    @Test @MainActor func resendAndVerifyErrorsEndTheFlow() async throws {
        let harness = Harness([
            Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct2"), reply: Reply.error("expired_token", "late")),
            Exchange(
                endpoint: .resetPasswordContinue,
                fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]),
                reply: Reply.error("expired_token", "late")
            ),
        ])
        let state = ResetPasswordCodeRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: "ct2"
        )
        let recorder = Recorder()
        let resend = await recorder.next { state.resendCode(delegate: recorder) }
        #expect(resend.method == "onResetPasswordResendCodeError(error:newState:)" && resend.state == nil)
        let verify = await recorder.next { state.submitCode(code: "1", delegate: recorder) }
        #expect((verify.error as? VerifyCodeError)?.kind == .generalError && verify.state == nil)
        let empty = await recorder.next { state.submitCode(code: "", delegate: recorder) }
        #expect((empty.error as? VerifyCodeError)?.isInvalidCode == true)
        #expect(try empty.state(ResetPasswordCodeRequiredState.self) === state)
        harness.verify()
    }

    @Test @MainActor func emptyInputFailsWithoutARequest() async throws {
        let harness = Harness()
        let username = try #require(await thrown { () async throws(ResetPasswordStartError) in try await harness.client.resetPassword(username: "") })
        #expect(username.isInvalidUsername)
        let recorder = Recorder()
        let started = await recorder.next { harness.client.resetPassword(parameters: ResetPasswordParameters(username: ""), delegate: recorder) }
        #expect((started.error as? ResetPasswordStartError)?.isInvalidUsername == true)
        let state = requiredState(harness)
        let password = await recorder.next { state.submitPassword(password: "", delegate: recorder) }
        #expect((password.error as? PasswordRequiredError)?.isInvalidPassword == true)
        #expect(try password.state(ResetPasswordRequiredState.self) === state)
        #expect(harness.transport.seen.isEmpty)
    }

    @Test @MainActor func signInAfterResetWithoutATokenFailsLocally() async throws {
        let harness = Harness()
        let state = SignInAfterResetPasswordState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: nil
        )
        let recorder = Recorder()
        let event = await recorder.next { state.signIn(parameters: SignInAfterResetPasswordParameters(), delegate: recorder) }
        #expect(event.method == "onSignInAfterResetPasswordError(error:)")
        #expect(event.error?.errorDescription == NativeAuthErrorText.signInNotAvailable)
        #expect(harness.transport.seen.isEmpty)
    }
}
