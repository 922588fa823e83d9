import Foundation
import Testing

@testable import Gatehouse
import GatehouseWire

/// Sign-up (spec §2.1–2.3) in both forms, its error mapping, local validation and kept states.
@Suite struct NativeAuthSignUpTests {
    static let email = "ada@example.com"

    @Test func codeOnlySignUpThenSignInAsync() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
            Exchange(endpoint: .signUpContinue, fields: Form.proceed("ct2", grant: "oob", ["oob": "12345678"]), reply: Reply.continuation("ct3")),
            Exchange(
                endpoint: .token,
                fields: Form.token(grant: "continuation_token", ["continuation_token": "ct3", "username": Self.email]),
                reply: Reply.tokens()
            ),
        ])
        guard case .codeRequired(let state, let sentTo, let channel, let length) = try await harness.client.signUp(username: Self.email) else {
            Issue.record("expected a code")
            return
        }
        #expect(sentTo == "a***@e******e.com")
        #expect(channel.isEmailType && !channel.isSMSType && channel.value == "email")
        #expect(length == 8)
        #expect(state.continuationToken == "ct2")
        guard case .completed(let after) = try await state.submitCode("12345678") else {
            Issue.record("expected completion")
            return
        }
        let result = try await after.signIn()
        #expect(result.account.username == "ada@example.com")
        #expect(result.account.userId == "u1")
        #expect(harness.client.getNativeAuthUserAccount()?.account == result.account)
        // One correlation id for the whole flow.
        #expect(Set(harness.transport.seen.map { $0.headers["client-request-id"] }).count == 1)
        #expect(harness.transport.seen.first?.headers["client-request-id"] == state.correlationId.uuidString)
        harness.verify()
    }

    @Test func passwordAndAttributesAtStartThenAttributesStepAsync() async throws {
        let harness = Harness([
            Exchange(
                endpoint: .signUpStart,
                fields: Form.start(Self.email, ["password": "s3cret-pass", "attributes": #"{"age":42,"displayName":"Ada"}"#]),
                reply: Reply.continuation("ct1")
            ),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]),
                reply: Reply.error(
                    "attributes_required",
                    "more",
                    codes: [55106],
                    extra:
                        #","continuation_token":"ct3","required_attributes":[{"name":"country","type":"string","required":true,"options":{"regex":"^[A-Z]{2}$"}}]"#
                )
            ),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct3", grant: "attributes", ["attributes": #"{"country":"france"}"#]),
                reply: Reply.error(
                    "invalid_grant",
                    "bad",
                    suberror: "attribute_validation_failed",
                    extra: #","invalid_attributes":[{"name":"country"}]"#
                )
            ),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct3", grant: "attributes", ["attributes": #"{"country":"FR"}"#]),
                reply: Reply.continuation("ct4")
            ),
        ])
        guard
            case .codeRequired(let state, _, _, _) = try await harness.client.signUp(
                username: Self.email,
                password: "s3cret-pass",
                attributes: ["displayName": "Ada", "age": 42]
            )
        else {
            Issue.record("expected a code")
            return
        }
        guard case .attributesRequired(let attributes, let attributesState) = try await state.submitCode("1") else {
            Issue.record("expected attributes")
            return
        }
        #expect(attributes == [RequiredAttribute(name: "country", type: "string", required: true, regex: "^[A-Z]{2}$")])
        guard case .attributesInvalid(let names, let same) = try await attributesState.submitAttributes(["country": "france"]) else {
            Issue.record("expected invalid attributes")
            return
        }
        #expect(names == ["country"])
        #expect(same === attributesState)
        guard case .completed(let after) = try await same.submitAttributes(["country": "FR"]) else {
            Issue.record("expected completion")
            return
        }
        #expect(after.continuationToken == "ct4")
        harness.verify()
    }

    @Test func passwordAskedAfterTheCodeWithAWeakPasswordRetriedOnTheSameState() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]),
                reply: Reply.error("credential_required", "password needed", codes: [55103], extra: #","continuation_token":"ct4""#)
            ),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct4"), reply: Reply.passwordChallenge("ct5")),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct5", grant: "password", ["password": "weak"]),
                reply: Reply.error("invalid_grant", "Password too weak", codes: [399246], suberror: "password_too_weak")
            ),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct5", grant: "password", ["password": "Str0ng-enough"]),
                reply: Reply.continuation("ct6")
            ),
        ])
        guard case .codeRequired(let state, _, _, _) = try await harness.client.signUp(username: Self.email),
            case .passwordRequired(let passwordState) = try await state.submitCode("1")
        else {
            Issue.record("expected the password step")
            return
        }
        let error = try #require(await thrown { () async throws(PasswordRequiredError) in try await passwordState.submitPassword("weak") })
        #expect(error.isInvalidPassword)
        #expect(error.errorDescription == "Password too weak")
        #expect(error.errorCodes == [399246])
        guard case .completed(let after) = try await passwordState.submitPassword("Str0ng-enough") else {
            Issue.record("expected completion")
            return
        }
        #expect(after.continuationToken == "ct6")
        harness.verify()
    }

    @Test @MainActor func wholeFlowInDelegateForm() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct2"), reply: Reply.codeSent("ct3")),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct3", grant: "oob", ["oob": "00000000"]),
                reply: Reply.error("invalid_grant", "Wrong code", suberror: "invalid_oob_value")
            ),
            Exchange(endpoint: .signUpContinue, fields: Form.proceed("ct3", grant: "oob", ["oob": "12345678"]), reply: Reply.continuation("ct4")),
            Exchange(
                endpoint: .token,
                fields: Form.token(
                    grant: "continuation_token",
                    ["continuation_token": "ct4", "username": Self.email],
                    scope: "notes.read openid profile offline_access"
                ),
                reply: Reply.tokens()
            ),
        ])
        let recorder = Recorder()
        let parameters = SignUpParameters(username: Self.email)
        let started = await recorder.next { harness.client.signUp(parameters: parameters, delegate: recorder) }
        #expect(started.method == "onSignUpCodeRequired(newState:sentTo:channelTargetType:codeLength:)")
        #expect(started.values == ["a***@e******e.com", "email", "8"])
        let first = try started.state(SignUpCodeRequiredState.self)

        let resent = await recorder.next { first.resendCode(delegate: recorder) }
        #expect(resent.method == "onSignUpResendCodeCodeRequired(newState:sentTo:channelTargetType:codeLength:)")
        let second = try resent.state(SignUpCodeRequiredState.self)
        #expect(second.continuationToken == "ct3")

        let wrong = await recorder.next { second.submitCode(code: "00000000", delegate: recorder) }
        #expect(wrong.method == "onSignUpVerifyCodeError(error:newState:)")
        #expect((wrong.error as? VerifyCodeError)?.isInvalidCode == true)
        #expect(wrong.error?.errorDescription == "Wrong code")
        let kept = try wrong.state(SignUpCodeRequiredState.self)
        #expect(kept === second && kept.continuationToken == "ct3")

        let done = await recorder.next { kept.submitCode(code: "12345678", delegate: recorder) }
        #expect(done.method == "onSignUpCompleted(newState:)")
        let after = try done.state(SignInAfterSignUpState.self)
        let signedIn = await recorder.next { after.signIn(scopes: ["notes.read"], delegate: recorder) }
        #expect(signedIn.method == "onSignInCompleted(result:)")
        #expect(signedIn.account?.account.username == "ada@example.com")
        harness.verify()
    }

    static let startErrors: [(Exchange.Reply, String)] = [
        (Reply.error("user_already_exists", "taken", codes: [1_003_037]), "userAlreadyExists"),
        (Reply.error("invalid_grant", "short", codes: [399246], suberror: "password_too_short"), "invalidPassword"),
        (Reply.error("invalid_grant", "banned", suberror: "password_banned"), "invalidPassword"),
        (Reply.error("invalid_request", "AADSTS90100: username parameter is empty or not valid.", codes: [90100]), "invalidUsername"),
        (Reply.error("invalid_request", "AADSTS90100: client_id parameter is empty or not valid.", codes: [90100]), "generalError"),
        (Reply.error("invalid_grant", "no suberror"), "generalError"),
        (Reply.error("invalid_client", "off", suberror: "nativeauthapi_disabled"), "generalError"),
        (Reply.error("unauthorized_client", "who"), "generalError"),
        (Reply.error("unsupported_challenge_type", "add redirect"), "generalError"),
        (Reply.error("something_new", "?"), "generalError"),
        (Reply.error("slow_down", "wait", status: 429), "generalError"),
        (Reply.error("user_already_exists", "403 is not decoded", status: 403), "generalError"),
        (Reply.redirect, "browserRequired"),
    ]

    @Test(arguments: startErrors) func startErrorsMapAsTheSpecSays(_ reply: Exchange.Reply, _ kind: String) async throws {
        let harness = Harness([Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: reply)])
        let correlationId = UUID()
        let error = try #require(
            await thrown { () async throws(SignUpStartError) in
                try await harness.client.signUp(username: Self.email, correlationId: correlationId)
            }
        )
        #expect("\(error.kind)" == kind)
        #expect(error.isUserAlreadyExists == (kind == "userAlreadyExists"))
        #expect(error.isInvalidPassword == (kind == "invalidPassword"))
        #expect(error.isInvalidUsername == (kind == "invalidUsername"))
        #expect(error.isBrowserRequired == (kind == "browserRequired"))
        #expect(error.correlationId == correlationId)
        if case .answer(400, _, _) = reply {
            #expect(error.errorUri?.hasPrefix("https://errors.example/") == true)
        }
        harness.verify()
    }

    @Test func serverDescriptionOrFixedText() async throws {
        let harness = Harness([
            Exchange(
                endpoint: .signUpStart,
                fields: Form.start(Self.email),
                reply: Reply.error("user_already_exists", "AADSTS1003037: taken", codes: [1_003_037])
            ),
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.error("user_already_exists", "")),
        ])
        let described = try #require(await thrown { () async throws(SignUpStartError) in try await harness.client.signUp(username: Self.email) })
        #expect(described.errorDescription == "AADSTS1003037: taken")
        #expect(described.errorCodes == [1_003_037])
        let fixed = try #require(await thrown { () async throws(SignUpStartError) in try await harness.client.signUp(username: Self.email) })
        #expect(fixed.errorDescription == "User already exists")
        #expect(fixed.isUserAlreadyExists)
        harness.verify()
    }

    @Test @MainActor func invalidAttributesAtStartEndTheFlow() async throws {
        let reply = Reply.error(
            "invalid_grant",
            "bad",
            suberror: "attribute_validation_failed",
            extra: #","invalid_attributes":[{"name":"age"},{"name":"country"}]"#
        )
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email, ["attributes": #"{"age":"x"}"#]), reply: reply),
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email, ["attributes": #"{"age":"x"}"#]), reply: reply),
        ])
        guard case .attributesInvalid(let names) = try await harness.client.signUp(username: Self.email, attributes: ["age": "x"]) else {
            Issue.record("expected invalid attributes")
            return
        }
        #expect(names == ["age", "country"])
        let recorder = Recorder()
        let event = await recorder.next { harness.client.signUp(username: Self.email, attributes: ["age": "x"], delegate: recorder) }
        #expect(event.method == "onSignUpAttributesInvalid(attributeNames:)")
        #expect(event.values == ["age", "country"])
        harness.verify()
    }

    @Test @MainActor func emptyInputFailsWithoutARequest() async throws {
        let harness = Harness()
        let username = try #require(await thrown { () async throws(SignUpStartError) in try await harness.client.signUp(username: "") })
        #expect(username.isInvalidUsername)
        let password = try #require(
            await thrown { () async throws(SignUpStartError) in try await harness.client.signUp(username: Self.email, password: "") }
        )
        #expect(password.isInvalidPassword)
        let notJSON = try #require(
            await thrown { () async throws(SignUpStartError) in
                try await harness.client.signUp(username: Self.email, attributes: ["when": Date()])
            }
        )
        #expect(notJSON.kind == .generalError)

        let state = SignUpCodeRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: "ct2"
        )
        let recorder = Recorder()
        let empty = await recorder.next { state.submitCode(code: "", delegate: recorder) }
        #expect((empty.error as? VerifyCodeError)?.isInvalidCode == true)
        #expect(try empty.state(SignUpCodeRequiredState.self) === state)
        #expect(empty.error?.correlationId == state.correlationId)

        let passwordState = SignUpPasswordRequiredState(context: state.context, continuationToken: "ct5")
        let emptyPassword = await recorder.next { passwordState.submitPassword(password: "", delegate: recorder) }
        #expect((emptyPassword.error as? PasswordRequiredError)?.isInvalidPassword == true)
        #expect(try emptyPassword.state(SignUpPasswordRequiredState.self) === passwordState)
        #expect(harness.transport.seen.isEmpty)
        harness.verify()
    }

    /// A delegate that implements only the required method.
    @MainActor final class MinimalStartDelegate: SignUpStartDelegate {
        let received = OneShot<SignUpStartError>()
        func onSignUpStartError(error: SignUpStartError) { received.deliver(error) }
    }

    @Test @MainActor func anUnimplementedOptionalMethodBecomesAGeneralErrorThroughTheRequiredOne() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2")),
        ])
        let delegate = MinimalStartDelegate()
        let correlationId = UUID()
        let error = try #require(
            await delegate.received.wait {
                harness.client.signUp(username: Self.email, correlationId: correlationId, delegate: delegate)
            }
        )
        #expect(error.kind == .generalError)
        #expect(error.correlationId == correlationId)
        #expect(
            error.errorDescription
                == "Gatehouse has called the delegate method onSignUpCodeRequired(newState:sentTo:channelTargetType:codeLength:) that has not been implemented"
        )
        harness.verify()
    }

    /// Adopts two sign-up delegates that share `onSignUpCompleted(newState:)` and implements neither optional method.
    @MainActor final class SharedMethodsDelegate: SignUpVerifyCodeDelegate, SignUpPasswordRequiredDelegate {
        let received = OneShot<String>()
        func onSignUpVerifyCodeError(error: VerifyCodeError, newState: SignUpCodeRequiredState?) {
            received.deliver("verify: \(error.errorDescription ?? "")")
        }
        func onSignUpPasswordRequiredError(error: PasswordRequiredError, newState: SignUpPasswordRequiredState?) {
            received.deliver("password: \(error.errorDescription ?? "")")
        }
    }

    @Test @MainActor func sharedOptionalMethodsReportThroughTheRightProtocol() async throws {
        let harness = Harness([
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct5", grant: "password", ["password": "Str0ng-enough"]),
                reply: Reply.continuation("ct6")
            )
        ])
        let state = SignUpPasswordRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: "ct5"
        )
        let delegate = SharedMethodsDelegate()
        let message = await delegate.received.wait { state.submitPassword(password: "Str0ng-enough", delegate: delegate) }
        #expect(message == "password: Gatehouse has called the delegate method onSignUpCompleted(newState:) that has not been implemented")
        harness.verify()
    }

    @Test func aPasswordChallengeRightAfterStartIsAGeneralError() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.passwordChallenge("ct2")),
            Exchange(endpoint: .signUpStart, fields: Form.start(Self.email), reply: Reply.continuation("ct1")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct1"), reply: Reply.redirect),
        ])
        let password = try #require(await thrown { () async throws(SignUpStartError) in try await harness.client.signUp(username: Self.email) })
        #expect(password.kind == .generalError)
        let redirect = try #require(await thrown { () async throws(SignUpStartError) in try await harness.client.signUp(username: Self.email) })
        #expect(redirect.isBrowserRequired)
        #expect(redirect.errorDescription?.contains("the app cannot do this") == true)
        harness.verify()
    }

    @Test @MainActor func resendErrorsKeepTheStateOnlyForKnownErrors() async throws {
        let harness = Harness([
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct2"), reply: Reply.error("invalid_request", "bad")),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct2"), reply: Reply.redirect),
            Exchange(endpoint: .signUpChallenge, fields: Form.challenge("ct2"), reply: Reply.error("invalid_grant", "unknown to MSAL here")),
        ])
        let state = SignUpCodeRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: "ct2"
        )
        let recorder = Recorder()
        let known = await recorder.next { state.resendCode(delegate: recorder) }
        #expect(known.method == "onSignUpResendCodeError(error:newState:)")
        #expect(known.error?.isBrowserRequired == false)
        #expect(try known.state(SignUpCodeRequiredState.self) === state)
        let redirect = await recorder.next { state.resendCode(delegate: recorder) }
        #expect(redirect.error?.isBrowserRequired == true)
        #expect(redirect.state == nil)
        let unknown = await recorder.next { state.resendCode(delegate: recorder) }
        #expect(unknown.state == nil)
        harness.verify()
    }

    @Test @MainActor func submitCodeErrorsThatEndTheFlow() async throws {
        let harness = Harness([
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]),
                reply: Reply.error("verification_required", "verify", extra: #","continuation_token":"x","unverified_attributes":[{"name":"email"}]"#)
            ),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]),
                reply: Reply.error("invalid_grant", "bad", suberror: "attribute_validation_failed", extra: #","invalid_attributes":[{"name":"age"}]"#)
            ),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]),
                reply: Reply.error("expired_token", "late", codes: [552_003])
            ),
            Exchange(endpoint: .signUpContinue, fields: Form.proceed("ct2", grant: "oob", ["oob": "1"]), reply: Reply.redirect),
        ])
        let state = SignUpCodeRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: "ct2"
        )
        let recorder = Recorder()
        for browser in [false, false, false, true] {
            let event = await recorder.next { state.submitCode(code: "1", delegate: recorder) }
            #expect(event.method == "onSignUpVerifyCodeError(error:newState:)")
            #expect((event.error as? VerifyCodeError)?.isInvalidCode == false)
            #expect(event.error?.isBrowserRequired == browser)
            #expect(event.state == nil)
        }
        harness.verify()
    }

    @Test @MainActor func attributesStepErrorsAndInvalidValuesInDelegateForm() async throws {
        let harness = Harness([
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct3", grant: "attributes", ["attributes": #"{"country":"x"}"#]),
                reply: Reply.error(
                    "invalid_grant",
                    "bad",
                    suberror: "attribute_validation_failed",
                    extra: #","invalid_attributes":[{"name":"country"}]"#
                )
            ),
            Exchange(
                endpoint: .signUpContinue,
                fields: Form.proceed("ct3", grant: "attributes", ["attributes": #"{"country":"x"}"#]),
                reply: Reply.error("expired_token", "late")
            ),
        ])
        let state = SignUpAttributesRequiredState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: "ct3"
        )
        let recorder = Recorder()
        let invalid = await recorder.next { state.submitAttributes(attributes: ["country": "x"], delegate: recorder) }
        #expect(invalid.method == "onSignUpAttributesInvalid(attributeNames:newState:)")
        #expect(invalid.values == ["country"])
        #expect(try invalid.state(SignUpAttributesRequiredState.self) === state)
        let failed = await recorder.next { state.submitAttributes(attributes: ["country": "x"], delegate: recorder) }
        #expect(failed.method == "onSignUpAttributesRequiredError(error:)")
        harness.verify()
    }

    @Test @MainActor func signInAfterSignUpWithoutATokenFailsWithoutARequest() async throws {
        let harness = Harness()
        let state = SignInAfterSignUpState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: nil
        )
        let error = try #require(await thrown { () async throws(SignInAfterSignUpError) in try await state.signIn() })
        #expect(error.errorDescription == "Sign In is not available at this point, please use the standalone sign in methods")
        let recorder = Recorder()
        let event = await recorder.next { state.signIn(delegate: recorder) }
        #expect(event.method == "onSignInAfterSignUpError(error:)")
        #expect(harness.transport.seen.isEmpty)
    }

    @Test func signInAfterSignUpErrors() async throws {
        let harness = Harness([
            Exchange(
                endpoint: .token,
                fields: Form.token(grant: "continuation_token", ["continuation_token": "ct4", "username": Self.email]),
                reply: Reply.redirect
            ),
            Exchange(
                endpoint: .token,
                fields: Form.token(grant: "continuation_token", ["continuation_token": "ct4", "username": Self.email]),
                reply: Reply.error("expired_token", "late")
            ),
        ])
        let state = SignInAfterSignUpState(
            context: FlowContext(engine: harness.client.engine, correlationId: UUID(), username: Self.email),
            continuationToken: "ct4"
        )
        let redirect = try #require(await thrown { () async throws(SignInAfterSignUpError) in try await state.signIn() })
        #expect(redirect.isBrowserRequired)
        let expired = try #require(await thrown { () async throws(SignInAfterSignUpError) in try await state.signIn() })
        #expect(!expired.isBrowserRequired && expired.kind == .generalError)
        #expect(harness.client.getNativeAuthUserAccount() == nil)
        harness.verify()
    }
}
