import Foundation
@testable import Gatehouse
import GatehouseServer
import GatehouseTestSupport
import Testing

/// A native-auth sign-in is also a `User` of the App-style API, against a live server: one stored session, one
/// refresher, one set of events.
@Suite struct OneSessionEndToEndTests {
    /// Signs `email` up with a password and a code through `client`, then in after sign-up.
    static func signedUp(_ client: NativeAuthClient, _ server: LiveServer, _ email: String) async throws -> NativeAuthUserAccountResult {
        guard case .codeRequired(let state, _, _, _) = try await client.signUp(username: email, password: "correct horse"),
            case .completed(let afterSignUp) = try await state.submitCode(try await server.latestCode(email))
        else { throw ClientError.malformedResponse("expected a code, then completion") }
        return try await afterSignUp.signIn()
    }

    /// An API-key call of a native session (made with its refresh token) while a refresh of it is under way waits
    /// for the refresh and presents the rotated token: the server would refuse the one being spent, and the SDK
    /// would take that refusal for the end of the session.
    @Test func anAPIKeyCallDuringARefreshPresentsTheRotatedToken() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let client = server.nativeClient(transport: transport)
            let account = try await Self.signedUp(client, server, "keys-during-refresh@example.com")
            let refreshing = "POST /native/test-app/oauth2/v2.0/token"
            let gate = transport.hold(refreshing)
            let refresh = Task { try await account.getAccessToken(forceRefresh: true) }
            await gate.waitForArrival()
            let keys = Task { try await account.user.apiKeysAuth.fetchAPIKeys() }
            // Until the keys call waits for the refresh (or, without that, went out with the spent token).
            let refresher = client.engine.core.refresher
            var spins = 0
            while await refresher.callers < 2, transport.count("GET /api/client/v2.0/auth/api_keys") == 0, spins < 100_000 {
                spins += 1
                await Task.yield()
            }
            gate.open()
            _ = try await refresh.value
            #expect(try await keys.value.isEmpty)
            #expect(account.user.isLoggedIn)
        }
    }

    @Test func aNativeSignInHasTheProfileKeysLinkingAndDeletionOfAnAppUser() async throws {
        try await withLiveServer { server in
            let client = server.nativeClient()
            let events = client.app.authEvents()
            let account = try await Self.signedUp(client, server, "ona@example.com")
            let user = account.user
            #expect(user.id == account.account.userId)
            #expect(user.isLoggedIn)
            #expect(client.app.currentUser == user)
            #expect(user.profile.email == "ona@example.com")

            // The Client API's routes, with the native session's tokens.
            _ = try await user.refreshProfile()
            #expect(user.identities.map(\.providerType) == ["local-userpass"])
            let key = try await user.apiKeysAuth.createAPIKey(named: "cli")
            #expect(try await user.apiKeysAuth.fetchAPIKeys().map(\.id) == [key.id])
            let jwt = try ProviderEndToEndTests.jwt(sub: "backend-ona", name: "Ona", now: server.clock.now)
            _ = try await user.linkUser(credentials: .jwt(token: jwt))
            #expect(Set(user.identities.map(\.providerType)) == ["local-userpass", "api-key", "custom-token"])

            // One refresher: an App-style refresh spends the native refresh token and stores the rotated one, which
            // the native API then hands out.
            let before = try #require(user.refreshToken)
            _ = try await user.refreshCustomData()
            let rotated = try #require(user.refreshToken)
            #expect(rotated != before)
            let parameters = GetAccessTokenParameters()
            parameters.returnRefreshToken = true
            #expect(try await account.getAccessToken(parameters: parameters).refreshToken == rotated)
            _ = try await account.getAccessToken(forceRefresh: true)
            #expect(user.refreshToken != rotated)

            // Deleting the App user removes the account from the native API too.
            try await user.delete()
            #expect(client.getNativeAuthUserAccount() == nil)
            #expect(user.state == .removed)

            var seen: [AuthEvent] = []
            for await event in events {
                seen.append(event)
                if case .signedOut = event { break }
            }
            let id = user.id
            #expect(seen == [.signedIn(userId: id), .tokenRefreshed(userId: id), .tokenRefreshed(userId: id), .signedOut(userId: id)])
        }
    }

    @Test func aPasswordResetElsewhereEndsTheNativeSessionWithAnEventNeverSilently() async throws {
        try await withLiveServer { server in
            let phone = server.nativeClient()
            let account = try await Self.signedUp(phone, server, "pia@example.com")
            let events = phone.app.authEvents()

            // The owner resets the password on another device: every session ends.
            let laptop = server.nativeClient()
            let sent = try await laptop.resetPassword(username: "pia@example.com")
            let passwordState = try await sent.newState.submitCode(try await server.latestCode("pia@example.com"))
            _ = try await passwordState.submitPassword("a new passphrase")

            let error = await #expect(throws: RetrieveAccessTokenError.self) { try await account.getAccessToken(forceRefresh: true) }
            #expect(error?.isBrowserRequired == false)
            #expect(phone.getNativeAuthUserAccount() == nil)
            #expect(account.user.state == .loggedOut)
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == .sessionEnded(userId: account.account.userId))
            // The App-style API says the same: not logged in.
            await #expect(throws: ClientError.userNotLoggedIn) { try await account.user.refreshCustomData() }
        }
    }
}
