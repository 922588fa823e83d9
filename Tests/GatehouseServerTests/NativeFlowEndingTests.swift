import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// A native sign-in or reset flow fixes its user when it starts, and lives for minutes. Whatever ends the user's
/// sessions ends the flows under way too, and a flow whose address is no longer the user's goes nowhere
/// (``NativeFlowRecord/userEpoch``): otherwise someone who held the account for a moment — a stolen session that moved
/// the address to their own mailbox — starts flows for that address and, after the owner's undo, reset and log out
/// everywhere, redeems a held code for a fresh session on the owner's user, or sets their own password.
@Suite struct NativeFlowEndingTests {
    /// A code sign-in started for `email`, at the code: its continuation token and the code.
    func codeSignIn(_ client: any TestClientProtocol, _ email: String) async throws -> (token: String, code: String) {
        let started = try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": "oob redirect"])
        let challenged = try await client.nativeStep(
            .signInChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": "oob redirect"]
        )
        return (try #require(challenged.continuationToken), try await client.latestCode(email))
    }

    /// A reset started for `email`, its code accepted: the continuation token that `submit` takes.
    func resetAtNewPassword(_ client: any TestClientProtocol, _ email: String) async throws -> String {
        let started = try await client.nativeStep(.resetPasswordStart, ["username": email, "challenge_type": "oob redirect"])
        let challenged = try await client.nativeStep(
            .resetPasswordChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": "oob redirect"]
        )
        let code = try await client.latestCode(email)
        let continued = try await client.nativeStep(
            .resetPasswordContinue, ["continuation_token": try #require(challenged.continuationToken), "grant_type": "oob", "oob": code]
        )
        return try #require(continued.continuationToken)
    }

    /// A reset of `email` to `password`, submitted and polled: the continuation token of its sign-in after the reset.
    func resetUpToItsSignIn(_ client: any TestClientProtocol, _ email: String, _ password: String) async throws -> String {
        let submitted = try await client.native(
            .resetPasswordSubmit, ["continuation_token": try await resetAtNewPassword(client, email), "new_password": password]
        )
        #expect(submitted.status == .ok, "\(submitted.text)")
        let polled = try await client.native(
            .resetPasswordPollCompletion, ["continuation_token": try submitted.decode(NativeAuthSubmitResponse.self).continuationToken]
        ).decode(NativeAuthPollResponse.self)
        #expect(polled.status == .succeeded)
        return try #require(polled.continuationToken)
    }

    /// A password sign-in started for `email`, at the password: its continuation token.
    func passwordSignIn(_ client: any TestClientProtocol, _ email: String) async throws -> String {
        let started = try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": "password redirect"])
        let challenged = try await client.nativeStep(
            .signInChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": "password redirect"]
        )
        return try #require(challenged.continuationToken)
    }

    func submitPassword(_ client: any TestClientProtocol, _ token: String, _ password: String) async throws -> Reply {
        try await client.native(.token, ["continuation_token": token, "grant_type": "password", "password": password, "scope": "openid offline_access"])
    }

    /// The attempts the flow behind a continuation token has counted.
    func attempts(_ gatehouse: AuthServer, _ token: String) async throws -> Int? {
        try await gatehouse.env.store.flow(id: try #require(OpaqueToken(token)).id)?.attempts
    }

    /// Checks that `replies` all say "start again" (the flow's basis ended), alike: nothing in them tells a right answer
    /// from a wrong one.
    func expectStartAgain(_ replies: [Reply], sourceLocation: SourceLocation = #_sourceLocation) {
        for reply in replies {
            expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken, sourceLocation: sourceLocation)
            #expect(reply.nativeError?.errorDescription.contains("start again") == true, "\(reply.text)", sourceLocation: sourceLocation)
        }
        let told = Set(replies.map { [$0.nativeError?.error, $0.nativeError?.errorDescription, $0.nativeError?.suberror].map { $0 ?? "-" } })
        #expect(told.count == 1, "\(told)", sourceLocation: sourceLocation)
    }

    func redeem(_ client: any TestClientProtocol, _ held: (token: String, code: String)) async throws -> Reply {
        try await client.native(.token, ["continuation_token": held.token, "grant_type": "oob", "oob": held.code, "scope": "openid offline_access"])
    }

    @Test func flowsAThiefStartedForTheAddressDieWithTheOwnersUndo() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let owner = try await client.signUp("owner@example.com", "the owner's password")
            // A thief with the owner's fresh session moves the address to their own mailbox.
            try await client.moveAddress(to: "thief@example.com", bearer: owner.accessToken)
            // …and holds a code sign-in and a reset at its last step, both for the thief's address, now the owner's user's.
            let signIn = try await codeSignIn(client, "thief@example.com")
            let reset = try await resetAtNewPassword(client, "thief@example.com")

            // The owner undoes the change (every session ends), and sets a new password.
            #expect(try await client.undoEmailChange(mailedTo: "owner@example.com").status == .ok)
            let sessions = try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id)

            // The held code signs no one in, and the held reset sets no password.
            expectNativeError(try await redeem(client, signIn), .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            let submit = try await client.native(.resetPasswordSubmit, ["continuation_token": reset, "new_password": "the thief's password"])
            expectNativeError(submit, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            #expect(try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id) == sessions)
            #expect(try await gatehouse.env.store.emailAccounts(userId: owner.userId).map(\.email) == ["owner@example.com"])
            #expect(try await client.login("thief@example.com", "the thief's password").status == .unauthorized)
            // The owner's own way in is untouched: a reset by link, then a sign-in.
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "owner@example.com")).status == .ok)
            let resetLink = try await client.latestLink("owner@example.com")
            let ownerReset = ResetPasswordRequest(password: "the owner's new password", token: resetLink.token, tokenId: resetLink.tokenId)
            #expect(try await client.call(Path.local("reset"), json: ownerReset).status == .ok)
            #expect(try await client.login("owner@example.com", "the owner's new password").status == .ok)
        }
    }

    /// Each way the owner ends every session, while someone else holds a code of a flow for the owner's address.
    enum Ending: String, CaseIterable, CustomTestStringConvertible {
        case resetByLink, logOutEverywhere, endOtherSessions, passwordChange, nativeReset
        var testDescription: String { rawValue }
    }

    @Test(arguments: Ending.allCases) func aHeldCodeOfAFlowBeforeAnEndingSignsNoOneIn(_ ending: Ending) async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let owner = try await client.signUp("kai@example.com", "the owner's password")
            let held = try await codeSignIn(client, "kai@example.com")
            switch ending {
            case .resetByLink:
                #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "kai@example.com")).status == .ok)
                let link = try await client.latestLink("kai@example.com")
                let reset = ResetPasswordRequest(password: "a new password", token: link.token, tokenId: link.tokenId)
                #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            case .logOutEverywhere:
                #expect(try await client.call("/api/client/v2.0/auth/sessions", .delete, bearer: owner.accessToken).status == .noContent)
            case .endOtherSessions:
                #expect(try await client.call("/api/client/v2.0/auth/sessions?except=current", .delete, bearer: owner.accessToken).status == .noContent)
            case .passwordChange:
                let change = try await client.call("/api/client/v2.0/auth/password", body: #"{"password":"a new password"}"#, bearer: owner.accessToken)
                #expect(change.status == .noContent, "\(change.text)")
            case .nativeReset:
                let submitted = try await client.native(
                    .resetPasswordSubmit, ["continuation_token": try await resetAtNewPassword(client, "kai@example.com"), "new_password": "a new password"]
                )
                #expect(submitted.status == .ok, "\(submitted.text)")
                let token = try submitted.decode(NativeAuthSubmitResponse.self).continuationToken
                let polled = try await client.native(.resetPasswordPollCompletion, ["continuation_token": token]).decode(NativeAuthPollResponse.self)
                #expect(polled.status == .succeeded)
                // The reset's own sign-in after it still works: the flow holds to the user as its reset left it.
                _ = try await client.nativeTokens(try #require(polled.continuationToken), username: "kai@example.com")
            }
            let live = try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id)

            // A wrong code and the right one get the same answer, before either is checked: start again. The flow
            // counts no attempt for them.
            let wrong = (token: held.token, code: held.code == "00000000" ? "11111111" : "00000000")
            expectStartAgain([try await redeem(client, wrong), try await redeem(client, held)])
            #expect(try await attempts(gatehouse, held.token) == 0)
            #expect(try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id) == live)
            // A flow started after the ending signs in as ever.
            #expect(try await redeem(client, try await codeSignIn(client, "kai@example.com")).status == .ok)
        }
    }

    /// A thief with one of the owner's sessions, however stale, ends the other sessions again and again (which needs
    /// no recent proof). That ends the owner's native sign-ins under way, but never the owner's native reset: its
    /// code proves the mailbox, and the reset then ends the thief's session too. The owner signs in after it.
    @Test func endingTheOtherSessionsAgainAndAgainNeverStopsTheOwnersReset() async throws {
        let clock = ManualClock()
        try await withGatehouse(nativeConfiguration(), clock: clock) { _, client in
            let stolen = try await client.signUp("kai@example.com", "the owner's password")
            clock.advance(by: 3600)
            func thiefEndsTheOthers() async throws {
                let access = try await client.call(Path.session, bearer: stolen.refreshToken).decode(SessionResponse.self).accessToken
                #expect(try await client.call("/api/client/v2.0/auth/sessions?except=current", .delete, bearer: access).status == .noContent)
            }

            let started = try await client.nativeStep(.resetPasswordStart, ["username": "kai@example.com", "challenge_type": "oob redirect"])
            try await thiefEndsTheOthers()
            let challenged = try await client.nativeStep(
                .resetPasswordChallenge, ["continuation_token": try #require(started.continuationToken), "challenge_type": "oob redirect"]
            )
            try await thiefEndsTheOthers()
            let code = try await client.latestCode("kai@example.com")
            let continued = try await client.nativeStep(
                .resetPasswordContinue, ["continuation_token": try #require(challenged.continuationToken), "grant_type": "oob", "oob": code]
            )
            try await thiefEndsTheOthers()
            let submitted = try await client.native(
                .resetPasswordSubmit, ["continuation_token": try #require(continued.continuationToken), "new_password": "the owner's new password"]
            )
            #expect(submitted.status == .ok, "\(submitted.text)")
            let polled = try await client.native(
                .resetPasswordPollCompletion, ["continuation_token": try submitted.decode(NativeAuthSubmitResponse.self).continuationToken]
            ).decode(NativeAuthPollResponse.self)
            #expect(polled.status == .succeeded)

            // The thief's session ended with the reset; the owner signs in after it, and with the new password.
            #expect(try await client.call(Path.session, bearer: stolen.refreshToken).status == .unauthorized)
            _ = try await client.nativeTokens(try #require(polled.continuationToken), username: "kai@example.com")
            #expect(try await client.login("kai@example.com", "the owner's new password").status == .ok)
        }
    }

    /// Someone who could read the owner's mailbox for a while made a native reset (its sign-in after it not yet
    /// taken), and holds another at its password and a reset link. The owner gets the mailbox back and resets, by
    /// either protocol: none of what the other holds sets a password or signs in any more.
    @Test(arguments: [false, true]) func aResetEndsEveryResetUnderWayOfEitherProtocol(ownerResetsNatively: Bool) async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let email = "rue@example.com"
            let owner = try await client.signUp(email, "the owner's password")
            // A reset finished up to its sign-in, then one held at the new password, then a link.
            let heldSignIn = try await resetUpToItsSignIn(client, email, "the other's first password")
            let heldReset = try await resetAtNewPassword(client, email)
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: email)).status == .ok)
            let heldLink = try await client.latestLink(email)

            // The owner resets, and signs in after it.
            if ownerResetsNatively {
                _ = try await client.nativeTokens(try await resetUpToItsSignIn(client, email, "the owner's new password"), username: email)
            } else {
                #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: email)).status == .ok)
                let link = try await client.latestLink(email)
                let reset = ResetPasswordRequest(password: "the owner's new password", token: link.token, tokenId: link.tokenId)
                #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
            }
            let live = try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id)

            // The finished reset's sign-in, the held reset's submit and the held link: all refused, nothing written.
            let signIn = try await client.native(
                .token, ["continuation_token": heldSignIn, "grant_type": "continuation_token", "username": email, "scope": "openid offline_access"]
            )
            expectNativeError(signIn, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            let submit = try await client.native(.resetPasswordSubmit, ["continuation_token": heldReset, "new_password": "the other's second password"])
            expectNativeError(submit, .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            let linkReset = ResetPasswordRequest(password: "the other's third password", token: heldLink.token, tokenId: heldLink.tokenId)
            #expect(try await client.call(Path.local("reset"), json: linkReset).status == .badRequest)

            #expect(try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id) == live)
            for other in ["the other's first password", "the other's second password", "the other's third password"] {
                #expect(try await client.login(email, other).status == .unauthorized)
            }
            #expect(try await client.login(email, "the owner's new password").status == .ok)
        }
    }

    /// A flow for an address its user gave up since (an email change, which ends no session) goes nowhere: the old
    /// mailbox's holder is no longer anyone's way in.
    @Test func aFlowForAnAddressItsUserNoLongerHasSignsNoOneIn() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let owner = try await client.signUp("before@example.com", "the owner's password")
            let held = try await codeSignIn(client, "before@example.com")
            try await client.moveAddress(to: "after@example.com", bearer: owner.accessToken)
            let live = try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id)
            #expect(live.count == 1, "the email change ends no session")

            expectNativeError(try await redeem(client, held), .invalidGrant, code: NativeAuthErrorCode.invalidContinuationToken)
            #expect(try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).map(\.id) == live)
            #expect(try await redeem(client, try await codeSignIn(client, "after@example.com")).status == .ok)
        }
    }

    /// A password sign-in under way when its user ends every session (here: log out everywhere, which leaves the
    /// password as it was). Whatever password it is sent next, right or wrong, it answers "start again" before
    /// checking it: so it tells a guesser nothing, and the owner is not told "wrong password" until the flow's
    /// attempts run out. A new flow signs in with the password.
    @Test func aPasswordSignInHeldPastAnEndingIsToldToStartAgainWhateverItIsSent() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            let owner = try await client.signUp("kai@example.com", "the owner's password")
            let held = try await passwordSignIn(client, "kai@example.com")
            #expect(try await client.call("/api/client/v2.0/auth/sessions", .delete, bearer: owner.accessToken).status == .noContent)

            var replies: [Reply] = []
            for password in ["the owner's password", "a wrong guess", "the owner's password"] {
                replies.append(try await submitPassword(client, held, password))
            }
            expectStartAgain(replies)
            #expect(try await attempts(gatehouse, held) == 0)
            #expect(try await gatehouse.env.store.liveSessions(userId: owner.userId, now: gatehouse.env.clock.now).isEmpty)

            let fresh = try await submitPassword(client, try await passwordSignIn(client, "kai@example.com"), "the owner's password")
            #expect(fresh.status == .ok, "\(fresh.text)")
        }
    }
}
