import Foundation
import Testing

@testable import Gatehouse
import GatehouseWire

/// Which failures hand a flow's state back (`newState`) in every flow: a request refused before it touched the flow
/// (`slow_down`) keeps it, an answer that says the flow has ended hands none back, whatever the step's own rule; and
/// how delegate callbacks hold up when an app hands them on.
@Suite struct NativeAuthFlowStateTests {
    static let email = "ada@example.com"

    static func context(_ harness: Harness) -> FlowContext {
        FlowContext(engine: harness.client.engine, correlationId: UUID(), username: email)
    }

    /// A code asked for again too soon (400), and a rate limit (429): Gatehouse's two kinds of `slow_down`.
    static let tooSoon = Reply.error("slow_down", "wait", codes: [9_900_004], extra: #","retry_after":30"#)
    static let rateLimited = Reply.error("slow_down", "wait", codes: [9_900_009], status: 429, extra: #","retry_after":30"#)

    @Test @MainActor func slowDownHandsTheStateBackInSignUp() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct2"), reply: Self.tooSoon),
            Exchange(endpoint: .signUpContinue, fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]), reply: Self.rateLimited),
            Exchange(endpoint: .signUpContinue, fields: Form.proceed("ct3", grant: "password", ["password": "pw"]), reply: Self.rateLimited),
        ])
        let code = SignUpCodeRequiredState(context: Self.context(harness), continuationToken: "ct2")
        let password = SignUpPasswordRequiredState(context: Self.context(harness), continuationToken: "ct3")
        let recorder = Recorder()
        let resend = await recorder.next { code.resendCode(delegate: recorder) }
        #expect(resend.method == "onSignUpResendCodeError(error:newState:)")
        #expect(try resend.state(SignUpCodeRequiredState.self) === code)
        let submit = await recorder.next { code.submitCode(code: "1", delegate: recorder) }
        #expect(submit.method == "onSignUpVerifyCodeError(error:newState:)")
        #expect(try submit.state(SignUpCodeRequiredState.self) === code)
        let submitPassword = await recorder.next { password.submitPassword(password: "pw", delegate: recorder) }
        #expect(submitPassword.method == "onSignUpPasswordRequiredError(error:newState:)")
        #expect(try submitPassword.state(SignUpPasswordRequiredState.self) === password)
        harness.verify()
    }

    @Test @MainActor func slowDownHandsTheStateBackInAReset() async throws {
        let harness = Harness([
            Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct2"), reply: Self.tooSoon),
            Exchange(endpoint: .resetPasswordContinue, fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]), reply: Self.rateLimited),
            NativeAuthResetPasswordTests.submit("ct3", "N3w-password", Self.rateLimited),
        ])
        let code = ResetPasswordCodeRequiredState(context: Self.context(harness), continuationToken: "ct2")
        let password = ResetPasswordRequiredState(context: Self.context(harness), continuationToken: "ct3")
        let recorder = Recorder()
        let resend = await recorder.next { code.resendCode(delegate: recorder) }
        #expect(resend.method == "onResetPasswordResendCodeError(error:newState:)")
        #expect(try resend.state(ResetPasswordCodeRequiredState.self) === code)
        let submit = await recorder.next { code.submitCode(code: "1", delegate: recorder) }
        #expect(submit.method == "onResetPasswordVerifyCodeError(error:newState:)")
        #expect(try submit.state(ResetPasswordCodeRequiredState.self) === code)
        let submitPassword = await recorder.next { password.submitPassword(password: "N3w-password", delegate: recorder) }
        #expect(submitPassword.method == "onResetPasswordRequiredError(error:newState:)")
        #expect(try submitPassword.state(ResetPasswordRequiredState.self) === password)
        #expect(password.continuationToken == "ct3")
        harness.verify()
    }

    /// A poll refused as too soon or too many was not looked at, and the password may already be set: it is asked
    /// again after the wait it names (at most 10 s), as one of the retries, and the reset completes.
    @Test func aPollRefusedWithSlowDownIsAskedAgain() async throws {
        let harness = Harness([
            NativeAuthResetPasswordTests.submit("ct3", "N3w-password", NativeAuthResetPasswordTests.submitted),
            NativeAuthResetPasswordTests.poll("ct4", Self.rateLimited),
            NativeAuthResetPasswordTests.poll("ct4", Reply.poll("succeeded", "ct5")),
        ])
        let state = ResetPasswordRequiredState(context: Self.context(harness), continuationToken: "ct3")
        let next = try await state.submitPassword("N3w-password")
        #expect(next.continuationToken == "ct5")
        #expect(harness.sleeps.recorded == [10])
        harness.verify()
    }

    /// After the submit, the state's token is spent: a poll refused with `slow_down` every time ends the flow as a
    /// poll that never completes does, handing no state back.
    @Test func pollsRefusedUntilTheRetriesRunOutEndTheReset() async throws {
        let harness = Harness(
            [NativeAuthResetPasswordTests.submit("ct3", "N3w-password", NativeAuthResetPasswordTests.submitted)]
                + Array(repeating: NativeAuthResetPasswordTests.poll("ct4", Self.rateLimited), count: 6)
        )
        let state = ResetPasswordRequiredState(context: Self.context(harness), continuationToken: "ct3")
        let error = try #require(await thrown { () async throws(PasswordRequiredError) in try await state.submitPassword("N3w-password") })
        #expect(error.kind == .generalError && !error.keepsState)
        #expect(error.errorDescription == "The password reset did not complete in time")
        #expect(state.continuationToken == "ct3")
        harness.verify()
    }

    /// Sign-in hands its state back after any error but a redirect, as MSAL does, except when the answer says the flow
    /// is over: then a retry on it could only fail again.
    @Test(arguments: [
        (Reply.error("invalid_grant", "too many", codes: [9_900_003]), false),
        (Reply.error("expired_token", "late"), false),
        (Reply.error("invalid_grant", "late", codes: [552_003]), false),
        (Reply.error("invalid_grant", "used", codes: [55200]), false),
        (Reply.error("invalid_grant", "disabled", codes: [50057]), false),
        (NativeAuthFlowStateTests.rateLimited, true),
        (Reply.error("invalid_request", "something else"), true),
    ])
    @MainActor func signInHandsBackOnlyAStateThatCanStillSucceed(_ reply: Exchange.Reply, _ kept: Bool) async throws {
        let harness = Harness([
            NativeAuthSignInTests.passwordGrant("ct2", "pw", reply),
            NativeAuthSignInTests.oobGrant("ct2", "1", reply),
            Exchange(endpoint: .signInChallenge, fields: Form.challenge("ct2"), reply: reply),
        ])
        let password = SignInPasswordRequiredState(context: Self.context(harness), options: SignInOptions(), continuationToken: "ct2")
        let code = SignInCodeRequiredState(context: Self.context(harness), options: SignInOptions(), continuationToken: "ct2")
        let recorder = Recorder()
        let submitPassword = await recorder.next { password.submitPassword(password: "pw", delegate: recorder) }
        #expect(submitPassword.method == "onSignInPasswordRequiredError(error:newState:)")
        #expect((submitPassword.state as? SignInPasswordRequiredState) === (kept ? password : nil))
        let submitCode = await recorder.next { code.submitCode(code: "1", delegate: recorder) }
        #expect(submitCode.method == "onSignInVerifyCodeError(error:newState:)")
        #expect((submitCode.state as? SignInCodeRequiredState) === (kept ? code : nil))
        let resend = await recorder.next { code.resendCode(delegate: recorder) }
        #expect(resend.method == "onSignInResendCodeError(error:newState:)")
        #expect((resend.state as? SignInCodeRequiredState) === (kept ? code : nil))
        harness.verify()
    }

    /// A resend answered with an expired flow hands no state back, though MSAL keeps it for `expired_token`: every
    /// code sent on it would be refused the same way.
    @Test @MainActor func anExpiredSignUpIsNotHandedBack() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct2"), reply: Reply.error("expired_token", "late", codes: [552_003]))
        ])
        let state = SignUpCodeRequiredState(context: Self.context(harness), continuationToken: "ct2")
        let recorder = Recorder()
        let resend = await recorder.next { state.resendCode(delegate: recorder) }
        #expect(resend.method == "onSignUpResendCodeError(error:newState:)")
        #expect(resend.error?.isBrowserRequired == false)
        #expect(resend.state == nil)
        harness.verify()
    }

    @Test func aLongPollIntervalIsCut() async throws {
        let harness = Harness([
            NativeAuthResetPasswordTests.submit("ct3", "N3w-password", Reply.ok(#"{"continuation_token":"ct4","poll_interval":86400}"#)),
            NativeAuthResetPasswordTests.poll("ct4", Reply.poll("in_progress")),
            NativeAuthResetPasswordTests.poll("ct4", Reply.poll("succeeded", "ct5")),
        ])
        let state = ResetPasswordRequiredState(context: Self.context(harness), continuationToken: "ct3")
        let next = try await state.submitPassword("N3w-password")
        #expect(next.continuationToken == "ct5")
        #expect(harness.sleeps.recorded == [TimeInterval(ResetPasswordRequiredState.longestPollInterval)])
        harness.verify()
    }

    /// An app's delegate that hands a callback on to an object of its own, which adopts the protocol without the
    /// method: the app implemented it, so it gets that one callback and no "not implemented" error besides.
    @MainActor final class ForwardingDelegate: SignUpStartDelegate {
        @MainActor final class Child: SignUpStartDelegate {
            var errors: [String] = []
            func onSignUpStartError(error: SignUpStartError) { errors.append(error.errorDescription ?? "") }
        }

        let child = Child()
        var calls: [String] = []

        func onSignUpStartError(error: SignUpStartError) { calls.append("error: \(error.errorDescription ?? "")") }
        func onSignUpCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int) {
            calls.append("code")
            child.onSignUpCodeRequired(newState: newState, sentTo: sentTo, channelTargetType: channelTargetType, codeLength: codeLength)
        }
    }

    /// An app's delegate whose implemented method calls another optional method of its own that it did not implement
    /// (a shared helper it meant to add later): the SDK called the implemented one, so there is no error.
    @MainActor final class SelfCallingDelegate: SignUpStartDelegate {
        var calls: [String] = []

        func onSignUpStartError(error: SignUpStartError) { calls.append("error: \(error.errorDescription ?? "")") }
        func onSignUpCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int) {
            calls.append("code")
            onSignUpAttributesInvalid(attributeNames: [])
        }
    }

    @Test @MainActor func anImplementedCallbackThatCallsAnUnimplementedOneOfItsOwnIsOneCallback() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
        ])
        let delegate = SelfCallingDelegate()
        await withCheckedContinuation { (delivered: CheckedContinuation<Void, Never>) in
            DelegateCall.$afterDelivery.withValue({ delivered.resume() }) { harness.client.signUp(username: Self.email, delegate: delegate) }
        }
        #expect(delegate.calls == ["code"])
        harness.verify()
    }

    @Test @MainActor func aCallbackHandedOnIsStillOneCallback() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
        ])
        let delegate = ForwardingDelegate()
        await withCheckedContinuation { (delivered: CheckedContinuation<Void, Never>) in
            DelegateCall.$afterDelivery.withValue({ delivered.resume() }) { harness.client.signUp(username: Self.email, delegate: delegate) }
        }
        #expect(delegate.calls == ["code"])
        #expect(delegate.child.errors.isEmpty)
        // The control: the child called as the delegate itself has not implemented the method, and is told so.
        harness.transport.then(
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2"))
        )
        let child = ForwardingDelegate.Child()
        await withCheckedContinuation { (delivered: CheckedContinuation<Void, Never>) in
            DelegateCall.$afterDelivery.withValue({ delivered.resume() }) { harness.client.signUp(username: Self.email, delegate: child) }
        }
        #expect(child.errors.count == 1)
        #expect(child.errors.first?.contains("onSignUpCodeRequired(newState:sentTo:channelTargetType:codeLength:) that has not been implemented") == true)
        harness.verify()
    }
}
