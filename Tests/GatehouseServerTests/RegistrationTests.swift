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

    /// A registration's writes (user, identity, account, token, mail) go together, as one statement on PostgreSQL:
    /// when the account's insert finds the address taken, none of the others is left behind.
    @Test func aRegistrationWhoseAddressIsTakenLeavesNothingBehind() async throws {
        try await withGatehouse { gatehouse, client in
            #expect(try await client.register("kim@example.com").status == .created)
            let store = gatehouse.env.store
            let app = try #require(gatehouse.env.configuration.app(id: "test-app"))
            let email = try #require(EmailAddress("kim@example.com"))
            let now = gatehouse.env.clock.now
            let userId = Secrets.objectID(at: now)
            let (user, identity, account) = EmailPasswordService.newAccount(
                userId: userId, app: app, email: email, passwordHash: "x", confirmed: false, proven: false, now: now
            )
            let token = OneTimeTokenRecord(
                id: Secrets.objectID(at: now), appId: app.id, kind: .confirmation, userId: userId, secretHash: Secrets.sha256("secret"),
                createdAt: now, expiresAt: now.addingTimeInterval(60), email: email.normalized
            )
            let event = { (user: String) in gatehouse.env.auditEvent(.registration, app: app.id, user: user, detail: ["provider": "local-userpass"]) }
            await #expect(throws: StoreError.conflict) {
                try await store.createEmailUser(user: user, identity: identity, account: account, token: token, mail: nil, recording: event(userId))
            }
            #expect(try await store.user(id: userId) == nil)
            #expect(try await store.identities(userId: userId).isEmpty)
            #expect(try await store.oneTimeToken(id: token.id) == nil)
            #expect(try await store.auditEvents(appId: app.id, userId: userId, afterSeq: nil, limit: 10).isEmpty)

            // The same writes for a free address all land.
            let free = try #require(EmailAddress("kim2@example.com"))
            let (user2, identity2, account2) = EmailPasswordService.newAccount(
                userId: Secrets.objectID(at: now), app: app, email: free, passwordHash: "x", confirmed: true, proven: false, now: now
            )
            try await store.createEmailUser(user: user2, identity: identity2, account: account2, token: nil, mail: nil, recording: event(user2.id))
            #expect(try await store.user(id: user2.id) == user2)
            #expect(try await store.auditEvents(appId: app.id, userId: user2.id, afterSeq: nil, limit: 10).map(\.kind) == ["registration"])
            #expect(try await store.identities(userId: user2.id) == [identity2])
            #expect(try await store.emailAccount(appId: app.id, email: free.normalized)?.userId == user2.id)
        }
    }

    /// A registration's user and its `registration` audit row are one write: one statement on PostgreSQL, one
    /// transaction on SQLite. No user is ever without the record of how it came.
    @Test func aRegistrationWritesItsUserAndItsAuditRowTogether() async throws {
        try await withGatehouse { gatehouse, _ in
            let recording = RecordingDatabase((gatehouse.env.store as! SQLStore).db)
            var env = gatehouse.env
            env.store = SQLStore(db: recording)
            try await EmailPasswordService(env: env).register(appId: "test-app", email: "kit@example.com", password: "correct horse")
            let written = recording.drain().compactMap { statement -> String? in
                let parts = [("INSERT INTO users", "user"), ("INSERT INTO audit_events", "audit")].filter { statement.contains($0.0) }.map(\.1)
                return parts.isEmpty ? (["BEGIN", "COMMIT"].contains(statement) ? statement : nil) : parts.joined(separator: "+")
            }
            switch recording.dialect {
            case .postgres: #expect(written == ["user+audit"])
            case .sqlite: #expect(written == ["BEGIN", "user", "audit", "COMMIT"])
            }
            let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "kit@example.com"))
            let rows = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: account.userId, afterSeq: nil, limit: 10)
            #expect(rows.map(\.kind) == ["registration"])
        }
    }

    @Test func writesTogetherRenumberTheirPlaceholders() {
        #expect(SQLiteDatabase.shiftingPlaceholders(of: "UPDATE t SET a = $1, b = $12 WHERE c = $2", by: 3) == "UPDATE t SET a = $4, b = $15 WHERE c = $5")
        #expect(SQLiteDatabase.shiftingPlaceholders(of: "SELECT $1", by: 0) == "SELECT $1")
        #expect(SQLiteDatabase.shiftingPlaceholders(of: "SELECT '$' || $9", by: 1) == "SELECT '$' || $10")
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
