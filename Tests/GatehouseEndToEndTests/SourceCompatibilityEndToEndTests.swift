import Foundation
import Gatehouse
import GatehouseDomain
import SourceCompatibilitySamples
import Testing

/// The MSAL-shaped samples (`Tests/SourceCompatibilitySamples`), unchanged but for the import and the server URL,
/// against a live server: their delegate callbacks arrive on the main actor and the flows end where the samples expect.
@Suite(.serialized) struct SourceCompatibilityEndToEndTests {
    /// Polls the view controller until `condition` holds (at most 30 s): the delegate answers arrive on their own.
    @MainActor
    func until(_ what: String, _ condition: @MainActor () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw SampleTimeout(description: "not \(what) within 30 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    struct SampleTimeout: Error, CustomStringConvertible {
        var description: String
    }

    @Test func theMSALSamplesSignUpResetAndSignIn() async throws {
        try await withLiveServer { server in try await walkTheSamples(server) }
    }

    @MainActor
    func walkTheSamples(_ server: LiveServer) async throws {
        do {
            let url = "\(server.base)/native/test-app"
            // Sign-up with a password and an attribute, the code from the email, sign-in after sign-up, a token.
            let signUp = SignUpViewController(serverURL: url, clientId: "ios-app")
            #expect(signUp.resultText.isEmpty, "\(signUp.resultText)")
            signUp.signUpPressed(email: "sample@example.com", password: "a sample password", country: "NZ")
            try await until("code required") { signUp.verifyCodeState != nil }
            #expect(signUp.resultText.hasPrefix("Verification code sent to s***e@e***e.com (email, 8 digits)"), "\(signUp.resultText)")
            signUp.submitCodePressed(code: "00000000")
            try await until("invalid code") { signUp.resultText == "Invalid code" }
            signUp.submitCodePressed(code: try await server.latestCode("sample@example.com"))
            try await until("an access token") { signUp.accessToken != nil }
            #expect(signUp.accountResult?.account.username == "sample@example.com")
            #expect(signUp.resultText.contains("Access token expires on"))

            // The same address again: the app hides which addresses have accounts, so the sample sees what any new
            // address sees (a code was sent) and its "User already exists" branch stays unused; the owner is told by email.
            let again = SignUpViewController(serverURL: url, clientId: "ios-app")
            again.signUpPressed(email: "sample@example.com", password: "another password", country: "NZ")
            try await until("answered") { again.verifyCodeState != nil || !again.resultText.isEmpty }
            #expect(again.resultText.hasPrefix("Verification code sent to s***e@e***e.com"), "\(again.resultText)")

            // Self-service password reset, then sign-in after reset.
            let reset = ResetPasswordViewController(serverURL: url, clientId: "ios-app")
            reset.resetPasswordPressed(email: "sample@example.com")
            try await until("reset code required") { reset.codeRequiredState != nil }
            reset.submitCodePressed(code: try await server.latestCode("sample@example.com"))
            try await until("new password required") { reset.passwordRequiredState != nil }
            reset.submitPasswordPressed(password: "the new sample password")
            try await until("signed in after reset") { reset.accountResult != nil }
            #expect(reset.resultText == "Signed in: sample@example.com")

            // Sign-in with the new password; the cached account at the next launch; sign-out.
            let signIn = SignInViewController(serverURL: url, clientId: "ios-app")
            signIn.signInPressed(email: "sample@example.com", password: "a sample password")
            try await until("the old password refused") { !signIn.resultText.isEmpty }
            #expect(signIn.resultText == "Invalid username or password")
            signIn.signInPressed(email: "sample@example.com", password: "the new sample password")
            try await until("signed in") { signIn.resultText == "Signed in: sample@example.com" }
            let relaunched = SignInViewController(serverURL: url, clientId: "ios-app")
            #expect(relaunched.accountResult?.account.username == "sample@example.com")
            relaunched.signOutPressed()
            #expect(SignInViewController(serverURL: url, clientId: "ios-app").accountResult == nil)

            // Sign-in with an emailed code, from a view model that is not main-actor-bound (the SwiftUI sample's shape).
            let model = try SignInWithCodeModel(serverURL: url, clientId: "ios-app")
            model.signIn(email: "sample@example.com")
            try await until("sign-in code required") { model.codeState != nil }
            #expect(model.message == "A 8-digit code went to s***e@e***e.com by email", "\(model.message)")
            model.submit(code: "00000000")
            try await until("wrong code") { model.message == "Wrong code" }
            model.submit(code: try await server.latestCode("sample@example.com"))
            try await until("signed in with a code") { model.accountResult != nil }
            #expect(model.preferredUsername == "sample@example.com")
            model.token()
            try await until("a token") { model.accessToken != nil }
            await model.accountResult?.signOut().value
        }
    }

    @Test func theMSALCodeSignUpSampleIsAskedForAPasswordAndAnAttribute() async throws {
        let settings = NativeAuthSettings(
            clientIds: ["ios-app"], signUpMethods: [.emailPassword], attributes: [.init(name: "country", required: true, regex: "^[A-Z]{2}$")]
        )
        try await withLiveServer(nativeAuth: settings) { server in try await walkTheCodeSignUp(server) }
    }

    @MainActor
    func walkTheCodeSignUp(_ server: LiveServer) async throws {
        let client = try MSALNativeAuthPublicClientApplication(
            clientId: "ios-app", serverURL: "\(server.base)/native/test-app", challengeTypes: [.OOB, .password]
        )
        let screen = SignUpWithCodeViewController(nativeAuth: client)
        screen.signUpPressed(email: "coded@example.com")
        try await until("code required") { screen.codeState != nil }
        screen.codePressed(try await server.latestCode("coded@example.com"))
        try await until("password required") { screen.passwordState != nil }
        screen.passwordPressed("short")
        try await until("a weak password refused") { screen.resultText == "Invalid password" }
        screen.passwordPressed("a coded passphrase")
        try await until("attributes required") { screen.attributesState != nil }
        #expect(screen.resultText == "Needs: country")
        screen.attributesPressed(country: "New Zealand")
        try await until("an invalid attribute") { screen.resultText == "Invalid: country" }
        screen.attributesPressed(country: "NZ")
        try await until("sign-up completed") { screen.signInState != nil }
        screen.signInPressed()
        try await until("signed in") { screen.resultText == "Signed in: coded@example.com" }
    }

    @Test @MainActor func aURLThatIsNotAServersNativeAuthAddressIsRefusedAtConstruction() {
        for bad in ["auth.example.com/native/app", "https://auth.example.com", "https://auth.example.com/native/", "ftp://x/native/app"] {
            let controller = SignInViewController(serverURL: bad, clientId: "ios-app")
            #expect(controller.resultText.hasPrefix("Unable to initialize MSAL"), "\(bad)")
        }
        let split = try? NativeAuthConfiguration(clientId: "ios-app", serverURL: "https://auth.example.com/prefix/native/my-app/", challengeTypes: [.OOB])
        #expect(split?.baseURL == "https://auth.example.com/prefix")
        #expect(split?.appId == "my-app")
    }
}
