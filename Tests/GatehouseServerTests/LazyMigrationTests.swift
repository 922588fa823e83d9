import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import GatehouseTestSupport
import Testing

/// Lazy migration: the migrate-user function (`Tests/Tools/webhook_receiver.py`, which verifies every call's signature
/// with the Standard Webhooks library) is asked about addresses Gatehouse does not know, at a login with the password
/// and at a reset request without one.
// Outbound calls have deadlines; the limit turns anything that still hangs into a named failure.
@Suite(.timeLimit(.minutes(3))) struct LazyMigrationTests {
    static let oldPassword = "old-system password"

    /// test-app (email confirmation, hides user existence unless `reveal`) with native auth and the migrate-user
    /// function on `receiver`; no other function.
    static func configuration(_ receiver: WebhookReceiver, timeout: TimeInterval = 5, reveal: Bool = false) -> GatehouseConfiguration {
        var config = nativeConfiguration(reveal: reveal)
        config.apps[0].localUserpass?.migrateUserFunction = WebhookSettings(url: receiver.url, secret: FunctionTests.secret, timeout: timeout)
        return config
    }

    /// Runs `body` against a server whose log is captured, with the receiver.
    func withMigration(
        loginLimit: RateLimitSettings.Rule? = nil, freeFailures: Int? = nil, timeout: TimeInterval = 5, reveal: Bool = false,
        clock: ManualClock = ManualClock(Date()), _ body: @escaping @Sendable (WebhookReceiver, AuthServer, any TestClientProtocol, CapturedLog) async throws -> Void
    ) async throws {
        try await WebhookReceiver.with(secret: FunctionTests.secret) { receiver in
            var config = Self.configuration(receiver, timeout: timeout, reveal: reveal)
            if let loginLimit { config.apps[0].rateLimits.rules[.login] = loginLimit }
            if let freeFailures { config.apps[0].loginBackoff.freeFailures = freeFailures }
            let log = CapturedLog()
            // Receivers refuse calls whose webhook-timestamp is more than five minutes off their clock: start at now.
            try await withOpenServer(config, clock: clock.clock, logger: log.logger) { gatehouse in
                try await gatehouse.makeApplication().test(.router) { client in try await body(receiver, gatehouse, client, log) }
            }
        }
    }

    func migrations(_ gatehouse: AuthServer) async throws -> [AuditEvent] {
        try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 1000).filter { $0.kind == "user_migrated" }
    }

    /// Once Gatehouse holds a password for a migrated account, the old system is never asked about it again: not even
    /// after an email-change undo leaves the account without a password. Otherwise whoever knows the leaked old
    /// password (the case lazy migration runs in) signs back in after every undo, and the owner cannot get them out.
    @Test func anUndoNeverHandsTheAccountBackToTheOldSystemsPassword() async throws {
        try await withMigration { receiver, gatehouse, client, _ in
            // The thief knows the old-system password: the migration at login is theirs. They move the address away.
            let thief = try await client.login("migrate-olga@example.com", Self.oldPassword).decode(LoginResponse.self)
            try await client.moveAddress(to: "thief-box@example.com", bearer: thief.accessToken)
            // The owner undoes it from the old address.
            #expect(try await client.undoEmailChange(mailedTo: "migrate-olga@example.com").status == .ok)

            let calls = try receiver.calls.count
            #expect(try await client.login("migrate-olga@example.com", Self.oldPassword).status == .unauthorized)
            #expect(try receiver.calls.count == calls, "the function was asked again")
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "migrate-olga@example.com")?.oldSystemMayVouch == false)
            // The owner's way back is a reset by link.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "migrate-olga@example.com")).status == .ok)
            let reset = try await client.latestLink("migrate-olga@example.com")
            let request = ResetPasswordRequest(password: "the owner's own password", token: reset.token, tokenId: reset.tokenId)
            #expect(try await client.call(Path.local("reset"), json: request).status == .ok)
            let owner = try await client.login("migrate-olga@example.com", "the owner's own password").decode(LoginResponse.self)
            #expect(owner.userId == thief.userId)
        }
    }

    /// The old system hands an address over once. After its migrated user moved to another address, the leaked old
    /// password makes no second user of the old one, at a login or a reset request: such a squatter would also block
    /// the owner's undo.
    @Test func theOldSystemHandsAnAddressOverOnce() async throws {
        try await withMigration { receiver, gatehouse, client, _ in
            let owner = try await client.login("migrate-pia@example.com", Self.oldPassword).decode(LoginResponse.self)
            // A thief with the owner's fresh session moves the address to their own mailbox…
            try await client.moveAddress(to: "thief-pia@example.com", bearer: owner.accessToken)
            // …and tries to make a second user of the old address with the leaked old password.
            let calls = try receiver.calls.count
            #expect(try await client.login("migrate-pia@example.com", Self.oldPassword).status == .unauthorized)
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "migrate-pia@example.com")).status == .ok)
            #expect(try receiver.calls.count == calls, "the function was asked about an address it handed over")
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "migrate-pia@example.com") == nil)
            // The owner's undo finds the address free.
            #expect(try await client.undoEmailChange(mailedTo: "migrate-pia@example.com").status == .ok)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "migrate-pia@example.com")?.userId == owner.userId)
        }
    }

    @Test func aClientAPILoginMigratesAndTheNextLoginStaysLocal() async throws {
        try await withMigration { receiver, gatehouse, client, log throws in
            let reply = try await client.login("migrate-ann@example.com", Self.oldPassword)
            #expect(reply.status == .ok, "\(reply.text)")
            let login = try reply.decode(LoginResponse.self)
            // The call was signed (verified by another implementation) and carried the password.
            let calls = try receiver.calls
            #expect(calls.count == 1)
            let call = try #require(calls.first)
            #expect(call.verified)
            #expect(call.headers["webhook-signature"]?.hasPrefix("v1,") == true)
            #expect(call.body == ["type": "migrateUser", "appId": "test-app", "email": "migrate-ann@example.com", "reason": "login", "password": .string(Self.oldPassword)])

            // The user: its id, an Argon2id hash of the password, a confirmed and proven account, the custom data.
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "migrate-ann@example.com"))
            #expect(account.userId == login.userId)
            #expect(account.passwordHash.hasPrefix("$argon2id$"))
            #expect(account.confirmedAt != nil && account.mailboxProvenAt != nil)
            let claims = try jwtPayload(login.accessToken)
            #expect((claims["user_data"] as? [String: Any])?["plan"] as? String == "gold")

            // The second login verifies locally: no call. A wrong password is wrong here too, without a call.
            #expect(try await client.login("migrate-ann@example.com", Self.oldPassword).status == .ok)
            #expect(try await client.login("migrate-ann@example.com", "another password").status == .unauthorized)
            #expect(try receiver.calls.count == 1)

            // Audited once, without the password; never logged.
            let events = try await migrations(gatehouse)
            #expect(events.map(\.userId) == [login.userId])
            #expect(events.first?.detail == ["provider": "local-userpass", "at": "login"])
            #expect(log.text.contains("user migrated"))
            #expect(!log.text.contains(Self.oldPassword))
            let audit = try await gatehouse.env.store.auditEvents(appId: nil, userId: nil, afterSeq: nil, limit: 1000)
            #expect(!"\(audit)".contains(Self.oldPassword))
        }
    }

    @Test func anOldUserIdIsKept() async throws {
        try await withMigration { _, gatehouse, client, _ throws in
            let login = try await client.login("keepid@example.com", Self.oldPassword).decode(LoginResponse.self)
            #expect(login.userId == "0123456789abcdef01234567")
            #expect(try await gatehouse.env.store.user(id: login.userId)?.customData == ["plan": "gold"])
        }
    }

    @Test func aNativeSignInMigrates() async throws {
        for reveal in [false, true] {
            try await withMigration(reveal: reveal) { receiver, gatehouse, client, log throws in
                let email = "migrate-ben@example.com"
                let started = try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": allChallengeTypes])
                let challenge = try await client.nativeStep(
                    .signInChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": allChallengeTypes]
                )
                #expect(challenge.challengeType == .password)
                let fields = [
                    "continuation_token": try #require(challenge.continuationToken), "grant_type": "password", "username": email,
                    "scope": "openid profile offline_access", "challenge_type": allChallengeTypes, "password": Self.oldPassword,
                ]
                let reply = try await client.native(.token, fields)
                #expect(reply.status == .ok, "reveal \(reveal): \(reply.text)")
                let tokens = try reply.decode(NativeAuthTokenResponse.self)
                #expect(try await client.call(Path.profile, .get, bearer: tokens.accessToken).status == .ok)
                #expect(try receiver.calls.count == 1)
                #expect(try receiver.calls.first?.body?["reason"] == "login")
                // The same account logs in with the Client API, locally.
                #expect(try await client.login(email, Self.oldPassword).status == .ok)
                #expect(try receiver.calls.count == 1)
                #expect(try await migrations(gatehouse).count == 1)
                #expect(!log.text.contains(Self.oldPassword))
            }
        }
    }

    /// Unknown there, a wrong password, an unverified address, a malformed answer, an error, a timeout: the answer of
    /// an unknown address, and nothing is created.
    @Test func everyOtherAnswerIsTheOrdinaryWrongPassword() async throws {
        // A timeout the slow answer (3 s) exceeds, with room for the others on a loaded machine.
        try await withMigration(timeout: 2) { receiver, gatehouse, client, log throws in
            // The reference: the answer to an address no function knows.
            let reference = try await client.login("nobody@example.com", Self.oldPassword)
            #expect(reference.status == .unauthorized)
            let cases = [
                ("migrate-cat@example.com", "not the old password"), ("unverified-dan@example.com", Self.oldPassword),
                ("garbage@example.com", Self.oldPassword), ("error@example.com", Self.oldPassword), ("slow@example.com", Self.oldPassword),
            ]
            for (email, password) in cases {
                let reply = try await client.login(email, password)
                #expect(reply.status == reference.status, "\(email): \(reply.text)")
                #expect(reply.body == reference.body, "\(email): \(reply.text)")
                #expect(reply.contentType == reference.contentType)
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: email) == nil)
            }
            // Each address was asked about once. The slow one's call may never reach the receiver: on a loaded machine
            // the server can give up (its 2 s timeout) before the request is out, which is the timeout working.
            let asked = try receiver.calls.compactMap { $0.body?["email"]?.stringValue }
            #expect(asked.filter { $0 != "slow@example.com" }.sorted() == (["nobody@example.com"] + cases.map(\.0).filter { $0 != "slow@example.com" }).sorted())
            #expect(asked.filter { $0 == "slow@example.com" }.count <= 1)
            #expect(try await migrations(gatehouse).isEmpty)
            // Every refusal was audited as a failed login, as for any unknown address.
            let failed = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100).filter { $0.kind == "login_failed" }
            #expect(failed.count == cases.count + 1)
            // The failures are logged without the password.
            #expect(log.text.contains("migrate-user function failed"))
            #expect(!log.text.contains(Self.oldPassword))
        }
    }

    /// Not asked for what cannot be an address or a password of the app.
    @Test func noCallForAnInvalidAddressOrAnOverlongPassword() async throws {
        try await withMigration { receiver, _, client, _ throws in
            #expect(try await client.login("migrate-not-an-address", Self.oldPassword).status == .unauthorized)
            #expect(try await client.login("migrate-eve@example.com", String(repeating: "x", count: 257)).status == .unauthorized)
            #expect(try await client.login("migrate-eve@example.com", "").status != .ok)
            #expect(try receiver.calls.isEmpty)
        }
    }

    /// Rate limits and the login backoff are counted before the function is asked: Gatehouse is no faster a way to
    /// guess passwords of the old system than its own limits allow.
    @Test func limitsApplyBeforeTheFunctionIsAsked() async throws {
        try await withMigration(loginLimit: RateLimitSettings.Rule(perIP: nil, perIdentifier: .init(3, per: 300))) { receiver, gatehouse, client, _ throws in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<5 { statuses.append(try await client.login("migrate-fay@example.com", "guess").status) }
            #expect(statuses == [.unauthorized, .unauthorized, .unauthorized, .tooManyRequests, .tooManyRequests])
            #expect(try receiver.calls.count == 3)
            // Over the limit even the right password is not passed on.
            #expect(try await client.login("migrate-fay@example.com", Self.oldPassword).status == .tooManyRequests)
            #expect(try receiver.calls.count == 3)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "migrate-fay@example.com") == nil)
        }
        let clock = ManualClock(Date())
        try await withMigration(freeFailures: 2, clock: clock) { receiver, _, client, _ throws in
            #expect(try await client.login("migrate-gus@example.com", "guess 1").status == .unauthorized)
            #expect(try await client.login("migrate-gus@example.com", "guess 2").status == .unauthorized)
            // Delayed: refused before the password goes anywhere.
            #expect(try await client.login("migrate-gus@example.com", "guess 3").status == .tooManyRequests)
            #expect(try await client.login("migrate-gus@example.com", Self.oldPassword).status == .tooManyRequests)
            #expect(try receiver.calls.count == 2)
            clock.advance(by: 2)
            #expect(try await client.login("migrate-gus@example.com", Self.oldPassword).status == .ok)
            #expect(try receiver.calls.count == 3)
        }
    }

    /// Two logins of one old user at once, both vouched for: one user is created, and the other login signs in to it.
    @Test func racingMigrationsMakeOneUser() async throws {
        // The function answers neither call before both have arrived (`racer…` in Tests/Tools/webhook_receiver.py), so
        // the two are in flight together however busy the machine; its 20 s wait for the second stays under the
        // function's timeout, which would refuse a login for another reason.
        try await withMigration(timeout: 30) { receiver, gatehouse, client, _ throws in
            async let first = client.login("racer@example.com", Self.oldPassword)
            async let second = client.login("racer@example.com", Self.oldPassword)
            let replies = try await [first, second]
            #expect(replies.map(\.status) == [.ok, .ok], "\(replies.map(\.text))")
            let ids = try replies.map { try $0.decode(LoginResponse.self).userId }
            #expect(Set(ids).count == 1)
            // Both were in flight together: each asked the function.
            #expect(try receiver.calls.count == 2)
            #expect(try await migrations(gatehouse).count == 1)
            let identities = try await gatehouse.env.store.identities(userId: ids[0])
            #expect(identities.map(\.providerType) == ["local-userpass"])
        }
    }

    /// A reset request for an address the old system knows migrates it without a password; the reset sets one. The
    /// answer is the one every address gets.
    @Test func aResetRequestMigratesWithoutAPassword() async throws {
        try await withMigration { receiver, gatehouse, client, log throws in
            let unknown = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "nobody@example.com"))
            let known = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "migrate-hal@example.com"))
            #expect(unknown.status == .ok && known.status == .ok)
            #expect(unknown.body == known.body)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "nobody@example.com") == nil)
            let calls = try receiver.calls
            #expect(calls.count == 2)
            #expect(calls.allSatisfy { $0.verified && $0.body?["password"] == nil && $0.body?["reason"] == "passwordReset" })

            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "migrate-hal@example.com"))
            #expect(account.passwordHash.isEmpty)
            #expect(account.confirmedAt != nil)
            #expect(try await gatehouse.env.store.user(id: account.userId)?.customData == ["plan": "gold"])
            #expect(try await migrations(gatehouse).first?.detail["at"] == "passwordReset")

            let link = try await client.latestLink("migrate-hal@example.com")
            let reset = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "a brand new one", token: link.token, tokenId: link.tokenId))
            #expect(reset.status == .ok)
            #expect(try await client.login("migrate-hal@example.com", "a brand new one").status == .ok)
            #expect(try receiver.calls.count == 2)
            #expect(!log.text.contains("a brand new one"))
        }
    }

    /// Someone asked a reset for an old user's address (the user got the mail), and the user signs in with the old
    /// password instead: the function is asked again, and the password set.
    @Test func aMigratedUserWithoutAPasswordMaySignInWithTheOldOne() async throws {
        try await withMigration { receiver, gatehouse, client, _ throws in
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "migrate-ivy@example.com")).status == .ok)
            #expect(try await client.login("migrate-ivy@example.com", "a wrong guess").status == .unauthorized)
            #expect(try await client.login("migrate-ivy@example.com", Self.oldPassword).status == .ok)
            #expect(try await client.login("migrate-ivy@example.com", Self.oldPassword).status == .ok)
            #expect(try receiver.calls.count == 3)
            #expect(try await migrations(gatehouse).map { $0.detail["passwordSet"] } == [nil, "true"])
        }
    }

    @Test func aNativeResetMigratesWithoutAPassword() async throws {
        for reveal in [false, true] {
            try await withMigration(reveal: reveal) { receiver, gatehouse, client, _ throws in
                let email = "migrate-jo@example.com"
                let ct1 = try #require(try await client.nativeStep(.resetPasswordStart, ["username": email, "challenge_type": "oob redirect"]).continuationToken)
                #expect(try receiver.calls.first?.body?["password"] == nil)
                let challenge = try await client.nativeStep(.resetPasswordChallenge, ["continuation_token": ct1, "challenge_type": "oob redirect"])
                let verified = try await client.nativeStep(
                    .resetPasswordContinue,
                    ["continuation_token": try #require(challenge.continuationToken), "grant_type": "oob", "oob": try await client.latestCode(email)]
                )
                let submitted = try await client.native(.resetPasswordSubmit, ["continuation_token": try #require(verified.continuationToken), "new_password": "battery staple"])
                #expect(submitted.status == .ok, "reveal \(reveal): \(submitted.text)")
                #expect(try await client.login(email, "battery staple").status == .ok)
                #expect(try await migrations(gatehouse).count == 1)
            }
        }
    }

    /// Someone registered the old user's address here and never confirmed it. The owner's login with the old password
    /// replaces that pending registration: the squatter's password, links and user are gone, and the owner is in.
    @Test func aPendingSquatterLosesToTheOldSystemsOwner() async throws {
        try await withMigration { receiver, gatehouse, client, _ throws in
            let victim = "migrate-kim@example.com"
            #expect(try await client.register(victim, "squatter's password").status == .created)
            let squatter = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: victim))
            let squattersLink = try await client.latestLink(victim)
            // The squatter's own password: the old system refuses it, and the pending account stays pending.
            #expect(try await client.login(victim, "squatter's password").status == .unauthorized)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: victim)?.confirmedAt == nil)

            // The owner signs in with the old system's password.
            let owner = try await client.login(victim, Self.oldPassword)
            #expect(owner.status == .ok, "\(owner.text)")
            let ownerId = try owner.decode(LoginResponse.self).userId
            #expect(ownerId != squatter.userId)
            #expect(try await gatehouse.env.store.user(id: squatter.userId) == nil)
            #expect(try await migrations(gatehouse).first?.detail["replacedPending"] == "true")

            // The squatter's link, password and a new registration get nowhere.
            let confirm = try await client.call(Path.local("confirm"), json: ConfirmRequest(token: squattersLink.token, tokenId: squattersLink.tokenId))
            #expect(confirm.status == .badRequest)
            #expect(try await client.login(victim, "squatter's password").status == .unauthorized)
            #expect(try await client.register(victim, "squatter's password").status == .created)
            #expect(try await client.login(victim, "squatter's password").status == .unauthorized)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: victim)?.userId == ownerId)
            #expect(try await client.login(victim, Self.oldPassword).status == .ok)
            #expect(try receiver.calls.count == 2)
        }
    }

    /// A login of an address without an account asks the old system. When the answer is no, but the address got an
    /// account while it was asked (someone registered it, or a racing login of the same old user migrated it — the old
    /// system hands an address over once, so a login that read no account just before is not vouched for), the
    /// password is checked against that account, as if the login had come a moment later.
    @Test func aLoginWhoseAddressGotAnAccountWhileTheOldSystemWasAskedIsCheckedAgainstIt() async throws {
        let (asked, askedNow) = AsyncStream<Void>.makeStream()
        let (release, releaseNow) = AsyncStream<Void>.makeStream()
        let functions = FunctionHandlers(migrateUser: { _ in
            askedNow.yield()
            for await _ in release { break }
            return .unknown
        })
        var config = testConfiguration()
        config.apps[0].localUserpass?.confirmation = .auto
        try await withOpenServer(config, logger: quietLogger, functions: functions) { gatehouse in
            try await gatehouse.makeApplication().test(.router) { client in
                async let login = client.login("fresh@example.com", "the same password")
                var calls = asked.makeAsyncIterator()
                _ = await calls.next()
                #expect(try await client.register("fresh@example.com", "the same password").status == .created)
                releaseNow.yield()
                let reply = try await login
                #expect(reply.status == .ok, "\(reply.text)")
                let account = try await gatehouse.env.store.emailAccount(appId: "test-app", email: "fresh@example.com")
                #expect(try reply.decode(LoginResponse.self).userId == account?.userId)
                // Its wrong password is refused as any is.
                #expect(try await client.login("fresh@example.com", "another password").status == .unauthorized)
            }
        }
    }

    /// The old user's login or reset request asks the old system about an address Gatehouse does not know, and while
    /// it answers, someone registers the address here (pending, never confirmed). The old system's answer still wins,
    /// as it does over a registration that came first: the squatter's pending account is replaced, and the owner is
    /// in (a login) or the reset goes to the owner's migrated account (a reset request) — not a 401 for the right
    /// password, nor a reset of the squatter's account.
    @Test(arguments: [MigrateUserCall.Reason.login, .passwordReset])
    func aRegistrationWhileTheOldSystemIsAskedLosesToItsAnswer(at reason: MigrateUserCall.Reason) async throws {
        let (asked, askedNow) = AsyncStream<Void>.makeStream()
        let (release, releaseNow) = AsyncStream<Void>.makeStream()
        let functions = FunctionHandlers(migrateUser: { _ in
            askedNow.yield()
            for await _ in release { break }
            return .migrated(emailVerified: true, customData: ["plan": "gold"])
        })
        let victim = reason == .login ? "owner-at-login@example.com" : "owner-at-reset@example.com"
        try await withOpenServer(testConfiguration(), logger: quietLogger, functions: functions) { gatehouse in
            try await gatehouse.makeApplication().test(.router) { client in
                async let asking = reason == .login
                    ? client.login(victim, Self.oldPassword) : client.call(Path.local("reset/send"), json: EmailRequest(email: victim))
                var calls = asked.makeAsyncIterator()
                _ = await calls.next()
                #expect(try await client.register(victim, "squatter's password").status == .created)
                let squatter = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: victim))
                #expect(squatter.confirmedAt == nil)
                releaseNow.yield()
                let reply = try await asking
                #expect(reply.status == .ok, "\(reply.text)")

                let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: victim))
                #expect(account.userId != squatter.userId)
                #expect(account.confirmedAt != nil && account.fromOldSystem)
                #expect(try await gatehouse.env.store.user(id: squatter.userId) == nil)
                #expect(try await gatehouse.env.store.user(id: account.userId)?.customData == ["plan": "gold"])
                #expect(try await migrations(gatehouse).map { $0.detail["replacedPending"] } == ["true"])
                if reason == .login {
                    #expect(try reply.decode(LoginResponse.self).userId == account.userId)
                } else {
                    // The reset mail is the owner's account's: it sets the password the migration left empty.
                    let link = try await client.latestLink(victim)
                    let reset = ResetPasswordRequest(password: "the owner's new one", token: link.token, tokenId: link.tokenId)
                    #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
                    #expect(try await client.login(victim, "the owner's new one").decode(LoginResponse.self).userId == account.userId)
                }
                #expect(try await client.login(victim, "squatter's password").status == .unauthorized)
            }
        }
    }

    /// Embedded: a Swift closure stands in for the webhook, for logins and resets.
    @Test func aClosureStandsInForTheWebhookWhenEmbedded() async throws {
        let calls = NIOLockedValueBox<[MigrateUserCall]>([])
        let functions = FunctionHandlers(migrateUser: { call in
            calls.withLockedValue { $0.append(call) }
            guard call.email.hasPrefix("old-") else { return .unknown }
            guard call.password == nil || call.password == "from before" else { return .wrongPassword }
            return .migrated(emailVerified: true, customData: ["tier": "silver"])
        })
        let gatehouse = try await AuthServer.open(configuration: testConfiguration(), logger: quietLogger, functions: functions)
        do {
            try await gatehouse.makeApplication().test(.router) { client in
                #expect(try await client.login("old-lu@example.com", "not it").status == .unauthorized)
                #expect(try await client.login("new-lu@example.com", "from before").status == .unauthorized)
                let login = try await client.login("old-lu@example.com", "from before")
                #expect(login.status == .ok)
                #expect(try await gatehouse.env.store.user(id: try login.decode(LoginResponse.self).userId)?.customData == ["tier": "silver"])
                #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "old-mo@example.com")).status == .ok)
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "old-mo@example.com")?.passwordHash == "")
            }
            try await gatehouse.close()
        } catch {
            try? await gatehouse.close()
            throw error
        }
        let seen = calls.withLockedValue { $0 }
        #expect(seen.map(\.reason) == [.login, .login, .login, .passwordReset])
        #expect(seen.last?.password == nil)
        // A call's description never shows the password.
        #expect(!seen.map(\.description).joined().contains("from before"))
    }

    /// The function receives passwords: plain http is refused for any host but loopback, configured in a file or in
    /// code.
    @Test func theFunctionMustBeHTTPS() async throws {
        var config = testConfiguration()
        config.apps[0].localUserpass?.migrateUserFunction = WebhookSettings(url: "http://hooks.example.com/migrate", secret: FunctionTests.secret)
        let error = await #expect(throws: ConfigurationError.self) { _ = try await AuthServer.open(configuration: config, logger: quietLogger) }
        #expect(error?.key == "apps[0].providers.local-userpass.migrateUserFunction.url")
        let yaml = """
            apps:
              - id: a
                providers:
                  local-userpass:
                    migrateUserFunction: { url: "http://hooks.example.com/migrate", secret: "\(FunctionTests.secret)" }
            """
        let loaded = #expect(throws: ConfigurationError.self) { try ConfigurationLoader(environment: [:]).parse(yaml: yaml) }
        #expect(loaded?.key == "apps[0].providers.local-userpass.migrateUserFunction.url")
        let https = try ConfigurationLoader(environment: [:]).parse(yaml: yaml.replacingOccurrences(of: "http://", with: "https://"))
        #expect(https.apps[0].localUserpass?.migrateUserFunction?.url == "https://hooks.example.com/migrate")
    }
}
