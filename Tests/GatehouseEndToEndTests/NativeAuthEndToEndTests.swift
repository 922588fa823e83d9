import Foundation
@testable import Gatehouse
import GatehouseDomain
import GatehouseServer
import GatehouseWire
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The SDK's native auth client against a live server: every flow end to end, with codes read from the delivered
/// email.
@Suite struct NativeAuthEndToEndTests {
    /// `GET /api/client/v2.0/auth/profile` with `accessToken`: the user's profile data, or nil on 401.
    private func profile(_ server: LiveServer, _ accessToken: String) async throws -> [String: Any]? {
        var request = URLRequest(url: URL(string: "\(server.base)/api/client/v2.0/auth/profile")!)
        request.setValue("Bearer \(accessToken)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { return nil }
        return try JSONSerialization.jsonObject(with: data) as? [String: Any]
    }

    @Test func signUpWithAPasswordAndACodeThenSignInAndACachedAccount() async throws {
        try await withLiveServer { server in
            let store = InMemoryUserStore()
            let client = server.nativeClient(store: store)
            guard case .codeRequired(let state, let sentTo, let channel, let length) = try await client.signUp(
                username: "ada@example.com", password: "correct horse", attributes: ["country": "GB"]
            ) else { Issue.record("expected a code"); return }
            #expect(sentTo == "a***a@e***e.com")
            #expect(channel.isEmailType)
            #expect(length == 8)

            // A wrong code keeps the state: the same object takes the right one.
            let wrong = await #expect(throws: VerifyCodeError.self) { try await state.submitCode("00000000") }
            #expect(wrong?.isInvalidCode == true)
            guard case .completed(let afterSignUp) = try await state.submitCode(try await server.latestCode("ada@example.com")) else {
                Issue.record("expected the sign-up to complete")
                return
            }
            let account = try await afterSignUp.signIn()
            #expect(account.account.username == "ada@example.com")
            #expect(account.idToken != nil)
            let token = try await account.getAccessToken()
            let data = try #require(try await profile(server, token.accessToken)?["data"] as? [String: Any])
            #expect(data["country"] as? String == "GB")

            // The account is cached: a new client (a restarted app) finds it without signing in again.
            let restarted = server.nativeClient(store: store)
            let cached = try #require(restarted.getNativeAuthUserAccount())
            #expect(cached.account.userId == account.account.userId)
            let again = try await cached.getAccessToken()
            #expect(try await profile(server, again.accessToken) != nil)
            // Signing out ends the session on the server: its access tokens stop working at once.
            await cached.signOut().value
            #expect(server.nativeClient(store: store).getNativeAuthUserAccount() == nil)
            #expect(try await profile(server, again.accessToken) == nil)

            // The password works for a new sign-in, and on the Client API.
            guard case .completed(let signedIn) = try await client.signIn(username: "ada@example.com", password: "correct horse") else {
                Issue.record("expected a password sign-in")
                return
            }
            #expect(signedIn.account.userId == account.account.userId)
            let app = server.app()
            _ = try await app.login(credentials: .emailPassword(email: "ada@example.com", password: "correct horse"))
        }
    }

    @Test func aPasswordAskedAfterTheCodeAndAttributesAcrossTwoSteps() async throws {
        let settings = NativeAuthSettings(
            clientIds: ["ios-app"], signUpMethods: [.emailPassword],
            attributes: [.init(name: "displayName", required: true), .init(name: "country", regex: "^[A-Z]{2}$")]
        )
        try await withLiveServer(nativeAuth: settings) { server in
            let client = server.nativeClient()
            guard case .codeRequired(let state, _, _, _) = try await client.signUp(username: "bo@example.com") else {
                Issue.record("expected a code")
                return
            }
            guard case .passwordRequired(let passwordState) = try await state.submitCode(try await server.latestCode("bo@example.com")) else {
                Issue.record("expected the server to ask for a password")
                return
            }
            let weak = await #expect(throws: PasswordRequiredError.self) { try await passwordState.submitPassword("short") }
            #expect(weak?.isInvalidPassword == true)
            guard case .attributesRequired(let required, let attributesState) = try await passwordState.submitPassword("correct horse") else {
                Issue.record("expected the server to ask for attributes")
                return
            }
            #expect(required.map(\.name) == ["displayName"])
            #expect(required.first?.required == true)
            guard case .attributesInvalid(let invalid, let sameState) = try await attributesState.submitAttributes(["displayName": "Bo", "country": "Wales"]) else {
                Issue.record("expected the country to be refused")
                return
            }
            #expect(invalid == ["country"])
            guard case .completed(let afterSignUp) = try await sameState.submitAttributes(["displayName": "Bo", "country": "GB"]) else {
                Issue.record("expected the sign-up to complete")
                return
            }
            let account = try await afterSignUp.signIn()
            #expect(account.account.claims?.name == "Bo")
        }
    }

    @Test func signInWithACodeForACodeOnlyAccountAndResend() async throws {
        let clock = ManualClock()
        try await withLiveServer(clock: clock) { server in
            let client = server.nativeClient()
            guard case .codeRequired(let state, _, _, _) = try await client.signUp(username: "cy@example.com") else {
                Issue.record("expected a code")
                return
            }
            guard case .completed = try await state.submitCode(try await server.latestCode("cy@example.com")) else {
                Issue.record("expected the sign-up to complete")
                return
            }
            // The app hides user existence, so a client that takes passwords is asked for one whatever the account;
            // a code-only account signs in with a client that takes codes.
            guard case .codeRequired(let signInState, _, _, _) = try await server.nativeClient(challengeTypes: [.oob]).signIn(username: "cy@example.com")
            else {
                Issue.record("a code-only account signs in with a code")
                return
            }
            let first = try await server.latestCode("cy@example.com")
            // Too soon for another code; then, a minute later, a new code replaces the first.
            let early = await #expect(throws: ResendCodeError.self) { try await signInState.resendCode() }
            #expect(early?.isBrowserRequired == false)
            clock.advance(by: 61)
            let resent = try await signInState.resendCode()
            let second = try await server.latestCode("cy@example.com")
            if first != second {
                let stale = await #expect(throws: VerifyCodeError.self) { try await resent.newState.submitCode(first) }
                #expect(stale?.isInvalidCode == true)
            }
            let account = try await resent.newState.submitCode(second)
            #expect(account.account.username == "cy@example.com")
        }
    }

    @Test func resetPasswordThenSignInAfterReset() async throws {
        try await withLiveServer { server in
            let app = server.app()
            try await server.signUp(app, "dee@example.com", "old password")
            let client = server.nativeClient()
            let sent = try await client.resetPassword(username: "dee@example.com")
            #expect(sent.sentTo == "d***e@e***e.com")
            let wrong = await #expect(throws: VerifyCodeError.self) { try await sent.newState.submitCode("00000000") }
            #expect(wrong?.isInvalidCode == true)
            let passwordState = try await sent.newState.submitCode(try await server.latestCode("dee@example.com"))
            let weak = await #expect(throws: PasswordRequiredError.self) { try await passwordState.submitPassword("x") }
            #expect(weak?.isInvalidPassword == true)
            let afterReset = try await passwordState.submitPassword("new password")
            let account = try await afterReset.signIn()
            #expect(account.account.username == "dee@example.com")
            _ = try await app.login(credentials: .emailPassword(email: "dee@example.com", password: "new password"))
            await #expect(throws: AppError.self) {
                _ = try await app.login(credentials: .emailPassword(email: "dee@example.com", password: "old password"))
            }
        }
    }

    @Test func refreshTokensRotateAndExpiredAccessTokensAreRefreshed() async throws {
        let clock = ManualClock()
        try await withLiveServer(clock: clock) { server in
            let client = server.nativeClient()
            guard case .codeRequired(let state, _, _, _) = try await client.signUp(username: "eve@example.com", password: "correct horse"),
                case .completed(let afterSignUp) = try await state.submitCode(try await server.latestCode("eve@example.com"))
            else {
                Issue.record("expected a completed sign-up")
                return
            }
            let account = try await afterSignUp.signIn()
            let first = try await account.getAccessToken(parameters: { let p = GetAccessTokenParameters(); p.returnRefreshToken = true; return p }())
            let cached = try await account.getAccessToken()
            #expect(cached.accessToken == first.accessToken)

            clock.advance(by: 1801)
            let refreshed = try await account.getAccessToken(parameters: { let p = GetAccessTokenParameters(); p.returnRefreshToken = true; return p }())
            #expect(refreshed.accessToken != first.accessToken)
            #expect(refreshed.refreshToken != nil && refreshed.refreshToken != first.refreshToken)
            #expect(try await profile(server, refreshed.accessToken) != nil)
            // The first refresh token was rotated away; well after the reuse window it revokes the session.
            clock.advance(by: 120)
            let replay = try await server.nativeTokensByRefresh(try #require(first.refreshToken))
            #expect(replay == 400)
            let revoked = await #expect(throws: RetrieveAccessTokenError.self) { try await account.getAccessToken(forceRefresh: true) }
            #expect(revoked != nil)
        }
    }

    @Test func serverAnswersBecomeTheSpecsErrors() async throws {
        try await withLiveServer(reveal: true) { server in
            let client = server.nativeClient()
            let app = server.app()
            try await server.signUp(app, "taken@example.com")
            let taken = await #expect(throws: SignUpStartError.self) { try await client.signUp(username: "taken@example.com", password: "correct horse") }
            #expect(taken?.isUserAlreadyExists == true)
            let weak = await #expect(throws: SignUpStartError.self) { try await client.signUp(username: "new@example.com", password: "short") }
            #expect(weak?.isInvalidPassword == true)
            let unknown = await #expect(throws: SignInStartError.self) { try await client.signIn(username: "ghost@example.com") }
            #expect(unknown?.isUserNotFound == true)
            let unknownReset = await #expect(throws: ResetPasswordStartError.self) { try await client.resetPassword(username: "ghost@example.com") }
            #expect(unknownReset?.isUserNotFound == true)
            let wrongPassword = await #expect(throws: SignInStartError.self) {
                try await client.signIn(username: "taken@example.com", password: "wrong horse")
            }
            #expect(wrongPassword?.isInvalidCredentials == true)
            if case .attributesInvalid(let names) = try await client.signUp(username: "f@example.com", attributes: ["country": "France"]) {
                #expect(names == ["country"])
            } else {
                Issue.record("expected the attributes to be refused")
            }
        }
    }

    @Test func aClientThatCannotDoWhatTheAppNeedsIsSentToTheBrowser() async throws {
        try await withLiveServer(nativeAuth: NativeAuthSettings(clientIds: ["ios-app"], signUpMethods: [.emailPassword])) { server in
            let client = server.nativeClient(challengeTypes: [.oob])
            let error = await #expect(throws: SignUpStartError.self) { try await client.signUp(username: "g@example.com") }
            #expect(error?.isBrowserRequired == true)
        }
    }

    @Test func anExpiredFlowIsAGeneralErrorNotAWrongCode() async throws {
        let clock = ManualClock()
        try await withLiveServer(clock: clock) { server in
            let client = server.nativeClient()
            guard case .codeRequired(let state, _, _, _) = try await client.signUp(username: "h@example.com") else {
                Issue.record("expected a code")
                return
            }
            let code = try await server.latestCode("h@example.com")
            clock.advance(by: 601)
            let error = await #expect(throws: VerifyCodeError.self) { try await state.submitCode(code) }
            #expect(error?.isInvalidCode == false)
            #expect(error?.errorCodes == [NativeAuthErrorCode.expiredToken])
        }
    }

    @Test func theDelegateFormsWalkTheSameFlow() async throws {
        try await withLiveServer { server in
            let client = server.nativeClient()
            let driver = await SignUpDriver()
            client.signUp(parameters: SignUpParameters(username: "ivy@example.com"), delegate: driver)
            guard case .codeRequired(let state, let sentTo) = await driver.next() else {
                Issue.record("expected onSignUpCodeRequired")
                return
            }
            #expect(sentTo == "i***y@e***e.com")
            state.submitCode(code: "00000000", delegate: driver)
            guard case .verifyError(let invalid, let kept) = await driver.next() else {
                Issue.record("expected onSignUpVerifyCodeError")
                return
            }
            #expect(invalid)
            #expect(kept === state)
            state.submitCode(code: try await server.latestCode("ivy@example.com"), delegate: driver)
            guard case .completed(let afterSignUp) = await driver.next() else {
                Issue.record("expected onSignUpCompleted")
                return
            }
            afterSignUp.signIn(parameters: SignInAfterSignUpParameters(), delegate: driver)
            guard case .signedIn(let account) = await driver.next() else {
                Issue.record("expected onSignInCompleted")
                return
            }
            #expect(account.account.username == "ivy@example.com")
        }
    }

    /// A code asked for again too soon is refused with `slow_down` before the flow is touched: the delegate gets the
    /// state back, and the code already sent still signs the user up on it.
    @Test func aResendRefusedAsTooSoonLeavesTheFlowUsable() async throws {
        try await withLiveServer { server in
            let driver = SignUpDriver()
            server.nativeClient().signUp(parameters: SignUpParameters(username: "jo@example.com"), delegate: driver)
            guard case .codeRequired(let state, _) = await driver.next() else {
                Issue.record("expected onSignUpCodeRequired")
                return
            }
            let code = try await server.latestCode("jo@example.com")
            state.resendCode(delegate: driver)
            guard case .resendError(let codes, let kept) = await driver.next() else {
                Issue.record("expected onSignUpResendCodeError")
                return
            }
            #expect(codes == [NativeAuthErrorCode.resendTooSoon])
            #expect(kept === state)
            #expect(try await server.mails("jo@example.com").count == 1)
            state.submitCode(code: code, delegate: driver)
            guard case .completed = await driver.next() else {
                Issue.record("expected onSignUpCompleted on the state handed back")
                return
            }
        }
    }
}

/// Receives the sign-up delegate callbacks (on the main actor) and hands them to the test in order.
@MainActor
final class SignUpDriver: SignUpStartDelegate, SignUpVerifyCodeDelegate, SignUpResendCodeDelegate, SignInAfterSignUpDelegate {
    enum Event: Sendable {
        case codeRequired(SignUpCodeRequiredState, sentTo: String)
        case verifyError(invalidCode: Bool, newState: SignUpCodeRequiredState?)
        case resendError(errorCodes: [Int], newState: SignUpCodeRequiredState?)
        case completed(SignInAfterSignUpState)
        case signedIn(NativeAuthUserAccountResult)
        case failed(String)
    }

    private var queue: [Event] = []
    private var waiter: CheckedContinuation<Event, Never>?

    /// The next callback.
    func next() async -> Event {
        if !queue.isEmpty { return queue.removeFirst() }
        return await withCheckedContinuation { waiter = $0 }
    }

    private func push(_ event: Event) {
        if let waiter {
            self.waiter = nil
            waiter.resume(returning: event)
        } else {
            queue.append(event)
        }
    }

    func onSignUpStartError(error: SignUpStartError) { push(.failed("start: \(error)")) }
    func onSignUpCodeRequired(newState: SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int) {
        push(.codeRequired(newState, sentTo: sentTo))
    }
    func onSignUpVerifyCodeError(error: VerifyCodeError, newState: SignUpCodeRequiredState?) {
        push(.verifyError(invalidCode: error.isInvalidCode, newState: newState))
    }
    func onSignUpResendCodeError(error: ResendCodeError, newState: SignUpCodeRequiredState?) {
        push(.resendError(errorCodes: error.errorCodes, newState: newState))
    }
    func onSignUpCompleted(newState: SignInAfterSignUpState) { push(.completed(newState)) }
    func onSignInAfterSignUpError(error: SignInAfterSignUpError) { push(.failed("sign-in: \(error)")) }
    func onSignInCompleted(result: NativeAuthUserAccountResult) { push(.signedIn(result)) }
}

extension LiveServer {
    /// A raw refresh grant: the HTTP status.
    func nativeTokensByRefresh(_ refreshToken: String) async throws -> Int {
        var request = URLRequest(url: URL(string: "\(base)/native/test-app/oauth2/v2.0/token")!)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = FormURLEncoding.encode([("client_id", "ios-app"), ("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }
}
