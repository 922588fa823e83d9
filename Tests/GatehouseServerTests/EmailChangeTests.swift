import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// Changing the address while signed in, the undo link, and reauthentication by a mailed code — and the attacker's
/// side: a stolen session, a taken or pending address, a code used in another session, races, and the owner who
/// undoes what the attacker did, password change included.
@Suite struct EmailChangeTests {
    @Test func theAddressChangesOnlyWhenTheNewMailboxProvesItAndBothProtocolsSeeItAtOnce() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let owner = try await client.signUp("old@example.com")
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "New@Example.com"), bearer: owner.accessToken).status == .noContent)
            // Nothing changed yet.
            #expect(try await client.login("old@example.com").status == .ok)
            let code = try await client.latestCode("new@example.com")
            let wrong = try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: "00000000"), bearer: owner.accessToken)
            #expect(wrong.status == .badRequest)
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: code), bearer: owner.accessToken).status == .noContent)

            #expect(try await client.login("old@example.com").status == .unauthorized)
            #expect(try await client.login("new@example.com").status == .ok)
            _ = try await client.nativeSignIn("new@example.com")
            let profile = try await client.call(Path.profile, .get, bearer: owner.accessToken).decode(ProfileResponse.self)
            #expect(profile.data["email"] == .string("New@Example.com"))
            // The caller's session lives; the old address got the undo link.
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .created)
            let notice = try #require(try await client.mailbox("old@example.com").first)
            #expect(notice.subject.contains("was changed"))
            #expect(notice.text.contains("/app/test-app/email/undo?"))
            // The code is spent.
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: code), bearer: owner.accessToken).status == .badRequest)
            let kinds = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: profile.userId, afterSeq: nil, limit: 50).map(\.kind)
            #expect(kinds.contains("email_change_requested") && kinds.contains("email_changed"))
        }
    }

    /// An address another account has confirmed answers as a free one; its owner is told, and no code exists.
    @Test func aTakenAddressAnswersLikeAFreeOneAndItsOwnerHearsOfIt() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.signUp("taken@example.com")
            let attacker = try await client.signUp("attacker@example.com")
            let free = try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "free@example.com"), bearer: attacker.accessToken)
            let taken = try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "taken@example.com"), bearer: attacker.accessToken)
            #expect(free.status == taken.status)
            #expect(free.body == taken.body)
            let notice = try #require(try await client.mailbox("taken@example.com").first)
            #expect(notice.subject.contains("tried to move"))
            #expect(notice.text.firstMatch(of: /\d{8}/) == nil)
            // No code can succeed: the only code row for taken@ is born dead.
            for guess in ["12345678", "00000000"] {
                #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: guess), bearer: attacker.accessToken).status == .badRequest)
            }
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "taken@example.com"))
            #expect(try await client.login("taken@example.com").status == .ok)
            #expect(try await gatehouse.env.store.emailAccounts(userId: account.userId).map(\.email) == ["taken@example.com"])
        }
    }

    /// A registration of the new address that no one confirmed is not taken over: the change proves the mailbox,
    /// and the registrant's password never signs in.
    @Test func aPendingRegistrationAtTheNewAddressIsNotTakenOver() async throws {
        try await withGatehouse { _, client in
            #expect(try await client.register("pending@example.com", "the squatter's password").status == .created)
            let squatterLink = try await client.latestLink("pending@example.com")
            let owner = try await client.signUp("owner@example.com")
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "pending@example.com"), bearer: owner.accessToken).status == .noContent)
            let code = try await client.latestCode("pending@example.com")
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: code), bearer: owner.accessToken).status == .noContent)
            #expect(try await client.login("pending@example.com", "the squatter's password").status == .unauthorized)
            #expect(try await client.login("pending@example.com").status == .ok)
            // The squatter's confirmation link died with the registration.
            let confirm = try await client.call(Path.local("confirm"), json: ConfirmRequest(token: squatterLink.token, tokenId: squatterLink.tokenId))
            #expect(confirm.status == .badRequest)
            #expect(try await client.login("pending@example.com", "the squatter's password").status == .unauthorized)
        }
    }

    /// A code is good only in the session that asked for it: a stolen code, or one replayed from another device, fails.
    @Test func aCodeWorksOnlyInTheSessionThatAskedForIt() async throws {
        try await withGatehouse { _, client in
            let phone = try await client.signUp("codes@example.com")
            let laptop = try await client.login("codes@example.com").decode(LoginResponse.self)
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "codes-new@example.com"), bearer: phone.accessToken).status == .noContent)
            let code = try await client.latestCode("codes-new@example.com")
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: code), bearer: laptop.accessToken).status == .badRequest)
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: code), bearer: phone.accessToken).status == .noContent)

            #expect(try await client.call(EmailPath.reauthenticateSend, .post, bearer: phone.accessToken).status == .noContent)
            let reauth = try await client.latestCode("codes-new@example.com")
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(code: reauth), bearer: laptop.accessToken).status == .badRequest)
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(code: reauth), bearer: phone.accessToken).status == .noContent)
            // Used once.
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(code: reauth), bearer: phone.accessToken).status == .badRequest)
        }
    }

    /// A stale session proves itself with a code mailed to the account's address; the session then records `otp`.
    /// Five guesses per code, then it is dead.
    @Test func aMailedCodeProvesAStaleSessionAndGuessesRunOut() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let owner = try await client.signUp("reauth@example.com")
            clock.advance(by: 301)
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "x@example.com"), bearer: owner.accessToken).error?.errorCode == .reauthenticationRequired)
            #expect(try await client.call(EmailPath.reauthenticateSend, .post, bearer: owner.accessToken).status == .noContent)
            let code = try await client.latestCode("reauth@example.com")
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(code: code), bearer: owner.accessToken).status == .noContent)
            let access = try await client.call(Path.session, bearer: owner.refreshToken).decode(SessionResponse.self).accessToken
            #expect(try jwtPayload(access)["amr"] as? [String] == ["pwd", "otp"])
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "x@example.com"), bearer: owner.accessToken).status == .noContent)

            // A new code, guessed wrong five times: the right one no longer works.
            clock.advance(by: 301)
            #expect(try await client.call(EmailPath.reauthenticateSend, .post, bearer: owner.accessToken).status == .noContent)
            let fresh = try await client.latestCode("reauth@example.com")
            let wrong = fresh == "00000000" ? "11111111" : "00000000"
            for _ in 0..<AccountCodes.maxAttempts {
                #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(code: wrong), bearer: owner.accessToken).status == .badRequest)
            }
            #expect(try await client.call(AccountPath.reauthenticate, json: ReauthenticateRequest(code: fresh), bearer: owner.accessToken).status == .badRequest)
        }
    }

    /// Someone with the owner's fresh session moves the account to their own address, sets their own password and
    /// makes an API key. The old address's undo link takes it all back: the address, every session, the key, and
    /// the password, which the owner then sets through a reset mailed to the restored address.
    @Test func theUndoLinkTakesBackTheAccountEvenAfterTheAttackerChangedThePassword() async throws {
        try await withGatehouse { gatehouse, client in
            let stolen = try await client.signUp("victim@example.com")
            let key = try await client.createKey("thief", refreshToken: stolen.refreshToken)
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "thief@example.com"), bearer: stolen.accessToken).status == .noContent)
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: try await client.latestCode("thief@example.com")), bearer: stolen.accessToken).status == .noContent)
            #expect(try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "the thief's password"), bearer: stolen.accessToken).status == .noContent)
            // And on to a second address of theirs: the undo link still names the account.
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "thief2@example.com"), bearer: stolen.accessToken).status == .noContent)
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: try await client.latestCode("thief2@example.com")), bearer: stolen.accessToken).status == .noContent)
            #expect(try await client.login("thief2@example.com", "the thief's password").status == .ok)

            let undoMail = try #require(try await client.mailbox("victim@example.com").first { $0.subject.contains("was changed") })
            let link = try #require(undoMail.link)
            let undo = try await client.call(EmailPath.undo, json: ConfirmRequest(token: link.token, tokenId: link.tokenId))
            #expect(undo.status == .ok, "\(undo.text)")

            #expect(try await client.call(Path.session, bearer: stolen.refreshToken).status == .unauthorized)
            #expect(try await client.login("thief2@example.com", "the thief's password").status == .unauthorized)
            #expect(try await client.login("victim@example.com", "the thief's password").status == .unauthorized)
            #expect(try await client.loginWithKey(try #require(key.key)).status == .unauthorized)
            // Once only.
            #expect(try await client.call(EmailPath.undo, json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .badRequest)
            // The owner sets a password through the restored address.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "victim@example.com")).status == .ok)
            let reset = try await client.latestLink("victim@example.com")
            #expect(try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "the owner's new one", token: reset.token, tokenId: reset.tokenId)).status == .ok)
            #expect(try await client.login("victim@example.com", "the owner's new one").status == .ok)
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "victim@example.com"))
            #expect(try await gatehouse.env.store.emailAccounts(userId: account.userId).map(\.email) == ["victim@example.com"])
        }
    }

    /// Someone with the owner's session moves the account to their address B, then to C, and uses the undo link B got
    /// first: B comes back to them. The owner's link, for the older address A, still works and outranks it: A comes
    /// back, and B's holder is out.
    @Test func anUndoOfALaterChangeNeverVoidsTheOwnersUndo() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { gatehouse, client in
            let stolen = try await client.signUp("owner-a@example.com")
            for address in ["thief-b@example.com", "thief-c@example.com"] {
                clock.advance(by: 1)
                #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: address), bearer: stolen.accessToken).status == .noContent)
                let code = try await client.latestCode(address)
                #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: code), bearer: stolen.accessToken).status == .noContent)
            }
            let ownersLink = try #require(try await client.mailbox("owner-a@example.com").first { $0.subject.contains("was changed") }?.link)
            let thiefsLink = try #require(try await client.mailbox("thief-b@example.com").first { $0.subject.contains("was changed") }?.link)
            clock.advance(by: 1)
            #expect(try await client.call(EmailPath.undo, json: ConfirmRequest(token: thiefsLink.token, tokenId: thiefsLink.tokenId)).status == .ok)
            // The thief sets a password through B and signs in.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "thief-b@example.com")).status == .ok)
            let thiefReset = try await client.latestLink("thief-b@example.com")
            #expect(try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "the thief's", token: thiefReset.token, tokenId: thiefReset.tokenId)).status == .ok)
            let thief = try await client.login("thief-b@example.com", "the thief's").decode(LoginResponse.self)

            clock.advance(by: 1)
            let undo = try await client.call(EmailPath.undo, json: ConfirmRequest(token: ownersLink.token, tokenId: ownersLink.tokenId))
            #expect(undo.status == .ok, "\(undo.text)")
            #expect(try await client.call(Path.session, bearer: thief.refreshToken).status == .unauthorized)
            #expect(try await client.login("thief-b@example.com", "the thief's").status == .unauthorized)
            #expect(try await client.login("owner-a@example.com", "the thief's").status == .unauthorized)
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "owner-a@example.com"))
            #expect(account.userId == stolen.userId)
            #expect(try await gatehouse.env.store.emailAccounts(userId: stolen.userId).map(\.email) == ["owner-a@example.com"])
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "owner-a@example.com")).status == .ok)
            let reset = try await client.latestLink("owner-a@example.com")
            #expect(try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "the owner's", token: reset.token, tokenId: reset.tokenId)).status == .ok)
            #expect(try await client.login("owner-a@example.com", "the owner's").decode(LoginResponse.self).userId == stolen.userId)
        }
    }

    /// Two users race to move to one free address (each proved it: both hold a code from it); one gets it.
    @Test func twoRacingChangesToOneAddressLeaveItWithOne() async throws {
        try await withGatehouse { gatehouse, client in
            let first = try await client.signUp("first@example.com")
            let second = try await client.signUp("second@example.com")
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "prize@example.com"), bearer: first.accessToken).status == .noContent)
            let firstCode = try await client.latestCode("prize@example.com")
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "prize@example.com"), bearer: second.accessToken).status == .noContent)
            let secondCode = try await client.latestCode("prize@example.com")
            async let a = client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: firstCode), bearer: first.accessToken)
            async let b = client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: secondCode), bearer: second.accessToken)
            let statuses = try await [a.status, b.status]
            #expect(statuses.filter { $0 == .noContent }.count == 1, "\(statuses)")
            #expect(statuses.contains(.conflict))
            let holder = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "prize@example.com"))
            let winner = statuses[0] == .noContent ? first.userId : second.userId
            #expect(holder.userId == winner)
        }
    }

    @Test func keySessionsStaleSessionsAndAnonymousUsersCannotChangeTheAddress() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            let owner = try await client.signUp("guarded@example.com")
            let key = try await client.createKey("ci", refreshToken: owner.refreshToken)
            let keySession = try await client.loginWithKey(try #require(key.key)).decode(LoginResponse.self)
            expectForbidden(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "k@example.com"), bearer: keySession.accessToken))
            expectForbidden(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: "12345678"), bearer: keySession.accessToken))
            expectForbidden(try await client.call(EmailPath.reauthenticateSend, .post, bearer: keySession.accessToken))
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", json: AnonymousLoginRequest()).decode(LoginResponse.self)
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "a@example.com"), bearer: anonymous.accessToken).status == .badRequest)
            clock.advance(by: 301)
            let wrong = ChangeEmailRequest(email: "s@example.com", currentPassword: "not it")
            #expect(try await client.call(EmailPath.change, json: wrong, bearer: owner.accessToken).error?.errorCode == .invalidPassword)
            #expect(try await client.mailbox("s@example.com").isEmpty)
            let right = ChangeEmailRequest(email: "s@example.com", currentPassword: "correct horse")
            #expect(try await client.call(EmailPath.change, json: right, bearer: owner.accessToken).status == .noContent)
            #expect(try await client.mailbox("s@example.com").count == 1)
        }
    }

    /// The hosted undo page changes nothing on GET (mail scanners open links); its button undoes the change and
    /// asks for the new password at once.
    @Test func theHostedUndoPageUndoesOnlyOnItsButtonAndThenSetsAPassword() async throws {
        try await withGatehouse { _, client in
            let owner = try await client.signUp("page@example.com")
            #expect(try await client.call(EmailPath.change, json: ChangeEmailRequest(email: "page-new@example.com"), bearer: owner.accessToken).status == .noContent)
            #expect(try await client.call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: try await client.latestCode("page-new@example.com")), bearer: owner.accessToken).status == .noContent)
            let link = try #require(try await client.mailbox("page@example.com").first?.link)
            let pages = HostedPagesTests()
            let (page, csrf) = try await pages.open(client, "/app/test-app/email/undo?token=\(link.token)&tokenId=\(link.tokenId)")
            #expect(page.status == .ok)
            #expect(try await client.login("page-new@example.com").status == .ok)
            let undone = try await client.postForm("/app/test-app/email/undo", ["token": link.token, "tokenId": link.tokenId, "csrf": try #require(csrf)], cookie: csrf)
            #expect(undone.status == .ok)
            #expect(undone.text.contains("action=\"../reset\""))
            #expect(try await client.login("page-new@example.com").status == .unauthorized)
            let token = try #require(undone.text.firstMatch(of: /name="token" value="([^"]+)"/)?.output.1)
            let tokenId = try #require(undone.text.firstMatch(of: /name="tokenId" value="([^"]+)"/)?.output.1)
            let set = try await client.postForm(
                "/app/test-app/reset",
                ["token": String(token), "tokenId": String(tokenId), "password": "back in control", "passwordConfirmation": "back in control", "csrf": csrf!],
                cookie: csrf
            )
            #expect(set.status == .ok, "\(set.text)")
            #expect(try await client.login("page@example.com", "back in control").status == .ok)
        }
    }
}

enum EmailPath {
    static let change = "/api/client/v2.0/auth/email"
    static let confirm = "/api/client/v2.0/auth/email/confirm"
    static let reauthenticateSend = "/api/client/v2.0/auth/reauthenticate/send"
    static let undo = Path.local("email/undo")
}

extension TestClientProtocol {
    /// Moves the signed-in user's address to `new` with the session of `accessToken` (a fresh one: the change asks for
    /// a recent proof), confirming with the code mailed there. Both steps must succeed.
    func moveAddress(to new: String, bearer accessToken: String) async throws {
        #expect(try await call(EmailPath.change, json: ChangeEmailRequest(email: new), bearer: accessToken).status == .noContent)
        let code = try await latestCode(new)
        #expect(try await call(EmailPath.confirm, json: ConfirmEmailChangeRequest(code: code), bearer: accessToken).status == .noContent)
    }

    /// The undo link of the "was changed" notice mailed to the old address `old`.
    func undoLink(mailedTo old: String) async throws -> (token: String, tokenId: String) {
        try #require(try await mailbox(old).first { $0.subject.contains("was changed") }?.link)
    }

    /// Follows the undo link mailed to the old address `old`; the answer.
    func undoEmailChange(mailedTo old: String) async throws -> Reply {
        let link = try await undoLink(mailedTo: old)
        return try await call(EmailPath.undo, json: ConfirmRequest(token: link.token, tokenId: link.tokenId))
    }
}
