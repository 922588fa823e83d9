import Foundation
@testable import Gatehouse
import GatehouseServer
import Testing

/// Changing the email address and reauthenticating by a mailed code through the SDK against a live server: from an
/// App-style `User` (async and completion forms), undone from the old address's link, and from a native-auth account.
@Suite struct EmailChangeEndToEndTests {
    /// Runs a completion-form call that answers an optional error.
    static func completion(_ call: (@escaping @Sendable ((any Error)?) -> Void) -> Void) async -> (any Error)? {
        await withCheckedContinuation { done in call { done.resume(returning: $0) } }
    }

    static let pastTheProofWindow = AccountSelfServiceEndToEndTests.pastTheProofWindow

    /// Whether `error` is the SDK's invalid-code error, matched as apps match it.
    static func isInvalidCode(_ error: (any Error)?) -> Bool {
        guard let error else { return false }
        if case AppError.invalidCode = error { return true }
        return false
    }

    @Test func changingTheEmailMovesTheSignInToTheNewAddress() async throws {
        try await withLiveServer { server in
            let user = try await server.signedInUser(server.app(), "before@example.com")
            #expect(user.profile.email == "before@example.com")

            // Signed in a moment ago: the login is the recent proof. Nothing changes until the code comes back.
            try await user.changeEmail(to: "after@example.com")
            let code = try await server.latestCode("after@example.com")
            _ = try await server.app().login(credentials: .emailPassword(email: "before@example.com", password: "correct horse"))

            // A wrong code is the invalid-code error: a BadRequest, told from the others without its text.
            let wrong = code == "00000000" ? "11111111" : "00000000"
            do {
                try await user.confirmEmailChange(code: wrong)
                Issue.record("expected the wrong code to be refused")
            } catch AppError.invalidCode {
                // the pattern matches
            } catch {
                Issue.record("expected AppError.invalidCode, got \(error)")
            }
            let refused = await #expect(throws: AppError.self) { try await user.confirmEmailChange(code: wrong) }
            #expect(refused?.code == .badRequest)
            #expect(refused?.httpStatus == 400)
            #expect(Self.isInvalidCode(refused))
            // Other BadRequests are not it.
            for other in ["not an address", "Before@example.com"] {
                let refusedAddress = await #expect(throws: AppError.self) { try await user.changeEmail(to: other) }
                #expect(refusedAddress?.code == .badRequest)
                #expect(!Self.isInvalidCode(refusedAddress))
            }

            // The completion form confirms; the profile is fetched anew.
            #expect(await Self.completion { user.confirmEmailChange(code: code, completion: $0) } == nil)
            #expect(user.profile.email == "after@example.com")
            #expect(user.isLoggedIn)

            let old = await #expect(throws: AppError.self) {
                _ = try await server.app().login(credentials: .emailPassword(email: "before@example.com", password: "correct horse"))
            }
            #expect(old?.code == .invalidPassword)
            let again = try await server.app().login(credentials: .emailPassword(email: "after@example.com", password: "correct horse"))
            #expect(again.id == user.id)
            #expect(again.profile.email == "after@example.com")
            // The old address was told, with a link to undo it.
            #expect(try await server.latestMail("before@example.com").contains("/email/undo?"))

            // The code is spent.
            let spent = await #expect(throws: AppError.self) { try await user.confirmEmailChange(code: code) }
            #expect(Self.isInvalidCode(spent))
        }
    }

    @Test func aMailedCodeReauthenticatesOnceTheProofIsOld() async throws {
        try await withLiveServer { server in
            let user = try await server.signedInUser(server.app(), "proof@example.com")
            server.clock.advance(by: Self.pastTheProofWindow)

            let required = await Self.completion { user.changeEmail(to: "proof-new@example.com", completion: $0) }
            #expect((required as? AppError)?.code == AppError.reauthenticationRequired)

            // The completion forms: a code to the account's address, then the code proves this session.
            let sent = await Self.completion { user.sendReauthenticationCode(completion: $0) }
            #expect(sent == nil)
            let code = try await server.latestCode("proof@example.com")
            let proven = await Self.completion { user.reauthenticate(code: code, completion: $0) }
            #expect(proven == nil)
            let sessions = try await user.sessions()
            let current = try #require(sessions.first { $0.isCurrent })
            #expect(current.authenticationMethods.contains("otp"))
            #expect(abs(current.authenticatedAt.timeIntervalSince(server.clock.now)) < 60)

            try await user.changeEmail(to: "proof-new@example.com")
            let newCode = try await server.latestCode("proof-new@example.com")
            try await user.confirmEmailChange(code: newCode)
            #expect(user.profile.email == "proof-new@example.com")

            // A reauthentication code is spent by its use; later still, the current password is the other proof.
            let spent = await Self.completion { user.reauthenticate(code: code, completion: $0) }
            #expect(Self.isInvalidCode(spent))
            server.clock.advance(by: Self.pastTheProofWindow)
            await #expect(throws: AppError.self) { try await user.changeEmail(to: "proof-third@example.com") }
            let wrongPassword = await #expect(throws: AppError.self) {
                try await user.changeEmail(to: "proof-third@example.com", currentPassword: "not my password")
            }
            #expect(wrongPassword?.code == .invalidPassword)
            #expect(wrongPassword?.httpStatus == 403)
            try await user.changeEmail(to: "proof-third@example.com", currentPassword: "correct horse")
            let thirdCode = try await server.latestCode("proof-third@example.com")
            try await user.confirmEmailChange(code: thirdCode)
            _ = try await server.app().login(credentials: .emailPassword(email: "proof-third@example.com", password: "correct horse"))
        }
    }

    @Test func aCodeIsGoodOnlyInTheSessionThatAskedForIt() async throws {
        try await withLiveServer { server in
            let phone = try await server.signedInUser(server.app(), "bound@example.com")
            let laptop = try await server.app().login(credentials: .emailPassword(email: "bound@example.com", password: "correct horse"))
            #expect(laptop.id == phone.id)

            // The phone's change code, tried by the laptop (the same user, another session): the invalid-code error.
            try await phone.changeEmail(to: "bound-new@example.com")
            let changeCode = try await server.latestCode("bound-new@example.com")
            let elsewhere = await Self.completion { laptop.confirmEmailChange(code: changeCode, completion: $0) }
            #expect(Self.isInvalidCode(elsewhere))
            switch elsewhere {
            case AppError.invalidCode?: break
            default: Issue.record("expected AppError.invalidCode, got \(String(describing: elsewhere))")
            }

            // So is the phone's reauthentication code.
            server.clock.advance(by: Self.pastTheProofWindow)
            try await phone.sendReauthenticationCode()
            let proofCode = try await server.latestCode("bound@example.com")
            let stolen = await #expect(throws: AppError.self) { try await laptop.reauthenticate(code: proofCode) }
            #expect(Self.isInvalidCode(stolen))
            #expect(laptop.isLoggedIn)

            // In the phone's own session both still work: the laptop's tries were not its guesses.
            try await phone.reauthenticate(code: proofCode)
            try await phone.confirmEmailChange(code: changeCode)
            #expect(phone.profile.email == "bound-new@example.com")
            // The laptop's session stays; its cached profile is as of its login until it fetches it.
            #expect(laptop.profile.email == "bound@example.com")
            #expect(try await laptop.refreshProfile().email == "bound-new@example.com")
        }
    }

    @Test func undoingFromTheOldAddressEndsEverySessionAndAResetSignsInAgain() async throws {
        try await withLiveServer { server in
            let phone = try await server.signedInUser(server.app(), "owner@example.com")
            let laptop = try await server.app().login(credentials: .emailPassword(email: "owner@example.com", password: "correct horse"))

            // Someone holding the phone moves the account to their address.
            try await phone.changeEmail(to: "taker@example.com")
            let takerCode = try await server.latestCode("taker@example.com")
            try await phone.confirmEmailChange(code: takerCode)
            #expect(phone.profile.email == "taker@example.com")

            // The owner opens the link the old address got, on an app with no one signed in.
            let link = try await server.latestLink("owner@example.com")
            let auth = server.app().emailPasswordAuth
            #expect(await Self.completion { auth.undoEmailChange(token: link.token, tokenId: link.tokenId, completion: $0) } == nil)

            // Every session ended: each device's next call fails, and its user is logged out here.
            for device in [phone, laptop] {
                let ended = await #expect(throws: AppError.self) { _ = try await device.refreshProfile() }
                #expect(ended?.httpStatus == 401)
                #expect(device.state == .loggedOut)
            }
            // The link is spent.
            let spent = await #expect(throws: AppError.self) { try await auth.undoEmailChange(token: link.token, tokenId: link.tokenId) }
            #expect(spent?.code == .badRequest)
            #expect(!Self.isInvalidCode(spent))

            // Neither address signs in with the password: the new one is gone, and so is the password.
            for email in ["taker@example.com", "owner@example.com"] {
                let refused = await #expect(throws: AppError.self) {
                    _ = try await server.app().login(credentials: .emailPassword(email: email, password: "correct horse"))
                }
                #expect(refused?.code == .invalidPassword)
            }

            // A reset to the old address lets its owner back in, as the same user.
            try await auth.sendResetPasswordEmail("owner@example.com")
            let reset = try await server.latestLink("owner@example.com")
            #expect(reset.tokenId != link.tokenId)
            try await auth.resetPassword(to: "a new long passphrase", token: reset.token, tokenId: reset.tokenId)
            let back = try await server.app().login(credentials: .emailPassword(email: "owner@example.com", password: "a new long passphrase"))
            #expect(back.id == phone.id)
            #expect(back.profile.email == "owner@example.com")
        }
    }

    @Test func aNativeAccountChangesItsEmail() async throws {
        try await withLiveServer { server in
            let client = server.nativeClient()
            let account = try await OneSessionEndToEndTests.signedUp(client, server, "native-old@example.com")
            #expect(account.account.username == "native-old@example.com")

            server.clock.advance(by: Self.pastTheProofWindow)
            do throws(AccountManagementError) {
                try await account.changeEmail(to: "native-new@example.com")
                Issue.record("expected reauthentication to be required")
            } catch {
                #expect(error.isReauthenticationRequired)
            }

            // Reauthenticate with a mailed code: the delegate form sends it.
            try await UpdateReceiver().run { account.sendReauthenticationCode(delegate: $0) }
            let proof = try await server.latestCode("native-old@example.com")
            do throws(AccountManagementError) {
                try await account.reauthenticate(code: proof == "00000000" ? "11111111" : "00000000")
                Issue.record("expected a wrong code to be refused")
            } catch {
                #expect(error.isInvalidCode)
                #expect(!error.isInvalidRequest)
            }
            try await account.reauthenticate(code: proof)

            // An App-style user takes the address first: the account's code then answers isUserAlreadyExists.
            try await account.changeEmail(to: "native-new@example.com")
            let lostCode = try await server.latestCode("native-new@example.com")
            let rival = try await server.signedInUser(server.app(), "rival@example.com")
            try await rival.changeEmail(to: "native-new@example.com")
            let rivalCode = try await server.latestCode("native-new@example.com")
            try await rival.confirmEmailChange(code: rivalCode)
            let taken = await UpdateReceiver().error { account.confirmEmailChange(code: lostCode, delegate: $0) }
            #expect(taken?.isUserAlreadyExists == true)
            let conflict = await #expect(throws: AppError.self) { try await account.user.confirmEmailChange(code: lostCode) }
            #expect(conflict?.code == AppError.accountNameInUse)

            // Another address, confirmed through the delegate form.
            try await account.changeEmail(to: "native-next@example.com")
            let code = try await server.latestCode("native-next@example.com")
            try await UpdateReceiver().run { account.confirmEmailChange(code: code, delegate: $0) }
            #expect(account.user.profile.email == "native-next@example.com")
            #expect(client.getNativeAuthUserAccount()?.account.username == "native-next@example.com")
            _ = try await account.getSessions()

            guard case .completed(let again) = try await server.nativeClient().signIn(username: "native-next@example.com", password: "correct horse")
            else {
                Issue.record("expected the new address to sign in")
                return
            }
            #expect(again.account.userId == account.account.userId)
            let old = await #expect(throws: SignInStartError.self) {
                _ = try await server.nativeClient().signIn(username: "native-old@example.com", password: "correct horse")
            }
            #expect(old?.isInvalidCredentials == true || old?.isUserNotFound == true)
        }
    }
}

/// Receives ``AccountUpdateDelegate`` answers for a test.
@MainActor final class UpdateReceiver: AccountUpdateDelegate {
    private var waiter: CheckedContinuation<AccountManagementError?, Never>?

    /// Runs a delegate-form call; its error, or nil when it completed.
    func error(_ call: @MainActor (UpdateReceiver) -> Void) async -> AccountManagementError? {
        await withCheckedContinuation { continuation in
            waiter = continuation
            call(self)
        }
    }

    /// Runs a delegate-form call and throws its error.
    func run(_ call: @MainActor (UpdateReceiver) -> Void) async throws {
        if let error = await error(call) { throw error }
    }

    func onAccountUpdateCompleted() {
        waiter?.resume(returning: nil)
        waiter = nil
    }

    func onAccountUpdateError(error: AccountManagementError) {
        waiter?.resume(returning: error)
        waiter = nil
    }
}
