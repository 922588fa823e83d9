import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// A signed-in user's own account: sessions, reauthentication, password change, unlinking — and the attacker's
/// side of each: a stolen access token, an API-key session, a stale session, another user's token, a race.
@Suite struct AccountSelfServiceTests {
    @Test func changingThePasswordEndsEveryOtherSessionKeepsTheCallersAndMailsTheOwner() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let phone = try await client.signUp("change@example.com")
            let laptop = try #require(try await client.login("change@example.com").decode(LoginResponse.self))
            let native = try await client.nativeSignIn("change@example.com")

            let changed = try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "a brand new passphrase"), bearer: phone.accessToken)
            #expect(changed.status == .noContent, "\(changed.text)")

            #expect(try await client.login("change@example.com").status == .unauthorized)
            #expect(try await client.login("change@example.com", "a brand new passphrase").status == .ok)
            // Every other session ended, in both protocols; the caller's stays.
            #expect(try await client.call(Path.session, bearer: laptop.refreshToken).status == .unauthorized)
            expectNativeError(try await client.nativeRefresh(native.refreshToken!), .invalidGrant)
            #expect(try await client.call(Path.session, bearer: phone.refreshToken).status == .created)
            let notice = try #require(try await client.mailbox("change@example.com").first)
            #expect(notice.subject.contains("password was changed"))
            let kinds = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100).map(\.kind)
            #expect(kinds.contains("password_changed"))
        }
    }

    @Test func theNewPasswordKeepsThePolicyAndARefusalChangesNothing() async throws {
        try await withGatehouse { _, client in
            let owner = try await client.signUp("policy@example.com")
            let reply = try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "short"), bearer: owner.accessToken)
            #expect(reply.status == .badRequest)
            #expect(reply.error?.errorCode == .badRequest)
            #expect(try await client.login("policy@example.com").status == .ok)
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .created)
        }
    }

    /// Deleting the user cannot be undone: a stale session (a stolen refresh token mints fresh access tokens for 60
    /// days) must prove itself again first, and the account's address hears of the deletion. An anonymous user, with
    /// nothing to prove, deletes itself at any age.
    @Test func deletingTheUserNeedsARecentProofAndTellsTheAddress() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let owner = try await client.signUp("gone@example.com")
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            clock.advance(by: 301)
            let access = try await client.call(Path.session, bearer: owner.refreshToken).decode(SessionResponse.self).accessToken
            let stale = try await client.call(Path.delete, .delete, bearer: access)
            #expect(stale.status == .forbidden)
            #expect(stale.error?.errorCode == .reauthenticationRequired)
            #expect(try await gatehouse.env.store.user(id: owner.userId) != nil)
            #expect(try await client.login("gone@example.com").status == .ok)
            #expect(try await client.mailbox("gone@example.com").allSatisfy { !$0.subject.contains("deleted") })

            let reauth = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "correct horse"), bearer: access)
            #expect(reauth.status == .noContent)
            #expect(try await client.call(Path.delete, .delete, bearer: access).status == .noContent)
            #expect(try await gatehouse.env.store.user(id: owner.userId) == nil)
            let notice = try #require(try await client.mailbox("gone@example.com").first)
            #expect(notice.subject.contains("account was deleted"), "\(notice.subject)")
            #expect(notice.text.contains("gone@example.com"))

            let anonymousAccess = try await client.call(Path.session, bearer: anonymous.refreshToken).decode(SessionResponse.self).accessToken
            #expect(try await client.call(Path.delete, .delete, bearer: anonymousAccess).status == .noContent)
            #expect(try await gatehouse.env.store.user(id: anonymous.userId) == nil)
        }
    }

    /// An anonymous user links and deletes itself at any age: it has nothing to prove again. Once it upgraded, the
    /// anonymous session it upgraded with is held to the window like any other: its stolen refresh token (60 days)
    /// cannot link the thief's own address, a way in that would outlive the owner's reset, nor delete the account.
    @Test func anUpgradedUsersAnonymousSessionNeedsARecentProofToo() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            try await client.registerConfirmed("upgraded@example.com")
            try await client.registerConfirmed("thief@example.com", "the thief's password")
            let thiefs = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "thief@example.com"))
            let upgrade = try await client.call(
                Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: "upgraded@example.com", password: "correct horse"),
                bearer: anonymous.accessToken
            )
            #expect(upgrade.status == .ok, "\(upgrade.text)")

            clock.advance(by: 301)
            let access = try await client.call(Path.session, bearer: anonymous.refreshToken).decode(SessionResponse.self).accessToken
            let link = try await client.call(
                Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: "thief@example.com", password: "the thief's password"),
                bearer: access
            )
            #expect(link.status == .forbidden)
            #expect(link.error?.errorCode == .reauthenticationRequired)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "thief@example.com")?.userId == thiefs.userId)
            let delete = try await client.call(Path.delete, .delete, bearer: access)
            #expect(delete.status == .forbidden)
            #expect(delete.error?.errorCode == .reauthenticationRequired)
            #expect(try await gatehouse.env.store.user(id: anonymous.userId) != nil)

            // Proving the upgraded password again makes the session recent, as any other.
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "correct horse"), bearer: access).status == .noContent)
            #expect(try await client.call(Path.delete, .delete, bearer: access).status == .noContent)
            #expect(try await gatehouse.env.store.user(id: anonymous.userId) == nil)
        }
    }

    /// A session proven longer ago than `recentProofWindow` — a stolen access token, a phone left unlocked — must
    /// prove the password again before changing a credential; a wrong one changes nothing and counts as a failed
    /// login.
    @Test func aStaleSessionMustProveThePasswordAgain() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let owner = try await client.signUp("stale@example.com")
            clock.advance(by: 301)
            let stale = try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "a brand new passphrase"), bearer: owner.accessToken)
            #expect(stale.status == .forbidden)
            #expect(stale.error?.errorCode == .reauthenticationRequired)

            let wrong = ChangePasswordRequest(password: "a brand new passphrase", currentPassword: "not the password")
            let refused = try await client.call(AccountPath.password, json: wrong, bearer: owner.accessToken)
            #expect(refused.status == .forbidden)
            #expect(refused.error?.errorCode == .invalidPassword)
            #expect(try await client.login("stale@example.com").status == .ok)
            let failures = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100).filter { $0.kind == "login_failed" }
            #expect(failures.count == 1)

            // Reauthentication makes the session recent again, and its tokens say so.
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "wrong")).status == .unauthorized)
            let badReauth = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "wrong"), bearer: owner.accessToken)
            #expect(badReauth.status == .forbidden)
            #expect(badReauth.error?.errorCode == .invalidPassword)
            let reauth = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "correct horse"), bearer: owner.accessToken)
            #expect(reauth.status == .noContent, "\(reauth.text)")
            let access = try await client.call(Path.session, bearer: owner.refreshToken).decode(SessionResponse.self).accessToken
            let claims = try jwtPayload(access)
            #expect(claims["auth_time"] as? Int == Int(clock.now.timeIntervalSince1970))
            #expect(claims["amr"] as? [String] == ["pwd"])
            let changed = try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "a brand new passphrase"), bearer: owner.accessToken)
            #expect(changed.status == .noContent)

            // With the current password in the request, a stale session needs no separate step.
            clock.advance(by: 301)
            let inline = ChangePasswordRequest(password: "a third passphrase", currentPassword: "a brand new passphrase")
            #expect(try await client.call(AccountPath.password, json: inline, bearer: owner.accessToken).status == .noContent)
            #expect(try await client.login("stale@example.com", "a third passphrase").status == .ok)
        }
    }

    /// A user with a second address linked in signs in with either address's password, so either proves a session
    /// again; a wrong one is still refused and counted. Whoever holds the session and links an address of their own
    /// cannot use its password to wipe the failures of the owner's address. Changing the password sets it on both
    /// addresses: the old password of neither signs in afterwards.
    @Test func eitherLinkedAddressesPasswordProvesTheSession() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let owner = try await client.signUp("first@example.com")
            try await client.linkConfirmedAddress("second@example.com", "the second passphrase", into: owner.accessToken)
            let viaSecond = try await client.login("second@example.com", "the second passphrase").decode(LoginResponse.self)
            #expect(viaSecond.userId == owner.userId)

            let app = try #require(gatehouse.env.configuration.app(id: "test-app"))
            // An address's failures for the account, from every client.
            let total = { (address: String) async throws -> Int? in
                try await gatehouse.env.store.loginFailures(key: LoginBackoff(env: gatehouse.env, app: app, identifier: address).total)?.failures
            }

            clock.advance(by: 301)
            for (session, password) in [(owner.accessToken, "the second passphrase"), (viaSecond.accessToken, "correct horse")] {
                let reauth = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: password), bearer: session)
                #expect(reauth.status == .noContent, "\(reauth.text)")
            }
            // The owner proves the session with the second address's password, again and again: each try of the
            // first address is given back, and the first address is not delayed.
            for proof in 0..<8 {
                let again = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "the second passphrase"), bearer: owner.accessToken)
                #expect(again.status == .noContent, "proof \(proof): \(again.text)")
            }
            #expect(try await total("first@example.com") == nil)
            #expect(try await client.login("first@example.com", "a guess").status == .unauthorized)
            // More guesses at the first address's password, then the second's (the attacker's own, linked) proven: the
            // first address's failures stay (only the proof's own try is given back), and its fifth starts its delay.
            for _ in 0..<3 { #expect(try await client.login("first@example.com", "a guess").status == .unauthorized) }
            let own = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "the second passphrase"), bearer: owner.accessToken)
            #expect(own.status == .noContent, "\(own.text)")
            #expect(try await client.login("first@example.com", "a guess").status == .unauthorized)
            #expect(try await client.login("first@example.com").status == .tooManyRequests)
            #expect(try await total("first@example.com") == 5)
            // A password that is neither address's: counted on both, and given back on neither.
            clock.advance(by: 301)
            let wrong = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "neither passphrase"), bearer: viaSecond.accessToken)
            #expect(wrong.status == .forbidden)
            #expect(wrong.error?.errorCode == .invalidPassword)
            #expect(try await total("first@example.com") == 6)
            #expect(try await total("second@example.com") == 1)
            let failures = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: owner.userId, afterSeq: nil, limit: 100)
                .filter { $0.kind == "login_failed" && $0.detail["reason"] == "reauthentication" }
            #expect(failures.count == 1)

            // The second address's password, given as the current one, changes the password of both (the first
            // address, tried first, past its delay).
            clock.advance(by: 60)
            let change = ChangePasswordRequest(password: "one passphrase for both", currentPassword: "the second passphrase")
            let changed = try await client.call(AccountPath.password, json: change, bearer: viaSecond.accessToken)
            #expect(changed.status == .noContent, "\(changed.text)")
            clock.advance(by: 60)
            for address in ["first@example.com", "second@example.com"] {
                #expect(try await client.login(address, "one passphrase for both").status == .ok)
                for old in ["correct horse", "the second passphrase"] {
                    #expect(try await client.login(address, old).status == .unauthorized, "\(address), \(old)")
                }
            }
        }
    }

    /// A leaked API key's session may not see where the user is signed in, end sessions, prove or change anything.
    @Test func anAPIKeySessionCanNeitherSeeNorChangeTheAccount() async throws {
        try await withGatehouse { gatehouse, client in
            let owner = try await client.signUp("keyed@example.com")
            let key = try await client.createKey("ci", refreshToken: owner.refreshToken)
            let thief = try await client.loginWithKey(try #require(key.key)).decode(LoginResponse.self)
            let ownerSession = try #require(try jwtPayload(owner.accessToken)["sid"] as? String)
            expectForbidden(try await client.call(AccountPath.sessions, .get, bearer: thief.accessToken))
            expectForbidden(try await client.call(AccountPath.sessions + "?except=current", .delete, bearer: thief.accessToken))
            expectForbidden(try await client.call(AccountPath.session(ownerSession), .delete, bearer: thief.accessToken))
            expectForbidden(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "correct horse"), bearer: thief.accessToken))
            expectForbidden(try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "the thief's own"), bearer: thief.accessToken))
            let profile = try await client.call(Path.profile, .get, bearer: owner.accessToken).decode(ProfileResponse.self)
            for identity in profile.identities {
                expectForbidden(try await client.call(AccountPath.identity(identity.id), .delete, bearer: thief.accessToken))
            }
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .created)
            #expect(try await gatehouse.env.store.identities(userId: profile.userId).count == profile.identities.count)
            #expect(try await client.login("keyed@example.com").status == .ok)
        }
    }

    @Test func theSessionListShowsEachDeviceHowItWasProvenAndWhichIsTheCallers() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let phone = try await client.signUp("list@example.com")
            let native = try await client.nativeSignIn("list@example.com")
            let reply = try await client.call(AccountPath.sessions, .get, bearer: phone.accessToken)
            #expect(reply.status == .ok, "\(reply.text)")
            let sessions = try reply.decode([SessionInfo].self)
            #expect(sessions.count == 2)
            let mine = try #require(sessions.first { $0.current })
            #expect(mine.id == (try jwtPayload(phone.accessToken)["sid"] as? String))
            #expect(mine.kind == "first-party")
            #expect(mine.amr == ["pwd"])
            #expect(mine.clientId == nil)
            let other = try #require(sessions.first { !$0.current })
            #expect(other.clientId == nativeClient)
            #expect(other.id == (try jwtPayload(try #require(native.accessToken))["sid"] as? String))
            // The native session sees the same list, with itself as the current one.
            let seen = try await client.call(AccountPath.sessions, .get, bearer: try #require(native.accessToken)).decode([SessionInfo].self)
            #expect(Set(seen.map(\.id)) == Set(sessions.map(\.id)))
            #expect(seen.first { $0.current }?.id == other.id)
        }
    }

    @Test func aUserEndsOneSessionOrAllButTheirOwn() async throws {
        try await withGatehouse { gatehouse, client in
            let phone = try await client.signUp("end@example.com")
            let laptop = try await client.login("end@example.com").decode(LoginResponse.self)
            let tablet = try await client.login("end@example.com").decode(LoginResponse.self)
            let laptopSession = try #require(try jwtPayload(laptop.accessToken)["sid"] as? String)

            #expect(try await client.call(AccountPath.session(laptopSession), .delete, bearer: phone.accessToken).status == .noContent)
            #expect(try await client.call(Path.session, bearer: laptop.refreshToken).status == .unauthorized)
            #expect(try await client.call(Path.profile, .get, bearer: laptop.accessToken).status == .unauthorized)
            // Ended once; a second time it is no live session.
            let again = try await client.call(AccountPath.session(laptopSession), .delete, bearer: phone.accessToken)
            #expect(again.status == .notFound)
            #expect(again.error?.errorCode == .sessionNotFound)

            #expect(try await client.call(AccountPath.sessions + "?except=current", .delete, bearer: phone.accessToken).status == .noContent)
            #expect(try await client.call(Path.session, bearer: tablet.refreshToken).status == .unauthorized)
            #expect(try await client.call(Path.session, bearer: phone.refreshToken).status == .created)
            #expect(try await client.call(AccountPath.sessions + "?except=all", .delete, bearer: phone.accessToken).status == .badRequest)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100)
            // One row per ending: the session named, and the session that ended it; no logout row beside it.
            #expect(events.filter { $0.kind == "session_ended" }.count == 2)
            #expect(!events.contains { $0.kind == "logout" })
            let one = try #require(events.first { $0.kind == "session_ended" && $0.detail["session"] == laptopSession })
            #expect(one.detail["by"] == (try jwtPayload(phone.accessToken)["sid"] as? String) && one.detail["via"] == "self-service")
        }
    }

    /// Another user's token cannot end, or learn of, the victim's sessions or unlink its identities; nor can another
    /// app's.
    @Test func anotherUsersTokenCannotEndTheVictimsSession() async throws {
        try await withGatehouse { _, client in
            let victim = try await client.signUp("victim@example.com")
            let attacker = try await client.signUp("attacker@example.com")
            let victimSession = try #require(try jwtPayload(victim.accessToken)["sid"] as? String)
            let reply = try await client.call(AccountPath.session(victimSession), .delete, bearer: attacker.accessToken)
            #expect(reply.status == .notFound)
            #expect(reply.error?.errorCode == .sessionNotFound)
            let listed = try await client.call(AccountPath.sessions, .get, bearer: attacker.accessToken).decode([SessionInfo].self)
            #expect(!listed.contains { $0.id == victimSession })
            // A user of another app fares no better.
            #expect(try await client.register("other-app@example.com", app: "auto-app").status == .created)
            let foreign = try await client.login("other-app@example.com", app: "auto-app").decode(LoginResponse.self)
            #expect(try await client.call(AccountPath.session(victimSession), .delete, bearer: foreign.accessToken).error?.errorCode == .sessionNotFound)
            let victimProfile = try await client.call(Path.profile, .get, bearer: victim.accessToken).decode(ProfileResponse.self)
            for identity in victimProfile.identities {
                #expect(try await client.call(AccountPath.identity(identity.id), .delete, bearer: foreign.accessToken).error?.errorCode == .identityNotFound)
            }
            #expect(try await client.call(Path.session, bearer: victim.refreshToken).status == .created)
            // A refresh token is not an access token.
            #expect(try await client.call(AccountPath.sessions, .get, bearer: victim.refreshToken).status == .unauthorized)
        }
    }

    @Test func anAnonymousUserHasNoPasswordToChangeButSeesItsSessions() async throws {
        try await withGatehouse { _, client in
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            let change = try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "a brand new passphrase"), bearer: anonymous.accessToken)
            #expect(change.status == .badRequest)
            let reauth = try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "anything"), bearer: anonymous.accessToken)
            #expect(reauth.status == .badRequest)
            let sessions = try await client.call(AccountPath.sessions, .get, bearer: anonymous.accessToken).decode([SessionInfo].self)
            #expect(sessions.map(\.kind) == ["anonymous"])
            #expect(sessions.first?.amr == [])
        }
    }

    /// An identity is unlinked only with a recent proof, and never the user's last way in.
    @Test func unlinkingKeepsAWayToSignIn() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            // An anonymous user who upgrades by linking a confirmed email/password identity.
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            try await client.registerConfirmed("upgrade@example.com")
            let link = try await client.call(
                Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: "upgrade@example.com", password: "correct horse"),
                bearer: anonymous.accessToken
            )
            #expect(link.status == .ok, "\(link.text)")
            let profile = try await client.call(Path.profile, .get, bearer: anonymous.accessToken).decode(ProfileResponse.self)
            let anon = try #require(profile.identities.first { $0.providerType == "anon-user" })
            let email = try #require(profile.identities.first { $0.providerType == "local-userpass" })

            #expect(try await client.call(AccountPath.identity("0123456789abcdef01234567"), .delete, bearer: anonymous.accessToken).error?.errorCode == .identityNotFound)
            #expect(try await client.call(AccountPath.identity(anon.id), .delete, bearer: anonymous.accessToken).status == .noContent)
            #expect(try await client.mailbox("upgrade@example.com").contains { $0.subject.contains("was removed") && $0.text.contains("anonymous") })
            let last = try await client.call(AccountPath.identity(email.id), .delete, bearer: anonymous.accessToken)
            #expect(last.status == .badRequest)
            #expect(last.text.contains("last way to sign in"))
            #expect(try await client.login("upgrade@example.com").status == .ok)

            // Past the window, unlinking needs a fresh proof.
            clock.advance(by: 301)
            let fresh = try await client.login("upgrade@example.com").decode(LoginResponse.self)
            clock.advance(by: 301)
            let stale = try await client.call(AccountPath.identity(email.id), .delete, bearer: fresh.accessToken)
            #expect(stale.error?.errorCode == .reauthenticationRequired)
            #expect(try await gatehouse.env.store.identities(userId: profile.userId).map(\.providerType) == ["local-userpass"])
        }
    }

    /// An anonymous user that made an API key holds a way in besides its anonymous session, so that session is held
    /// to the window like any other (a stolen copy must not link or delete at any age). The owner is not stuck:
    /// deleting the key needs no proof, and gives the exemption back.
    @Test func anAnonymousUserHoldingAnAPIKeyIsHeldToTheWindowUntilItDeletesTheKey() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            let key = try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "device"), bearer: anonymous.refreshToken).decode(APIKeyResponse.self)
            try await client.registerConfirmed("anonymous-upgrade@example.com")
            clock.advance(by: 301)
            let link = EmailPasswordLoginRequest(username: "anonymous-upgrade@example.com", password: "correct horse")
            let refused = try await client.call(Path.local("login") + "?link=true", json: link, bearer: anonymous.accessToken)
            #expect(refused.error?.errorCode == .reauthenticationRequired)
            #expect(try await client.call(Path.apiKey(key.id), .delete, bearer: anonymous.refreshToken).status == .noContent)
            #expect(try await client.call(Path.local("login") + "?link=true", json: link, bearer: anonymous.accessToken).status == .ok)
        }
    }

    /// Adding a way in asks for a recent proof too: a stolen session older than the window can neither link an
    /// identity of the thief's (which would outlive the owner's reset) nor make an API key. An anonymous session may
    /// still link: it is how an anonymous user upgrades.
    @Test func aStaleSessionCannotAddAWayIn() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let owner = try await client.signUp("linked@example.com")
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            try await client.registerConfirmed("thief-linked@example.com")
            try await client.registerConfirmed("upgrade-late@example.com")
            clock.advance(by: 301)
            let link = EmailPasswordLoginRequest(username: "thief-linked@example.com", password: "correct horse")
            let stale = try await client.call(Path.local("login") + "?link=true", json: link, bearer: owner.accessToken)
            #expect(stale.status == .forbidden)
            #expect(stale.error?.errorCode == .reauthenticationRequired)
            let key = try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "late"), bearer: owner.refreshToken)
            #expect(key.error?.errorCode == .reauthenticationRequired)
            #expect(try await gatehouse.env.store.credentials(userId: owner.userId).map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.mailbox, .password])
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "thief-linked@example.com")?.userId != owner.userId)

            // Proven again, the owner may add both.
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(password: "correct horse"), bearer: owner.accessToken).status == .noContent)
            #expect(try await client.call(Path.local("login") + "?link=true", json: link, bearer: owner.accessToken).status == .ok)
            #expect(try await client.call(Path.apiKeys, json: CreateAPIKeyRequest(name: "late"), bearer: owner.refreshToken).status == .created)
            // The owner's address hears of each way in a session added.
            let notices = try await client.mailbox("linked@example.com").filter { $0.subject.contains("was added") }
            #expect(notices.count == 2)
            #expect(notices.contains { $0.text.contains("thief-linked@example.com") })
            #expect(notices.contains { $0.text.contains("An API key named late") })
            // The anonymous user upgrades whenever it likes.
            let upgrade = EmailPasswordLoginRequest(username: "upgrade-late@example.com", password: "correct horse")
            #expect(try await client.call(Path.local("login") + "?link=true", json: upgrade, bearer: anonymous.accessToken).status == .ok)
        }
    }

    /// Two racing unlinks of a user's two ways in: one wins, and the user keeps the other.
    @Test func racingUnlinksLeaveTheUserAWayIn() async throws {
        try await withGatehouse { gatehouse, client in
            let owner = try await client.signUp("first@example.com")
            try await client.registerConfirmed("second@example.com")
            let link = try await client.call(
                Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: "second@example.com", password: "correct horse"),
                bearer: owner.accessToken
            )
            #expect(link.status == .ok, "\(link.text)")
            let profile = try await client.call(Path.profile, .get, bearer: owner.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.count == 2)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for identity in profile.identities {
                    group.addTask { try await client.call(AccountPath.identity(identity.id), .delete, bearer: owner.accessToken).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.sorted { $0.code < $1.code } == [.noContent, .badRequest])
            #expect(try await gatehouse.env.store.identities(userId: profile.userId).count == 1)
            #expect(try await gatehouse.env.store.emailAccounts(userId: profile.userId).count == 1)
        }
    }
}

enum AccountPath {
    static let sessions = "/api/client/v2.0/auth/sessions"
    static func session(_ id: String) -> String { "\(sessions)/\(id)" }
    static let reauthenticate = "/api/client/v2.0/auth/reauthenticate"
    static let password = "/api/client/v2.0/auth/password"
    static func identity(_ id: String) -> String { "/api/client/v2.0/auth/identities/\(id)" }
}

extension TestClientProtocol {
    /// Registers and confirms `email` without logging in.
    func registerConfirmed(_ email: String, _ password: String = "correct horse") async throws {
        #expect(try await register(email, password).status == .created)
        let link = try await latestLink(email)
        #expect(try await call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
    }

    /// Registers and confirms `email`, then links it, by its password, into the user whose access token is `session`.
    func linkConfirmedAddress(_ email: String, _ password: String, into session: String) async throws {
        try await registerConfirmed(email, password)
        let link = try await call(Path.local("login") + "?link=true", json: EmailPasswordLoginRequest(username: email, password: password), bearer: session)
        #expect(link.status == .ok, "\(link.text)")
    }

    /// A native password sign-in of a confirmed `email`: the tokens.
    func nativeSignIn(_ email: String, password: String = "correct horse") async throws -> NativeAuthTokenResponse {
        let started = try await nativeStep(.signInInitiate, ["username": email, "challenge_type": allChallengeTypes])
        let challenged = try await nativeStep(
            .signInChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": allChallengeTypes]
        )
        let reply = try await native(
            .token,
            [
                "continuation_token": try #require(challenged.continuationToken), "grant_type": "password", "password": password,
                "username": email, "scope": "openid profile offline_access", "challenge_type": allChallengeTypes,
            ]
        )
        #expect(reply.status == .ok, "\(reply.text)")
        return try reply.decode(NativeAuthTokenResponse.self)
    }
}
