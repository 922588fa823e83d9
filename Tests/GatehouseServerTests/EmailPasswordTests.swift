import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

@Suite struct RegistrationTests {
    @Test func emailConfirmationLeavesTheUserPendingAndMailsALink() async throws {
        try await withGatehouse { gatehouse, client in
            #expect(try await client.register("  Alice@Example.COM ").status == .created)
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "alice@example.com"))
            #expect(account.confirmedAt == nil)
            #expect(account.passwordHash.hasPrefix("$argon2id$v=19$m=64,t=1,p=1$"))

            let mail = try await client.mailbox("alice@example.com")
            #expect(mail.count == 1)
            #expect(mail[0].to == "Alice@Example.COM")
            #expect(mail[0].text.contains("http://gatehouse.test/app/test-app/confirm?token="))
            let link = try #require(mail[0].link)
            #expect(link.token.count >= 32)  // 128 bits or more
            #expect(Secrets.isObjectID(link.tokenId))

            // Pending users cannot log in, even with the right password.
            let login = try await client.login("alice@example.com")
            #expect(login.status == .unauthorized)
            #expect(login.error?.errorCode == .invalidPassword)
        }
    }

    @Test func theTokenIsStoredOnlyAsItsHash() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.register("hash@example.com")
            let link = try await client.latestLink("hash@example.com")
            let record = try #require(try await gatehouse.env.store.oneTimeToken(id: link.tokenId))
            #expect(record.secretHash == Secrets.sha256(link.token))
            #expect(record.secretHash != Array(link.token.utf8))
        }
    }

    @Test func configuredConfirmationURLGetsTokenAndTokenId() async throws {
        var config = testConfiguration()
        config.apps[0].localUserpass?.emailConfirmationURL = "https://example.com/confirm?lang=en"
        try await withGatehouse(config) { _, client in
            _ = try await client.register("url@example.com")
            let text = try #require(try await client.mailbox("url@example.com").first?.text)
            #expect(text.contains("https://example.com/confirm?lang=en&token="))
            #expect(text.contains("&tokenId="))
        }
    }

    @Test func autoConfirmationLogsInAtOnceAndSendsNothing() async throws {
        try await withGatehouse { _, client throws in
            #expect(try await client.register("bob@example.com", app: "auto-app").status == .created)
            #expect(try await client.login("bob@example.com", app: "auto-app").status == .ok)
            #expect(try await client.mailbox("bob@example.com").isEmpty)
        }
    }

    /// Where the app reveals user existence, as App Services does (Realm clients expect it).
    @Test func aTakenEmailIsAccountNameInUseWhateverItsCase() async throws {
        try await withGatehouse(testConfiguration(reveal: true)) { _, client in
            #expect(try await client.register("carol@example.com").status == .created)
            for variant in ["carol@example.com", "CAROL@example.com", " carol@EXAMPLE.com\n"] {
                let reply = try await client.register(variant)
                #expect(reply.status == .conflict)
                #expect(reply.error?.errorCode == .accountNameInUse)
            }
        }
    }

    /// Otherwise a taken address is answered as a new one would be, and its owner hears of it by email; the account
    /// and its password stay as they were.
    @Test func aTakenEmailIsAnsweredAsANewOneAndItsOwnerIsTold() async throws {
        try await withGatehouse { _, client in
            let owner = try await client.signUp("dora@example.com", "owner password")
            for variant in ["dora@example.com", "DORA@example.com"] {
                let reply = try await client.register(variant, "intruder password")
                #expect(reply.status == .created)
                #expect(reply.text == "{}")
            }
            let mails = try await client.mailbox("dora@example.com")
            #expect(mails.count == 3)  // the confirmation, then one notice per attempt
            #expect(mails.prefix(2).allSatisfy { $0.subject.contains("tried to create") })
            #expect(mails[0].text.contains("tried to create"))
            #expect(mails[0].link == nil)
            #expect(try await client.login("dora@example.com", "intruder password").status == .unauthorized)
            #expect(try await client.login("dora@example.com", "owner password").status == .ok)
            #expect(try await client.call(Path.session, bearer: owner.refreshToken).status == .created)
        }
    }

    @Test(arguments: ["", "plain", "a@b", "@example.com", "a@", "a b@example.com", "a@exa mple.com", "a@@example.com", "a@-x.com"])
    func invalidEmailsAreRefused(_ email: String) async throws {
        try await withGatehouse { gatehouse, client in
            let reply = try await client.register(email)
            #expect(reply.status == .badRequest)
            #expect(reply.error?.errorCode == .badRequest)
            #expect(reply.error?.error == "email invalid")
            #expect(try await gatehouse.env.store.mailbox(recipient: nil, limit: 10).isEmpty)
        }
    }

    @Test func passwordPolicyIsEnforced() async throws {
        var config = testConfiguration()
        config.apps[0].localUserpass?.password = PasswordPolicy(minLength: 10, maxLength: 20)
        try await withGatehouse(config) { gatehouse, client in
            let refusals = [
                ("short", "password_too_short: password must be at least 10 characters"),
                (String(repeating: "p", count: 21), "password_too_long: password must be at most 20 characters"),
                ("Password123", "password_banned: this password is one of the most commonly used; choose another"),
                ("DAVE@example.com", "password_is_invalid: password must not be the email address"),
            ]
            for (password, message) in refusals {
                let reply = try await client.register("dave@example.com", password)
                #expect(reply.status == .badRequest)
                #expect(reply.error?.errorCode == .badRequest)
                #expect(reply.error?.error == message)
            }
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "dave@example.com") == nil)
            #expect(try await client.register("dave@example.com", "just right!").status == .created)
        }
    }
}

@Suite struct ConfirmationTests {
    @Test func aValidTokenConfirmsOnce() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("erin@example.com")
            let link = try await client.latestLink("erin@example.com")
            let confirm = ConfirmRequest(token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("confirm"), json: confirm).status == .ok)
            #expect(try await client.login("erin@example.com").status == .ok)

            let again = try await client.call(Path.local("confirm"), json: confirm)
            #expect(again.status == .badRequest)
            #expect(again.error?.errorCode == .badRequest)
            #expect(again.error?.error == "invalid token data")
        }
    }

    @Test func wrongUnknownAndMalformedTokensAreInvalidTokenData() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("frank@example.com")
            let link = try await client.latestLink("frank@example.com")
            let bad = [
                ConfirmRequest(token: String(repeating: "0", count: 64), tokenId: link.tokenId),
                ConfirmRequest(token: link.token, tokenId: "000000000000000000000000"),
                ConfirmRequest(token: link.token, tokenId: "not-an-id"),
                ConfirmRequest(token: "", tokenId: ""),
            ]
            for request in bad {
                let reply = try await client.call(Path.local("confirm"), json: request)
                #expect(reply.status == .badRequest)
                #expect(reply.error?.error == "invalid token data")
            }
            // None of that burned the real token.
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
        }
    }

    @Test func anExpiredTokenIsRefused() async throws {
        let clock = ManualClock()
        try await withGatehouse(clock: clock) { _, client in
            _ = try await client.register("gina@example.com")
            let link = try await client.latestLink("gina@example.com")
            clock.advance(by: 1801)  // tokenTTL is 1800 s
            let reply = try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId))
            #expect(reply.error?.error == "invalid token data")
            #expect(try await client.login("gina@example.com").status == .unauthorized)
        }
    }

    @Test func aResentTokenSupersedesTheOlderOne() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("hank@example.com")
            let first = try await client.latestLink("hank@example.com")
            #expect(try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "HANK@example.com")).status == .ok)
            let second = try await client.latestLink("hank@example.com")
            #expect(first.tokenId != second.tokenId)
            #expect(try await client.mailbox("hank@example.com").count == 2)

            let old = try await client.call(Path.local("confirm"), json: ConfirmRequest(token: first.token, tokenId: first.tokenId))
            #expect(old.error?.error == "invalid token data")
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: second.token, tokenId: second.tokenId)).status == .ok)
        }
    }

    @Test func resendRevealsNothingByDefault() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("ivy@example.com")
            _ = try await client.register("jack@example.com")

            let confirmed = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "ivy@example.com"))
            let pending = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "jack@example.com"))
            let unknown = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "nobody@example.com"))
            for reply in [confirmed, pending, unknown] {
                #expect(reply.status == .ok)
                #expect(reply.body == pending.body)
            }
            // No email to an unknown address; the confirmed one is told it is already confirmed.
            #expect(try await client.mailbox("nobody@example.com").isEmpty)
            let ivy = try await client.mailbox("ivy@example.com")
            #expect(ivy.first?.subject.contains("already confirmed") == true)
            #expect(ivy.first?.link == nil)
            #expect(try await client.mailbox("jack@example.com").count == 2)
        }
    }

    @Test func resendRevealsWhenTheAppAsks() async throws {
        try await withGatehouse(testConfiguration(reveal: true)) { _, client in
            _ = try await client.signUp("kim@example.com")
            let confirmed = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "kim@example.com"))
            #expect(confirmed.status == .conflict)
            #expect(confirmed.error?.errorCode == .userAlreadyConfirmed)
            let unknown = try await client.call(Path.local("confirm/send"), json: EmailRequest(email: "nobody@example.com"))
            #expect(unknown.status == .notFound)
            #expect(unknown.error?.errorCode == .userNotFound)
        }
    }

    /// An unknown address runs the same statements as a pending one (the token and email inserts are rolled back
    /// instead of committed), so the work, hence the timing, is the same, and nothing is left behind.
    @Test func unknownAddressesDoTheSameWorkAndLeaveNothing() async throws {
        try await withGatehouse { gatehouse, client in
            _ = try await client.register("leo@example.com")
            let recording = RecordingDatabase((gatehouse.env.store as! SQLStore).db)
            var env = gatehouse.env
            env.store = SQLStore(db: recording)
            let service = EmailPasswordService(env: env)

            for send in [service.resendConfirmation, service.sendPasswordReset] {
                // The audit log's reset_requested is written for both (it tells nothing either); set apart here.
                let isAudit = { (statement: String) in statement.hasPrefix("INSERT INTO audit_events") }
                try await send("test-app", "leo@example.com")
                let knownAll = recording.drain()
                try await send("test-app", "nobody@example.com")
                let unknownAll = recording.drain()
                #expect(knownAll.filter(isAudit).count == unknownAll.filter(isAudit).count)
                let known = knownAll.filter { !isAudit($0) }
                let unknown = unknownAll.filter { !isAudit($0) }
                #expect(known.count > 3)
                #expect(known.dropLast() == unknown.dropLast())
                #expect(known.last == "COMMIT")
                #expect(unknown.last == "ROLLBACK")
            }
            #expect(try await gatehouse.env.store.mailbox(recipient: "nobody@example.com", limit: 10).isEmpty)
        }
    }
}

@Suite struct PasswordResetTests {
    @Test func resetSetsTheNewPasswordOnceAndEndsEverySession() async throws {
        try await withGatehouse { _, client in
            let login = try await client.signUp("mia@example.com", "old password")
            #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "mia@example.com")).status == .ok)
            let mail = try #require(try await client.mailbox("mia@example.com").first)
            #expect(mail.text.contains("http://gatehouse.test/app/test-app/reset?token="))
            let link = try #require(mail.link)

            let reset = ResetPasswordRequest(password: "new password", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)

            #expect(try await client.login("mia@example.com", "old password").status == .unauthorized)
            #expect(try await client.login("mia@example.com", "new password").status == .ok)
            // The session from before the reset is gone.
            let refresh = try await client.call(Path.session, bearer: login.refreshToken)
            #expect(refresh.status == .unauthorized)
            #expect(refresh.error?.errorCode == .invalidSession)
            // The token was single-use.
            let again = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "third password", token: link.token, tokenId: link.tokenId))
            #expect(again.error?.error == "invalid token data")
            #expect(try await client.login("mia@example.com", "new password").status == .ok)
        }
    }

    @Test func aPolicyViolationKeepsTheToken() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("ned@example.com")
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "ned@example.com"))
            let link = try await client.latestLink("ned@example.com")
            let short = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "x", token: link.token, tokenId: link.tokenId))
            #expect(short.status == .badRequest)
            #expect(short.error?.error.contains("password must be") == true)
            let ok = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "long enough", token: link.token, tokenId: link.tokenId))
            #expect(ok.status == .ok)
        }
    }

    @Test func aConfirmationTokenCannotResetAPassword() async throws {
        try await withGatehouse { _, client in
            _ = try await client.register("olga@example.com")
            let link = try await client.latestLink("olga@example.com")
            let reply = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "new password", token: link.token, tokenId: link.tokenId))
            #expect(reply.error?.error == "invalid token data")
        }
    }

    @Test func unknownAddressesGetTheSameAnswerUnlessRevealed() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("pam@example.com")
            let known = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "pam@example.com"))
            let unknown = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "nobody@example.com"))
            #expect(known.status == .ok)
            #expect(unknown.status == .ok)
            #expect(known.body == unknown.body)
            #expect(try await client.mailbox("nobody@example.com").isEmpty)
        }
        try await withGatehouse(testConfiguration(reveal: true)) { _, client in
            let unknown = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "nobody@example.com"))
            #expect(unknown.status == .notFound)
            #expect(unknown.error?.errorCode == .userNotFound)
        }
    }
}

/// A database that records every statement it runs.
final class RecordingDatabase: SQLDatabase, @unchecked Sendable {
    private let base: any SQLDatabase
    private let lock = NSLock()
    private var log: [String] = []
    var dialect: SQLDialect { base.dialect }

    init(_ base: any SQLDatabase) { self.base = base }

    /// Statements since the last call, and forget them.
    func drain() -> [String] { lock.withLock { defer { log = [] }; return log } }

    private func record(_ sql: String) { lock.withLock { log.append(sql) } }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        record(sql)
        return try await base.query(sql, binds)
    }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLExecutor) async throws -> T) async throws -> T {
        record("BEGIN")
        do {
            let result = try await base.transaction { tx in try await body(Recorder(base: tx, db: self)) }
            record("COMMIT")
            return result
        } catch {
            record("ROLLBACK")
            throw error
        }
    }

    func ping() async throws { try await base.ping() }
    func close() async throws { try await base.close() }

    private struct Recorder: SQLExecutor {
        let base: any SQLExecutor
        let db: RecordingDatabase
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            db.record(sql)
            return try await base.query(sql, binds)
        }
    }
}
