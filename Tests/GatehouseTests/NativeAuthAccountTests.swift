import Foundation
import GatehouseDomain
import GatehouseTestSupport
import Testing

@testable import Gatehouse
import GatehouseWire

/// The cached account: access tokens from the cache or a refresh, refresh-token rotation, single-flight refresh,
/// persistence and sign-out.
@Suite struct NativeAuthAccountTests {
    static let email = "ada@example.com"

    /// Signs in with a password; the server answers `tokens`.
    static func signIn(_ harness: Harness, tokens: Exchange.Reply = Reply.tokens()) async throws -> NativeAuthUserAccountResult {
        harness.transport.then(passwordSignIn(email, tokens: tokens))
        guard case .completed(let result) = try await harness.client.signIn(username: email, password: "pw") else {
            throw ClientError.malformedResponse("expected completion")
        }
        return result
    }

    /// A password sign-in of `email` (password "pw") whose steps answer the continuation tokens `ct{n}`, `ct{n+1}`
    /// and then `tokens`.
    static func passwordSignIn(_ email: String, from n: Int = 1, tokens: Exchange.Reply) -> [Exchange] {
        [
            Exchange(endpoint: .signInInitiate, fields: Form.start(email), reply: Reply.continuation("ct\(n)")),
            Exchange(endpoint: .signInChallenge, fields: Form.challenge("ct\(n)"), reply: Reply.passwordChallenge("ct\(n + 1)")),
            Exchange(
                endpoint: .token,
                fields: Form.token(grant: "password", ["continuation_token": "ct\(n + 1)", "username": email, "password": "pw"]),
                reply: tokens
            ),
        ]
    }

    /// Signs in, lets the access token expire and scripts its refresh held at the returned gate; also returns how
    /// many requests the transport had seen before the refresh.
    static func signInThenHoldTheRefresh(_ harness: Harness) async throws -> (NativeAuthUserAccountResult, Int, Gate) {
        let account = try await signIn(harness)
        let before = harness.transport.seen.count
        harness.clock.advance(by: 4000)
        let gate = Gate()
        harness.transport.then(heldRefresh(gate))
        return (account, before, gate)
    }

    /// The refresh of rt-1, answered (at-2, rt-2) once `gate` opens.
    static func heldRefresh(_ gate: Gate) -> Exchange {
        Exchange(
            endpoint: .token,
            fields: Form.token(grant: "refresh_token", ["refresh_token": "rt-1"]),
            reply: .gated(gate, status: 200, body: Reply.tokensBody(access: "at-2", refresh: "rt-2"))
        )
    }

    static func refresh(_ refreshToken: String, scope: String = Form.scope, _ reply: Exchange.Reply) -> Exchange {
        Exchange(endpoint: .token, fields: Form.token(grant: "refresh_token", ["refresh_token": refreshToken], scope: scope), reply: reply)
    }

    @Test func theCachedTokenIsUsedUntilItIsAboutToExpireThenRefreshedWithRotation() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        let requests = harness.transport.seen.count

        let cached = try await account.getAccessToken()
        #expect(cached.accessToken == "at-1")
        #expect(cached.refreshToken == nil)
        #expect(cached.expiresOn == harness.clock.now.addingTimeInterval(3600))
        let parameters = GetAccessTokenParameters()
        parameters.returnRefreshToken = true
        #expect(try await account.getAccessToken(parameters: parameters).refreshToken == "rt-1")
        harness.clock.advance(by: 3560)
        #expect(try await account.getAccessToken().accessToken == "at-1")
        #expect(harness.transport.seen.count == requests)

        // Within the 30-second leeway: refresh, and keep the rotated refresh token.
        harness.clock.advance(by: 20)
        harness.transport.then(Self.refresh("rt-1", Reply.tokens(access: "at-2", refresh: "rt-2")))
        let refreshed = try await account.getAccessToken(parameters: parameters)
        #expect(refreshed.accessToken == "at-2" && refreshed.refreshToken == "rt-2")
        #expect(refreshed.expiresOn == harness.clock.now.addingTimeInterval(3600))

        // Forced: the rotated token is spent; an answer without a refresh token keeps the one we have.
        harness.transport.then(Self.refresh("rt-2", Reply.tokens(access: "at-3", refresh: nil)))
        #expect(try await account.getAccessToken(forceRefresh: true).accessToken == "at-3")
        harness.transport.then(Self.refresh("rt-2", Reply.tokens(access: "at-4", refresh: "rt-3")))
        #expect(try await account.getAccessToken(forceRefresh: true).accessToken == "at-4")
        #expect(harness.storedRefreshToken == "rt-3")
        harness.verify()
    }

    /// A refresh whose answer was lost is sent again with the same refresh token: within its reuse window the
    /// server answers the same new token, which is what the window is for.
    @Test(arguments: [Exchange.Reply.answer(status: 502, body: "bad gateway", headers: [:]), .lost])
    func aRefreshWhoseAnswerWasLostIsSentAgain(_ failure: Exchange.Reply) async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        harness.transport.then(Self.refresh("rt-1", failure), Self.refresh("rt-1", Reply.tokens(access: "at-2", refresh: "rt-2")))
        #expect(try await account.getAccessToken(forceRefresh: true).accessToken == "at-2")
        #expect(harness.storedRefreshToken == "rt-2")
        harness.verify()
    }

    /// The sign-in's last step (the password grant, which spends its continuation token and starts a session) is not
    /// sent again when its answer was lost: a second try could only be refused for a spent token.
    @Test func aSignInWhoseLastAnswerWasLostIsNotSentAgain() async throws {
        let harness = Harness(Self.passwordSignIn("lost@example.com", tokens: .lost))
        let error = try #require(
            await thrown { () async throws(SignInStartError) in _ = try await harness.client.signIn(username: "lost@example.com", password: "pw") }
        )
        #expect(error.kind == .generalError)
        #expect(harness.transport.seen.filter { $0.url.hasSuffix(NativeAuthEndpoint.token.rawValue) }.count == 1)
        #expect(harness.client.app.currentUser == nil)
        harness.verify()
    }

    /// Two clients of one app over one store (a second client made later, an app extension sharing the keychain):
    /// when one rotates the refresh token, the other refreshes with the rotated one it finds in the store, not the
    /// spent one it loaded, which after the reuse window would end the session for both.
    @Test func aSecondClientOnTheSameStoreRefreshesWithTheTokenTheFirstRotatedIn() async throws {
        let harness = Harness()
        let first = try await Self.signIn(harness)
        let second = try #require(harness.restart().getNativeAuthUserAccount())
        harness.clock.advance(by: 4000)
        harness.transport.then(Self.refresh("rt-1", Reply.tokens(access: "at-2", refresh: "rt-2")))
        #expect(try await first.getAccessToken().accessToken == "at-2")
        harness.clock.advance(by: 4000)
        harness.transport.then(Self.refresh("rt-2", Reply.tokens(access: "at-3", refresh: "rt-3")))
        #expect(try await second.getAccessToken().accessToken == "at-3")
        harness.verify()
    }

    /// What the store holds is taken only as another client's newer write: after this client's own save failed, the
    /// older token the store kept is never taken back, and the next refresh presents the one rotated in here.
    @Test func aTokenTheStoreFailedToSaveIsNotReplacedByTheStoresOlderOne() async throws {
        let store = SaveFailingUserStore()
        let harness = Harness(store: store)
        let account = try await Self.signIn(harness)
        store.failing.withLock { $0 = true }
        harness.clock.advance(by: 4000)
        harness.transport.then(Self.refresh("rt-1", Reply.tokens(access: "at-2", refresh: "rt-2")))
        _ = try? await account.getAccessToken()
        harness.clock.advance(by: 4000)
        harness.transport.then(Self.refresh("rt-2", Reply.tokens(access: "at-3", refresh: "rt-3")))
        _ = try? await account.getAccessToken()
        harness.verify()
    }

    @Test func scopesTheCachedTokenLacksAreRefreshedFor() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        harness.transport.then(
            Self.refresh(
                "rt-1",
                scope: "notes.write openid profile offline_access",
                Reply.tokens(access: "at-2", refresh: "rt-2", scope: "notes.write openid profile offline_access")
            )
        )
        let token = try await account.getAccessToken(scopes: ["notes.write"])
        #expect(token.accessToken == "at-2")
        #expect(token.scopes.contains("notes.write"))
        // Now cached for those scopes.
        #expect(try await account.getAccessToken(scopes: ["notes.write"]).accessToken == "at-2")
        harness.verify()
    }

    @Test func concurrentCallsShareOneRefresh() async throws {
        let harness = Harness()
        let (account, before, gate) = try await Self.signInThenHoldTheRefresh(harness)
        async let first = account.getAccessToken()
        async let second = account.getAccessToken()
        await harness.transport.waitForRequests(before + 1)
        // Hold the refresh until the other caller is waiting for it too (or, were there no single flight, has sent
        // its own request).
        await Self.waitForRefreshCallers(harness, 2, unless: { harness.transport.seen.count != before + 1 })
        gate.open()
        let tokens = try await [first.accessToken, second.accessToken]
        #expect(tokens == ["at-2", "at-2"])
        #expect(harness.transport.seen.count == before + 1)
        #expect(harness.storedRefreshToken == "rt-2")
        harness.verify()
    }

    /// A caller that saw the expired token but reaches the refresher only after another caller's refresh ended takes
    /// that refresh's token: no second request, no second rotation. A forced refresh still asks.
    @Test func aCallerArrivingAfterARefreshEndedTakesItsToken() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        harness.clock.advance(by: 4000)
        harness.transport.then(Self.refresh("rt-1", Reply.tokens(access: "at-2", refresh: "rt-2")))
        #expect(try await account.getAccessToken().accessToken == "at-2")
        let requests = harness.transport.seen.count

        let core = harness.client.engine.core
        let userId = try #require(core.read { $0.users.first?.id })
        let late = try await core.refreshed(userId, scopes: nil, claims: nil, correlationId: UUID(), replacing: "at-1")
        #expect(late.accessToken == "at-2")
        #expect(harness.transport.seen.count == requests)
        #expect(harness.storedRefreshToken == "rt-2")

        harness.transport.then(Self.refresh("rt-2", Reply.tokens(access: "at-3", refresh: "rt-3")))
        #expect(try await account.getAccessToken(forceRefresh: true).accessToken == "at-3")
        #expect(harness.transport.seen.count == requests + 1)
        harness.verify()
    }

    /// Callers waiting for a refresh that hangs stop waiting as soon as they are cancelled; the refresh runs on for the
    /// caller that was not, and no second refresh starts beside it (a newcomer joins it).
    @Test func cancelledCallersStopWaitingForARefreshThatRunsOn() async throws {
        let harness = Harness()
        let (account, before, gate) = try await Self.signInThenHoldTheRefresh(harness)
        let kept = Task { try await account.getAccessToken().accessToken }
        await harness.transport.waitForRequests(before + 1)
        let cancelled = (0..<3).map { _ in Task { try await account.getAccessToken().accessToken } }
        await Self.waitForRefreshCallers(harness, 4)
        // Were cancellation ignored, the callers would wait for the gate: a watchdog opens it, and the test fails.
        let watchdog = Task { () -> Bool in
            do { try await Task.sleep(for: .seconds(20)) } catch { return false }
            gate.open()
            return true
        }
        for caller in cancelled { caller.cancel() }
        for caller in cancelled {
            await #expect(throws: (any Error).self) { try await caller.value }
        }
        watchdog.cancel()
        #expect(await watchdog.value == false, "the cancelled callers waited for the refresh")
        let newcomer = Task { try await account.getAccessToken().accessToken }
        gate.open()
        #expect(try await kept.value == "at-2")
        #expect(try await newcomer.value == "at-2")
        #expect(harness.transport.seen.count == before + 1)
        #expect(harness.storedRefreshToken == "rt-2")
        harness.verify()
    }

    @Test func refreshesForOtherScopesWaitAndSpendTheRotatedToken() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        let before = harness.transport.seen.count
        let gate = Gate()
        harness.transport.then(
            Self.heldRefresh(gate),
            Self.refresh(
                "rt-2",
                scope: "notes.write openid profile offline_access",
                Reply.tokens(access: "at-3", refresh: "rt-3", scope: "notes.write")
            )
        )
        async let first = account.getAccessToken(forceRefresh: true)
        await harness.transport.waitForRequests(before + 1)
        async let second = account.getAccessToken(scopes: ["notes.write"])
        await Self.waitForRefreshCallers(harness, 2, unless: { harness.transport.seen.count != before + 1 })
        #expect(harness.transport.seen.count == before + 1, "the second refresh did not wait")
        gate.open()
        let tokens = try await [first.accessToken, second.accessToken]
        #expect(tokens == ["at-2", "at-3"])
        #expect(harness.storedRefreshToken == "rt-3")
        harness.verify()
    }

    /// Each refusal, the error it maps to, and whether it ends the session (the server refused the refresh token
    /// itself) or leaves the account to try again.
    static let refreshErrors: [(Exchange.Reply, String, Bool)] = [
        (Reply.error("expired_refresh_token", "expired", codes: [700_082]), "refreshTokenExpired", true),
        (Reply.error("invalid_scope", "no such scope", codes: [9_900_008]), "invalidScope", false),
        (Reply.redirect, "browserRequired", false),
        (Reply.error("invalid_grant", "revoked", codes: [70008]), "generalError", true),
        (Reply.error("slow_down", "wait", status: 429), "generalError", false),
    ]

    @Test(arguments: refreshErrors) func refreshErrorsMapAsTheSpecSaysAndARefusedSessionSignsOutWithAnEvent(
        _ reply: Exchange.Reply, _ kind: String, _ endsSession: Bool
    ) async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        let events = harness.client.app.authEvents()
        harness.transport.then(Self.refresh("rt-1", reply))
        let error = try #require(await thrown { () async throws(RetrieveAccessTokenError) in try await account.getAccessToken(forceRefresh: true) })
        #expect("\(error.kind)" == kind)
        #expect(error.isRefreshTokenExpired == (kind == "refreshTokenExpired"))
        #expect(error.isInvalidScope == (kind == "invalidScope"))
        #expect(error.isBrowserRequired == (kind == "browserRequired"))
        // A session the server ended is signed out here too, never silently; other failures leave the account.
        #expect((harness.client.getNativeAuthUserAccount() == nil) == endsSession)
        #expect(account.user.isLoggedIn == !endsSession)
        if endsSession {
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == .sessionEnded(userId: "u1"))
        }
        harness.verify()
    }

    @Test func theAccountSurvivesARestartAndSignOutClearsIt() async throws {
        let store = InMemoryUserStore()
        let harness = Harness(store: store)
        let account = try await Self.signIn(harness)
        #expect(try store.load(appId: "native-auth.my-app.ios-app") != nil)

        let restarted = harness.restart()
        let found = try #require(restarted.getNativeAuthUserAccount(correlationId: UUID()))
        #expect(found.account == account.account)
        #expect(found.idToken == account.idToken)
        #expect(found.account.claims?.preferredUsername == "ada@example.com")
        let requests = harness.transport.seen.count
        #expect(try await found.getAccessToken().accessToken == "at-1")
        #expect(harness.transport.seen.count == requests)

        // Signing out ends the session on the server too, with the refresh token the cache held.
        harness.transport.then(Exchange(endpoint: .revoke, fields: Form.revoke("rt-1"), reply: Reply.ok("{}")))
        let revoked = found.signOut()
        #expect(restarted.getNativeAuthUserAccount() == nil)
        #expect(harness.restart().getNativeAuthUserAccount() == nil)
        await revoked.value
        let error = try #require(await thrown { () async throws(RetrieveAccessTokenError) in try await found.getAccessToken() })
        #expect(error.kind == .generalError)
        #expect(harness.transport.seen.count == requests + 1)
        harness.verify()
    }

    @Test func signOutWithTheServerUnreachableStillSignsOutLocally() async throws {
        let store = InMemoryUserStore()
        let harness = Harness(store: store)
        let account = try await Self.signIn(harness)
        // The revocation is tried twice (one retry), and both fail.
        harness.transport.then(
            Exchange(endpoint: .revoke, fields: Form.revoke("rt-1"), reply: .unreachable),
            Exchange(endpoint: .revoke, fields: Form.revoke("rt-1"), reply: .unreachable)
        )
        await account.signOut().value
        #expect(harness.client.getNativeAuthUserAccount() == nil)
        #expect(harness.restart().getNativeAuthUserAccount() == nil)
        #expect(try store.load(appId: "native-auth.my-app.ios-app").flatMap { String(data: $0, encoding: .utf8) }?.contains("rt-1") != true)
        harness.verify()
    }

    @Test func theStoredBlobIsVersionedJSONWithTheAccountAsAUser() async throws {
        let store = InMemoryUserStore()
        let harness = Harness(store: store)
        _ = try await Self.signIn(harness)
        let blob = try #require(try store.load(appId: "native-auth.my-app.ios-app"))
        let object = try #require(try JSONSerialization.jsonObject(with: blob) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        #expect(object["currentUserId"] as? String == "u1")
        let user = try #require((object["users"] as? [[String: Any]])?.first)
        #expect(user["refreshToken"] as? String == "rt-1")
        #expect(user["id"] as? String == "u1")
        #expect((user["native"] as? [String: Any])?["clientId"] as? String == "ios-app")
    }

    @Test func theCacheOfEarlierReleasesIsReadAsTheSignedInAccount() async throws {
        let store = InMemoryUserStore()
        let harness = Harness(store: store)
        let expires = Int(harness.clock.now.timeIntervalSince1970) + 3600
        let legacy = """
            {"version":1,"account":{"username":"ada@example.com","userId":"u1","tenantId":"my-app","accessToken":"at-1",
            "refreshToken":"rt-1","grantedScopes":["openid"],"requestedScopes":[],"expiresOn":\(expires)}}
            """
        try store.save(Data(legacy.utf8), appId: "native-auth.my-app.ios-app")
        let restarted = harness.restart()
        let found = try #require(restarted.getNativeAuthUserAccount())
        #expect(found.account.username == "ada@example.com" && found.account.homeAccountId == "u1.my-app")
        #expect(try await found.getAccessToken().accessToken == "at-1")
        #expect(restarted.app.currentUser?.id == "u1")
        harness.verify()
    }

    /// A sign-out the user store cannot save is carried through all the same: the account is gone here, the app
    /// hears that it signed out, and the server is asked to end the session, so that the account the store still
    /// holds is signed out at its next refresh (after a restart) instead of coming back to life.
    @Test func aSignOutTheStoreCannotSaveStillEndsTheSession() async throws {
        let store = SaveFailingUserStore()
        let harness = Harness(store: store)
        let account = try await Self.signIn(harness)
        let events = harness.client.app.authEvents()
        store.failing.withLock { $0 = true }
        harness.transport.then(Exchange(endpoint: .revoke, fields: Form.revoke("rt-1"), reply: Reply.ok("{}")))
        await account.signOut().value
        #expect(harness.client.getNativeAuthUserAccount() == nil)
        // A marker after it: the first event is the sign-out, or the marker when there was none (no waiting forever).
        harness.client.app.core.events.emit(.currentUserChanged(userId: "marker"))
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .signedOut(userId: "u1"))
        harness.verify()
    }

    /// A second account signing in on the client replaces the first (MSAL keeps one): the first's session is ended
    /// on the server too, with the refresh token the client is about to forget, and the app hears that it signed out.
    /// Signing the same account in again ends its earlier session the same way.
    @Test func aSignInThatReplacesAnAccountEndsItsSession() async throws {
        let harness = Harness()
        let first = try await Self.signIn(harness)
        let events = harness.client.app.authEvents()
        let before = harness.transport.seen.count
        harness.transport.then(
            Self.passwordSignIn("bo@example.com", tokens: Reply.tokens(access: "at-b", refresh: "rt-b", user: "u2"))
                + [Exchange(endpoint: .revoke, fields: Form.revoke("rt-1"), reply: Reply.ok("{}"))]
        )
        guard case .completed(let second) = try await harness.client.signIn(username: "bo@example.com", password: "pw") else {
            Issue.record("expected completion")
            return
        }
        await Self.settle(harness, until: before + 4)
        #expect(second.account.homeAccountId == "u2.my-app")
        #expect(!first.user.isLoggedIn)
        #expect(harness.client.getNativeAuthUserAccount()?.account.homeAccountId == "u2.my-app")
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next() == .signedOut(userId: "u1"))

        // The same account again: its earlier session (rt-b) ends; no sign-out is reported for it.
        harness.transport.then(
            Self.passwordSignIn("bo@example.com", from: 3, tokens: Reply.tokens(access: "at-c", refresh: "rt-c", user: "u2"))
                + [Exchange(endpoint: .revoke, fields: Form.revoke("rt-b"), reply: Reply.ok("{}"))]
        )
        _ = try await harness.client.signIn(username: "bo@example.com", password: "pw")
        await Self.settle(harness, until: before + 8)
        harness.verify()
    }

    /// Yields until `count` callers are inside the single-flight refresher (or `stop` says there is no point), at most
    /// a million times.
    static func waitForRefreshCallers(_ harness: Harness, _ count: Int, unless stop: () -> Bool = { false }) async {
        let refresher = harness.client.engine.core.refresher
        var spins = 0
        while await refresher.callers < count && !stop() && spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
    }

    /// Lets work the SDK started on its own (a revocation) reach the transport, up to `count` requests in all; a
    /// request that never comes is left for ``Harness/verify(sourceLocation:)`` to report as an unused exchange.
    static func settle(_ harness: Harness, until count: Int) async {
        var spins = 0
        while harness.transport.seen.count < count && spins < 1_000_000 {
            spins += 1
            await Task.yield()
        }
    }

    /// `dump` of a signed-in account, the client, its app, a user, every flow state and the parameter objects — what
    /// a debugger or crash reporter shows — holds no token or password: the cache behind them, every continuation
    /// token and every password are redacted.
    @Test func dumpingTheSDKsObjectsShowsNoToken() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        let context = FlowContext(engine: harness.client.engine, correlationId: UUID(), username: "ada@example.com")
        let states: [Any] = [
            SignUpCodeRequiredState(context: context, continuationToken: "ct-secret"), SignInAfterSignUpState(context: context, continuationToken: "ct-secret"),
            SignUpPasswordRequiredState(context: context, continuationToken: "ct-secret"),
            SignUpAttributesRequiredState(context: context, continuationToken: "ct-secret"),
            ResetPasswordCodeRequiredState(context: context, continuationToken: "ct-secret"),
            SignInAfterResetPasswordState(context: context, continuationToken: "ct-secret"),
            SignInCodeRequiredState(context: context, options: SignInOptions(scopes: nil, claimsRequest: nil), continuationToken: "ct-secret"),
            SignInPasswordRequiredState(context: context, options: SignInOptions(scopes: nil, claimsRequest: nil), continuationToken: "ct-secret"),
            ResetPasswordRequiredState(context: context, continuationToken: "ct-secret"),
        ]
        let signUp = SignUpParameters(username: "ada@example.com")
        signUp.password = "ct-secret"
        let signIn = SignInParameters(username: "ada@example.com")
        signIn.password = "ct-secret"
        for value in [account, harness.client, harness.client.app, account.user, signUp, signIn] + states as [Any] {
            var dumped = ""
            dump(value, to: &dumped)
            for secret in ["at-1", "rt-1", "ct-secret", "eyJ"] {
                #expect(!dumped.contains(secret), "\(type(of: value)) shows \(secret): \(dumped)")
            }
        }
    }

    /// A caller already cancelled when it asks for a refresh sends nothing: a native refresh spends its token.
    @Test func aCallerCancelledBeforeItsRefreshSendsNothing() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        let before = harness.transport.seen.count
        let gate = Gate()
        let caller = Task {
            await gate.wait()
            return try await account.getAccessToken(forceRefresh: true).accessToken
        }
        caller.cancel()
        gate.open()
        await #expect(throws: (any Error).self) { try await caller.value }
        #expect(harness.transport.seen.count == before)
        #expect(try await account.getAccessToken().accessToken == "at-1")
        harness.verify()
    }

    /// A refresh answered with another user's tokens (a wrongly keyed cache, a confused server) is refused: the
    /// account keeps the tokens it had.
    @Test func aRefreshAnswerForAnotherUserIsRefused() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        // Named by the answer's client_info, or by its access token's own `sub`.
        let otherAccessToken = "eyJhbGciOiJFUzI1NiJ9.\(Reply.base64URL(#"{"sub":"u2","exp":1800003600}"#)).c2ln"
        for reply in [Reply.tokens(access: "at-x", refresh: "rt-x", user: "u2"), Reply.tokens(access: otherAccessToken, refresh: "rt-x", user: "u1")] {
            harness.transport.then(Self.refresh("rt-1", reply))
            let error = try #require(await thrown { () async throws(RetrieveAccessTokenError) in try await account.getAccessToken(forceRefresh: true) })
            #expect(error.kind == .generalError)
        }
        #expect(harness.storedRefreshToken == "rt-1")
        #expect(try await account.getAccessToken().accessToken == "at-1")
        harness.verify()
    }

    /// Signs in, runs `refresh` with the refresh answer held, signs out while it waits, then lets the answer through:
    /// what `refresh` returned.
    static func refreshOvertakenBySignOut<T: Sendable>(
        _ harness: Harness, _ refresh: @escaping @Sendable (NativeAuthUserAccountResult) async -> T
    ) async throws -> T {
        let account = try await Self.signIn(harness)
        let gate = Gate()
        harness.transport.then(Self.heldRefresh(gate))
        let before = harness.transport.seen.count
        let refreshing = Task { await refresh(account) }
        await harness.transport.waitForRequests(before + 1)
        harness.transport.then(Exchange(endpoint: .revoke, fields: Form.revoke("rt-1"), reply: Reply.ok("{}")))
        await account.signOut().value
        gate.open()
        return await refreshing.value
    }

    @Test func aSignOutDuringARefreshIsNotUndone() async throws {
        let harness = Harness()
        let error = try await Self.refreshOvertakenBySignOut(harness) { account in
            await thrown { () async throws(RetrieveAccessTokenError) in try await account.getAccessToken(forceRefresh: true) }
        }
        #expect(error?.kind == .generalError)
        #expect(harness.client.getNativeAuthUserAccount() == nil)
        harness.verify()
    }

    /// The same race seen through the App API (a native account's `user`): the caller hears that the user is not
    /// logged in, as an App-side refresh says it, not a network failure.
    @Test func aSignOutDuringARefreshOfTheAppAPIIsUserNotLoggedIn() async throws {
        let harness = Harness()
        let error = try await Self.refreshOvertakenBySignOut(harness) { account -> ClientError? in
            do {
                _ = try await account.user.refreshCustomData()
                return nil
            } catch {
                return error as? ClientError
            }
        }
        #expect(error == .userNotLoggedIn)
        harness.verify()
    }

    @Test @MainActor func credentialsDelegate() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        let recorder = Recorder()
        let parameters = GetAccessTokenParameters()
        parameters.returnRefreshToken = true
        let completed = await recorder.next { account.getAccessToken(parameters: parameters, delegate: recorder) }
        #expect(completed.method == "onAccessTokenRetrieveCompleted(result:)")
        #expect(completed.token?.accessToken == "at-1" && completed.token?.refreshToken == "rt-1")

        harness.transport.then(Self.refresh("rt-1", Reply.error("expired_refresh_token", "expired")))
        let failed = await recorder.next { account.getAccessToken(forceRefresh: true, delegate: recorder) }
        #expect(failed.method == "onAccessTokenRetrieveError(error:)")
        #expect((failed.error as? RetrieveAccessTokenError)?.isRefreshTokenExpired == true)
        harness.verify()
    }

    @MainActor final class ErrorOnlyCredentials: CredentialsDelegate {
        let received = OneShot<RetrieveAccessTokenError>()
        func onAccessTokenRetrieveError(error: RetrieveAccessTokenError) { received.deliver(error) }
    }

    @Test @MainActor func anUnimplementedCompletionReportsAnError() async throws {
        let harness = Harness()
        let account = try await Self.signIn(harness)
        let delegate = ErrorOnlyCredentials()
        let error = await delegate.received.wait { account.getAccessToken(delegate: delegate) }
        #expect(
            error?.errorDescription
                == "Gatehouse has called the delegate method onAccessTokenRetrieveCompleted(result:) that has not been implemented"
        )
    }
}

/// A user store whose saves fail once `failing` is set (a locked keychain, a full disk); loads answer what was saved.
final class SaveFailingUserStore: UserStore, Sendable {
    let failing = Locked(false)
    private let saved = Locked<[String: Data]>([:])

    func load(appId: String) throws -> Data? { saved.withLock { $0[appId] } }

    func save(_ data: Data, appId: String) throws {
        if failing.withLock({ $0 }) { throw ClientError.storage("the store cannot be written") }
        saved.withLock { $0[appId] = data }
    }
}
