import Foundation
@testable import Gatehouse
import GatehouseServer
import Testing

/// Account self-service through the SDK against a live server: sessions, reauthentication, password change and
/// unlinking, from an App-style `User` and from a native-auth account.
@Suite struct AccountSelfServiceEndToEndTests {
    /// Runs a completion-form call that answers a value.
    func completion<T: Sendable>(_ call: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void) async -> Result<T, any Error> {
        await withCheckedContinuation { done in call { done.resume(returning: $0) } }
    }

    /// Runs a completion-form call that answers an optional error.
    func completion(_ call: (@escaping @Sendable ((any Error)?) -> Void) -> Void) async -> (any Error)? {
        await withCheckedContinuation { done in call { done.resume(returning: $0) } }
    }

    /// More than the app's recent-proof window (300 seconds by default), less than an access token's life.
    static let pastTheProofWindow: TimeInterval = 301

    @Test func changingThePasswordEndsTheOtherDevicesSessionsAndKeepsThisOne() async throws {
        try await withLiveServer { server in
            let phone = try await server.signedInUser(server.app(), "change@example.com")
            let laptop = try await server.app().login(credentials: .emailPassword(email: "change@example.com", password: "correct horse"))

            // Signed in a moment ago: the login is the recent proof.
            try await phone.changePassword(to: "a new long passphrase")

            let old = await #expect(throws: AppError.self) {
                _ = try await server.app().login(credentials: .emailPassword(email: "change@example.com", password: "correct horse"))
            }
            #expect(old?.code == .invalidPassword)
            let again = try await server.app().login(credentials: .emailPassword(email: "change@example.com", password: "a new long passphrase"))
            #expect(again.id == phone.id)

            // The laptop's session ended on the server: its next call fails and logs it out here.
            let ended = await #expect(throws: AppError.self) { _ = try await laptop.refreshProfile() }
            #expect(ended?.httpStatus == 401)
            #expect(laptop.state == .loggedOut)
            // The phone's stays, access and refresh token alike.
            #expect(try await phone.refreshProfile().email == "change@example.com")
            try await phone.refreshCustomData()
            #expect(phone.isLoggedIn)
        }
    }

    @Test func reauthenticationIsRequiredOnceTheProofIsOld() async throws {
        try await withLiveServer { server in
            let user = try await server.signedInUser(server.app(), "reauth@example.com")
            server.clock.advance(by: Self.pastTheProofWindow)

            // The completion form: the error is the typed code, matchable without its text.
            let required = await completion { user.changePassword(to: "a new long passphrase", completion: $0) }
            #expect((required as? AppError)?.code == AppError.reauthenticationRequired)
            #expect((required as? AppError)?.httpStatus == 403)
            switch required {
            case AppError.reauthenticationRequired?: break
            default: Issue.record("expected reauthenticationRequired, got \(String(describing: required))")
            }
            #expect(user.isLoggedIn)

            #expect(await completion { user.reauthenticate(password: "correct horse", completion: $0) } == nil)
            try await user.changePassword(to: "a new long passphrase")
            _ = try await server.app().login(credentials: .emailPassword(email: "reauth@example.com", password: "a new long passphrase"))

            // Later still: the current password is the proof.
            server.clock.advance(by: Self.pastTheProofWindow)
            await #expect(throws: AppError.self) { try await user.changePassword(to: "a third passphrase here") }
            try await user.changePassword(to: "a third passphrase here", currentPassword: "a new long passphrase")
            _ = try await server.app().login(credentials: .emailPassword(email: "reauth@example.com", password: "a third passphrase here"))
        }
    }

    @Test func aWrongCurrentPasswordIsTheInvalidPasswordError() async throws {
        try await withLiveServer { server in
            let user = try await server.signedInUser(server.app(), "wrong@example.com")
            server.clock.advance(by: Self.pastTheProofWindow)

            let wrong = await #expect(throws: AppError.self) {
                try await user.changePassword(to: "a new long passphrase", currentPassword: "not my password")
            }
            #expect(wrong?.code == .invalidPassword)
            #expect(wrong?.httpStatus == 403)
            let wrongProof = await #expect(throws: AppError.self) { try await user.reauthenticate(password: "not my password") }
            #expect(wrongProof?.code == AppError.invalidPassword)
            // Not a 401: the session is untouched, and the old password still signs in.
            #expect(user.isLoggedIn)
            _ = try await user.refreshProfile()
            _ = try await server.app().login(credentials: .emailPassword(email: "wrong@example.com", password: "correct horse"))
        }
    }

    @Test func sessionsShowEveryDeviceAndEndOneOrAllOthers() async throws {
        try await withLiveServer { server in
            let phone = try await server.signedInUser(server.app(), "devices@example.com")
            let laptop = try await server.app().login(credentials: .emailPassword(email: "devices@example.com", password: "correct horse"))

            let sessions = try await completion { phone.sessions($0) }.get()
            #expect(sessions.count == 2)
            let current = try #require(sessions.first { $0.isCurrent })
            #expect(sessions.filter(\.isCurrent).count == 1)
            #expect(current.deviceId == phone.deviceId)
            #expect(Set(sessions.map(\.deviceId)) == [phone.deviceId, laptop.deviceId])
            #expect(current.kind == .firstParty)
            #expect(current.authenticationMethods.contains("pwd"))
            #expect(current.device["sdk"]??.stringValue == "Gatehouse Swift")
            #expect(current.clientId == nil)
            #expect(current.createdAt <= current.lastUsedAt && current.lastUsedAt < current.expiresAt)
            #expect(abs(current.authenticatedAt.timeIntervalSince(server.clock.now)) < 120)
            // The laptop sees the same two, with its own marked.
            let fromLaptop = try await laptop.sessions()
            #expect(Set(fromLaptop.map(\.id)) == Set(sessions.map(\.id)))
            #expect(fromLaptop.first { $0.isCurrent }?.deviceId == laptop.deviceId)

            // End the laptop's: its next call fails, and the list is the phone's alone.
            let laptopSession = try #require(sessions.first { !$0.isCurrent })
            try await phone.endSession(id: laptopSession.id)
            await #expect(throws: AppError.self) { _ = try await laptop.refreshProfile() }
            #expect(laptop.state == .loggedOut)
            #expect(try await phone.sessions().map(\.id) == [current.id])
            let gone = await #expect(throws: AppError.self) { try await phone.endSession(id: laptopSession.id) }
            #expect(gone?.code == AppError.sessionNotFound)
            #expect(gone?.httpStatus == 404)

            // End all others: two more devices go, the phone stays.
            let tablet = try await server.app().login(credentials: .emailPassword(email: "devices@example.com", password: "correct horse"))
            let desktop = try await server.app().login(credentials: .emailPassword(email: "devices@example.com", password: "correct horse"))
            #expect(try await phone.sessions().count == 3)
            #expect(await completion { phone.endOtherSessions(completion: $0) } == nil)
            #expect(try await phone.sessions().map(\.id) == [current.id])
            for other in [tablet, desktop] {
                await #expect(throws: AppError.self) { _ = try await other.refreshProfile() }
                #expect(other.state == .loggedOut)
            }

            // Ending its own session logs the phone out here too.
            try await phone.endSession(id: current.id)
            #expect(phone.state == .loggedOut)
            #expect(phone.accessToken == nil)
        }
    }

    @Test func unlinkingALinkedIdentityButNeverTheLastOne() async throws {
        try await withLiveServer { server in
            let app = server.app()
            let user = try await server.signedInUser(app, "unlink@example.com")
            let jwt = try ProviderEndToEndTests.jwt(sub: "backend-unlink", name: "Unlink", now: server.clock.now)
            _ = try await user.linkUser(credentials: .jwt(token: jwt))
            #expect(Set(user.identities.map(\.providerType)) == ["local-userpass", "custom-token"])

            let linked = try #require(user.identities.first { $0.providerType == "custom-token" })
            #expect(await completion { user.unlinkIdentity(linked, completion: $0) } == nil)
            #expect(user.identities.map(\.providerType) == ["local-userpass"])
            // The token no longer signs in as this user.
            let fresh = try ProviderEndToEndTests.jwt(sub: "backend-unlink", name: "Unlink", now: server.clock.now)
            #expect(try await server.app().login(credentials: .jwt(token: fresh)).id != user.id)

            let unknown = await #expect(throws: AppError.self) {
                try await user.unlinkIdentity(UserIdentity(providerType: "custom-token", identifier: "nobody/with?odd#id"))
            }
            #expect(unknown?.code == AppError.identityNotFound)
            #expect(unknown?.httpStatus == 404)

            let last = try #require(user.identities.first)
            let refused = await #expect(throws: AppError.self) { try await user.unlinkIdentity(last) }
            #expect(refused?.code == .badRequest)
            #expect(user.identities.map(\.providerType) == ["local-userpass"])
            _ = try await server.app().login(credentials: .emailPassword(email: "unlink@example.com", password: "correct horse"))

            // Unlinking changes a credential: an old proof is not enough.
            _ = try await user.linkUser(credentials: .jwt(token: try ProviderEndToEndTests.jwt(sub: "backend-again", name: "Again", now: server.clock.now)))
            server.clock.advance(by: Self.pastTheProofWindow)
            let again = try #require(user.identities.first { $0.providerType == "custom-token" })
            let required = await #expect(throws: AppError.self) { try await user.unlinkIdentity(again) }
            #expect(required?.code == AppError.reauthenticationRequired)
            try await user.reauthenticate(password: "correct horse")
            try await user.unlinkIdentity(again)
            #expect(user.identities.map(\.providerType) == ["local-userpass"])
        }
    }

    @Test func anAPIKeySessionMayNotManageTheAccount() async throws {
        try await withLiveServer { server in
            let owner = try await server.signedInUser(server.app(), "keys@example.com")
            let key = try await owner.apiKeysAuth.createAPIKey(named: "build-server")
            let machine = try await server.app().login(credentials: .userAPIKey(try #require(key.key)))
            #expect(machine.id == owner.id)

            let listed = await #expect(throws: AppError.self) { _ = try await machine.sessions() }
            #expect(listed?.code == AppError.forbidden)
            #expect(listed?.httpStatus == 403)
            let changed = await completion { machine.changePassword(to: "a new long passphrase", currentPassword: "correct horse", completion: $0) }
            #expect((changed as? AppError)?.code == .forbidden)
            await #expect(throws: AppError.self) { try await machine.endOtherSessions() }
            await #expect(throws: AppError.self) { try await machine.reauthenticate(password: "correct horse") }
            #expect(machine.isLoggedIn)

            // The owner sees the key's session for what it is.
            let sessions = try await owner.sessions()
            #expect(Set(sessions.map(\.kind)) == [.firstParty, .apiKey])
        }
    }

    @Test func aNativeAccountListsItsSessionsAndChangesItsPassword() async throws {
        try await withLiveServer { server in
            let client = server.nativeClient()
            let account = try await OneSessionEndToEndTests.signedUp(client, server, "native-change@example.com")
            let web = try await server.app().login(credentials: .emailPassword(email: "native-change@example.com", password: "correct horse"))

            let sessions = try await account.getSessions()
            #expect(sessions.count == 2)
            let own = try #require(sessions.first { $0.isCurrent })
            #expect(own.clientId == "ios-app")
            #expect(sessions.first { !$0.isCurrent }?.deviceId == web.deviceId)

            // The delegate form, on the main actor.
            let viaDelegate = try await SessionsReceiver().sessions(of: account)
            #expect(Set(viaDelegate.map(\.id)) == Set(sessions.map(\.id)))

            server.clock.advance(by: Self.pastTheProofWindow)
            do throws(AccountManagementError) {
                try await account.changePassword(to: "a new long passphrase")
                Issue.record("expected reauthentication to be required")
            } catch {
                #expect(error.isReauthenticationRequired)
            }
            do throws(AccountManagementError) {
                try await account.changePassword(to: "a new long passphrase", currentPassword: "wrong horse")
                Issue.record("expected a wrong current password")
            } catch {
                #expect(error.isInvalidCredentials)
            }
            try await account.changePassword(to: "a new long passphrase", currentPassword: "correct horse")

            // The App-style login elsewhere ended; the native session goes on and the new password signs in.
            await #expect(throws: AppError.self) { _ = try await web.refreshProfile() }
            #expect(try await account.getSessions().map(\.id) == [own.id])
            _ = try await account.getAccessToken(forceRefresh: true)
            guard case .completed(let again) = try await server.nativeClient().signIn(username: "native-change@example.com", password: "a new long passphrase")
            else {
                Issue.record("expected the new password to sign in")
                return
            }
            #expect(again.account.userId == account.account.userId)

            // Ending its own session signs the account out here too.
            try await account.endSession(id: own.id)
            #expect(client.getNativeAuthUserAccount() == nil)
            do throws(AccountManagementError) {
                _ = try await account.getSessions()
                Issue.record("expected the account to be signed out")
            } catch {
                #expect(error.isSignInRequired)
            }
        }
    }
}

/// Receives ``AccountSessionsDelegate`` answers for a test.
@MainActor final class SessionsReceiver: AccountSessionsDelegate {
    private var waiter: CheckedContinuation<[UserSession], any Error>?

    func sessions(of account: NativeAuthUserAccountResult) async throws -> [UserSession] {
        try await withCheckedThrowingContinuation { continuation in
            waiter = continuation
            account.getSessions(delegate: self)
        }
    }

    func onAccountSessionsRetrieved(sessions: [UserSession]) {
        waiter?.resume(returning: sessions)
        waiter = nil
    }

    func onAccountSessionsError(error: AccountManagementError) {
        waiter?.resume(throwing: error)
        waiter = nil
    }
}
