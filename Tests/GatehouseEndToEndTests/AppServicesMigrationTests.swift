import Foundation
import Gatehouse
import GatehouseArgon2
import GatehouseDomain
import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Logging
import NIOConcurrencyHelpers
import Testing

/// docs/migrating.md's walkthrough "From realm-swift and Atlas App Services", run where it can run here: a server
/// whose app id is the App Services app id, with the migrate-user function (the embedded closure) standing in for the
/// system that still holds the passwords; users imported with `gatehouse import --from csv` and with a `gatehouse
/// export` file; and the realm-swift code of the guide's step 4, over real HTTP.
// Nothing here waits on a timer; the limit turns anything that still hangs into a named failure.
@Suite(.timeLimit(.minutes(3))) struct AppServicesMigrationTests {
    /// The App Services app id, kept as the Gatehouse app id (the guide's step 1).
    static let appId = "application-0-abcde"

    /// The system that still holds the users' passwords (an app's own backend that kept them, another provider),
    /// and every question the migrate-user function asked it.
    final class OldSystem: Sendable {
        struct Account: Sendable {
            var password: String
            /// The App Services user id.
            var id: String
            var verified = true
            var customData: [String: JSONValue] = [:]
        }

        let accounts: [String: Account]
        let calls = NIOLockedValueBox<[MigrateUserCall]>([])

        init(_ accounts: [String: Account]) { self.accounts = accounts }

        /// The guide's step 2, as a closure: vouch for the users the old system has, with their App Services id and
        /// custom data; at a reset request (no password) say only whether it has the user.
        var handlers: FunctionHandlers {
            FunctionHandlers(migrateUser: { call in
                self.calls.withLockedValue { $0.append(call) }
                guard call.appId == AppServicesMigrationTests.appId, let old = self.accounts[call.email.lowercased()] else { return .unknown }
                if let password = call.password, password != old.password { return .wrongPassword }
                return .migrated(emailVerified: old.verified, userId: old.id, customData: old.customData)
            })
        }

        var count: Int { calls.withLockedValue { $0.count } }
    }

    /// Step 1: the app, email/password with email confirmation and reset mails, and the migrate-user function. The
    /// users of `csv` (`gatehouse import --from csv --app …`) and of `export` (`gatehouse import`, a gatehouse export
    /// file) are imported before the server starts, as the guide's step 3 does.
    static func withMigrationServer(
        _ old: OldSystem, csv: String? = nil, export: [String]? = nil,
        _ body: @Sendable (LiveServer, ForeignImportSummary?) async throws -> Void
    ) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-appservices-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("gatehouse.sqlite").path))
        let configuration = GatehouseConfiguration(
            server: ServerSettings(host: "127.0.0.1", port: 0),
            database: DatabaseSettings(url: url),
            dev: DevSettings(mailbox: true),
            apps: [
                AppSettings(
                    id: appId, localUserpass: LocalUserpassConfiguration(confirmation: .email, reset: .email),
                    passwordHash: Argon2Parameters(memoryKiB: 64, iterations: 1, parallelism: 1)
                )
            ]
        )
        var logger = Logger(label: "e2e")
        logger.logLevel = .critical
        // The SDK runs on the real clock: the server's starts at now.
        let clock = ManualClock(Date())
        do {
            var summary: ForeignImportSummary?
            if let csv {
                let bytes = Array(csv.utf8)
                let consumed = NIOLockedValueBox(false)
                summary = try await AuthServer.importForeignUsers(
                    configuration: configuration, format: .csv, appId: appId, clock: clock.clock, logger: logger,
                    read: { consumed.withLockedValue { done in defer { done = true }; return done ? nil : bytes } },
                    skipped: { Issue.record("skipped: \($0)") }
                )
            }
            if let export {
                let lines = NIOLockedValueBox(export[...])
                _ = try await AuthServer.importUsers(configuration: configuration, logger: logger, next: { lines.withLockedValue { $0.popFirst() } })
            }
            let imported = summary
            let gatehouse = try await AuthServer.open(configuration: configuration, clock: clock.clock, logger: logger, functions: old.handlers)
            do {
                try await gatehouse.makeApplication().test(.live) { client in
                    let port = try #require(client.port)
                    try await body(LiveServer(base: "http://127.0.0.1:\(port)", gatehouse: gatehouse, clock: clock), imported)
                }
                try await gatehouse.close()
            } catch {
                try? await gatehouse.close()
                throw error
            }
            await drop()
        } catch {
            await drop()
            throw error
        }
    }

    /// Step 4's app: `App(id:)` with the App Services app id, pointed at the server.
    static func app(_ server: LiveServer) -> App {
        App(id: appId, configuration: AppConfiguration(baseURL: server.base, userStore: InMemoryUserStore()))
    }

    /// Whether `login` fails as realm-swift apps expect a wrong password to (`catch AppError.invalidPassword`).
    static func failsAsInvalidPassword(_ login: () async throws -> User) async -> Bool {
        do {
            _ = try await login()
            return false
        } catch AppError.invalidPassword {
            return true
        } catch {
            Issue.record("expected AppError.invalidPassword, got \(error)")
            return false
        }
    }

    static let annId = "5f1a2b3c4d5e6f7a8b9c0d1e"
    static let benId = "5f1a2b3c4d5e6f7a8b9c0d1f"

    static func oldSystem() -> OldSystem {
        OldSystem([
            "ann@example.com": .init(password: "ann's old password", id: annId, customData: ["plan": "gold", "seats": 3]),
            "ben@example.com": .init(password: "ben's old password", id: benId),
            "una@example.com": .init(password: "una's old password", id: "5f1a2b3c4d5e6f7a8b9c0d2a", verified: false),
        ])
    }

    @Test func theOldPasswordLogsInOnceThroughTheOldSystemAndKeepsTheAppServicesId() async throws {
        let old = Self.oldSystem()
        try await Self.withMigrationServer(old) { server, _ in
            let app = Self.app(server)

            // Step 5: the user signs in with the password they had; the old system vouches for it, once.
            let user = try await app.login(credentials: .emailPassword(email: "ann@example.com", password: "ann's old password"))
            #expect(user.id == Self.annId)
            #expect((try? ObjectId(string: user.id)) != nil)
            #expect(user.customData["plan"]??.stringValue == "gold")
            #expect(user.customData["seats"]??.asInt() == 3)
            #expect(user.profile.email == "ann@example.com")
            #expect(user.identities.map(\.providerType) == ["local-userpass"])
            let first = try #require(old.calls.withLockedValue { $0.first })
            #expect(first.email == "ann@example.com" && first.password == "ann's old password" && first.reason == .login && first.appId == Self.appId)

            // From now on Gatehouse checks the password alone: the old system is not asked again.
            try await user.logOut()
            let again = try await app.login(credentials: .emailPassword(email: "ann@example.com", password: "ann's old password"))
            #expect(again.id == Self.annId)
            #expect(await Self.failsAsInvalidPassword { try await app.login(credentials: .emailPassword(email: "ann@example.com", password: "a wrong one")) })
            #expect(old.count == 1)

            // A wrong password for a user who has not moved yet: asked, refused, nothing created; the right one moves them.
            #expect(await Self.failsAsInvalidPassword { try await app.login(credentials: .emailPassword(email: "ben@example.com", password: "a guess")) })
            #expect(old.count == 2)
            let ben = try await app.login(credentials: .emailPassword(email: "ben@example.com", password: "ben's old password"))
            #expect(ben.id == Self.benId && old.count == 3)
            #expect(ben.customData.isEmpty)

            // An address the old system does not have, and one it never verified: the ordinary wrong password.
            #expect(await Self.failsAsInvalidPassword { try await app.login(credentials: .emailPassword(email: "nobody@example.com", password: "whatever it is")) })
            #expect(await Self.failsAsInvalidPassword { try await app.login(credentials: .emailPassword(email: "una@example.com", password: "una's old password")) })
            #expect(old.count == 5)
        }
    }

    @Test func aUserWhoForgotTheOldPasswordMovesThroughTheResetMail() async throws {
        let old = Self.oldSystem()
        try await Self.withMigrationServer(old) { server, _ in
            let app = Self.app(server)
            // The reset request asks the old system without a password; it has the user, who gets a reset mail.
            try await app.emailPasswordAuth.sendResetPasswordEmail("ben@example.com")
            #expect(old.calls.withLockedValue { $0.map(\.reason) } == [.passwordReset])
            #expect(old.calls.withLockedValue { $0.first?.password } == nil)
            let link = try await server.latestLink("ben@example.com")
            try await app.emailPasswordAuth.resetPassword(to: "ben's brand new password", token: link.token, tokenId: link.tokenId)
            let ben = try await app.login(credentials: .emailPassword(email: "ben@example.com", password: "ben's brand new password"))
            #expect(ben.id == Self.benId)
            #expect(old.count == 1)
        }
    }

    @Test func csvImportedUsersWithoutAPasswordMoveThroughTheOldSystemOrTheResetMail() async throws {
        // `gatehouse import --from csv --app application-0-abcde users.csv`: no password hashes (App Services exported
        // none); `id` is the App Services id, kept as `source_user_id`.
        let csv = """
            email,password_hash,email_verified,disabled,id,name,custom_data,created_at
            cy@example.com,,true,false,5f1a2b3c4d5e6f7a8b9c0d20,Cy,"{""plan"": ""silver""}",2021-03-04T05:06:07Z
            dan@example.com,,true,false,5f1a2b3c4d5e6f7a8b9c0d21,Dan,"{""plan"": ""bronze""}",2021-03-04T05:06:07Z
            """
        // The old system knows Cy (with other custom data), not Dan.
        let old = OldSystem(["cy@example.com": .init(password: "cy's old password", id: "5f1a2b3c4d5e6f7a8b9c0d20", customData: ["plan": "gold"])])
        try await Self.withMigrationServer(old, csv: csv) { server, summary in
            #expect(summary?.imported == 2 && summary?.withoutPassword == 2, "\(String(describing: summary))")
            let app = Self.app(server)

            // An imported account without a password still asks the old system at a password login: Cy's old password
            // becomes hers. She keeps what the import gave her (the new id, the CSV's custom data), not the answer's.
            let cy = try await app.login(credentials: .emailPassword(email: "cy@example.com", password: "cy's old password"))
            #expect(old.count == 1 && old.calls.withLockedValue { $0.first?.reason } == .login)
            #expect(cy.customData["plan"]??.stringValue == "silver")
            #expect(cy.profile.name == "Cy")
            // The CSV's id is the source's id, kept in the profile; the Gatehouse user id is a new one.
            #expect(cy.profile.metadata["source_user_id"]??.stringValue == "5f1a2b3c4d5e6f7a8b9c0d20")
            #expect(cy.id != "5f1a2b3c4d5e6f7a8b9c0d20" && (try? ObjectId(string: cy.id)) != nil)
            try await cy.logOut()
            #expect(try await app.login(credentials: .emailPassword(email: "cy@example.com", password: "cy's old password")).id == cy.id)
            #expect(old.count == 1)

            // Dan's old password can be checked nowhere: it answers as a wrong one, and he sets a new one by reset mail.
            #expect(await Self.failsAsInvalidPassword { try await app.login(credentials: .emailPassword(email: "dan@example.com", password: "dan's old password")) })
            #expect(old.count == 2)
            try await app.emailPasswordAuth.sendResetPasswordEmail("dan@example.com")
            let mail = try await server.latestMail("dan@example.com")
            let link = try await server.latestLink("dan@example.com")
            try await app.emailPasswordAuth.resetPassword(to: "dan's new password", token: link.token, tokenId: link.tokenId)
            let dan = try await app.login(credentials: .emailPassword(email: "dan@example.com", password: "dan's new password"))
            #expect(mail.contains("tokenId="))
            // A known account's reset does not ask the old system, and a password login to it no longer does.
            #expect(old.count == 2)
            #expect(dan.customData["plan"]??.stringValue == "bronze")
            #expect(dan.profile.metadata["source_user_id"]??.stringValue == "5f1a2b3c4d5e6f7a8b9c0d21")
            #expect(await Self.failsAsInvalidPassword { try await app.login(credentials: .emailPassword(email: "dan@example.com", password: "dan's old password")) })
            #expect(old.count == 2)
        }
    }

    @Test func aGatehouseExportFileKeepsTheAppServicesIds() async throws {
        // The guide's step 3 for ids that must stay: a `gatehouse export` file written from the users you have, every
        // user without a password. The old system knows Dee's password; nobody knows Eve's.
        let export = [
            #"{"format":"gatehouse-export","version":3,"exportedAt":"2026-11-24T00:00:00.000Z","apps":["application-0-abcde"],"sessions":false}"#,
            #"{"type":"user","id":"5f1a2b3c4d5e6f7a8b9c0d30","appId":"application-0-abcde","createdAt":"2021-03-04T05:06:07.000Z","disabled":false,"customData":{"plan":"bronze"},"identities":[{"id":"6743a1b2c3d4e5f607182930","providerType":"local-userpass","externalId":"dee@example.com","data":{"email":"dee@example.com"},"createdAt":"2021-03-04T05:06:07.000Z"}],"emailAccounts":[{"email":"dee@example.com","passwordHash":"","confirmedAt":"2021-03-04T05:06:07.000Z","mailboxProvenAt":"2021-03-04T05:06:07.000Z","createdAt":"2021-03-04T05:06:07.000Z"}]}"#,
            #"{"type":"user","id":"5f1a2b3c4d5e6f7a8b9c0d32","appId":"application-0-abcde","createdAt":"2021-03-04T05:06:07.000Z","disabled":false,"customData":{},"identities":[{"id":"6743a1b2c3d4e5f607182933","providerType":"local-userpass","externalId":"eve@example.com","data":{"email":"eve@example.com"},"createdAt":"2021-03-04T05:06:07.000Z"}],"emailAccounts":[{"email":"eve@example.com","passwordHash":"","confirmedAt":"2021-03-04T05:06:07.000Z","mailboxProvenAt":"2021-03-04T05:06:07.000Z","createdAt":"2021-03-04T05:06:07.000Z"}]}"#,
            #"{"type":"end","users":2,"signingKeys":0}"#,
        ]
        let old = OldSystem(["dee@example.com": .init(password: "dee's old password", id: "5f1a2b3c4d5e6f7a8b9c0d30")])
        try await Self.withMigrationServer(old, export: export) { server, _ in
            let app = Self.app(server)
            let dee = try await app.login(credentials: .emailPassword(email: "dee@example.com", password: "dee's old password"))
            #expect(dee.id == "5f1a2b3c4d5e6f7a8b9c0d30")
            #expect(dee.customData["plan"]??.stringValue == "bronze")
            #expect(old.count == 1)

            #expect(await Self.failsAsInvalidPassword { try await app.login(credentials: .emailPassword(email: "eve@example.com", password: "eve's old password")) })
            try await app.emailPasswordAuth.sendResetPasswordEmail("eve@example.com")
            let link = try await server.latestLink("eve@example.com")
            try await app.emailPasswordAuth.resetPassword(to: "eve's new password", token: link.token, tokenId: link.tokenId)
            let eve = try await app.login(credentials: .emailPassword(email: "eve@example.com", password: "eve's new password"))
            #expect(eve.id == "5f1a2b3c4d5e6f7a8b9c0d32")
            #expect(old.count == 2)
        }
    }
}
