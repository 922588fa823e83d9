import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Testing

/// The operator's actions (`gatehouse users`, `keys`, `mail`, and an embedding program's same calls) go through
/// ``AdminService``: it ends the sessions, keeps the last signing key, and writes each action's audit row with
/// `by: admin`; the server only opens what the action needs and turns the domain's refusals into messages.
@Suite struct AdminServiceTests {
    @Test func eachAdminOperationWritesItsAuditRow() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("admin.sqlite").path))
        let config = testConfiguration(database: url)
        let clock = ManualClock()
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            let login = try await client.signUp("admin@example.com")
            #expect(try await gatehouse.logOutEverywhere(appId: "test-app", userId: login.userId) == 1)
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .unauthorized)
            try await gatehouse.setUserDisabled(appId: "test-app", userId: login.userId, disabled: true)
            #expect(try await client.login("admin@example.com").error?.errorCode == .userDisabled)
            try await gatehouse.setUserDisabled(appId: "test-app", userId: login.userId, disabled: false)
            try await gatehouse.setCustomData(appId: "test-app", userId: login.userId, json: #"{"plan":"pro"}"#)

            let mine = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: login.userId, afterSeq: nil, limit: 100)
            let admin = mine.filter { $0.detail["by"] == "admin" }
            #expect(admin.map(\.kind) == ["logout_everywhere", "user_disabled", "user_enabled"])
            #expect(admin.map(\.detail) == [["by": "admin", "sessions": "1"], ["by": "admin"], ["by": "admin"]])

            // Signing keys, from the command line's own environment on the same database: server-wide rows.
            let first = try #require(try await AuthServer.signingKeys(configuration: config, logger: quietLogger).first)
            let rotated = try await AuthServer.rotateSigningKey(configuration: config, clock: clock.clock, logger: quietLogger)
            try await AuthServer.retireSigningKey(configuration: config, kid: first.kid, clock: clock.clock, logger: quietLogger)
            let error = await #expect(throws: AdminError.self) {
                try await AuthServer.retireSigningKey(configuration: config, kid: rotated.kid, clock: clock.clock, logger: quietLogger)
            }
            #expect(error?.description == "no active key \(rotated.kid), or it is the last active key (rotate first)")
            let keys = try await gatehouse.env.store.auditEvents(appId: AuthEnvironment.serverWideApp, userId: nil, afterSeq: nil, limit: 100)
            #expect(keys.map(\.kind) == ["signing_key_rotated", "signing_key_retired"])
            #expect(keys.map(\.detail) == [["by": "admin", "kid": rotated.kid], ["by": "admin", "kid": first.kid]])
        }
        await drop()
    }

    /// "No such user in that app" and the custom-data rules are the domain's facts; the server's messages are theirs.
    @Test func refusalsAreTheDomainsAndWriteNothing() async throws {
        try await withGatehouse { gatehouse, client in
            let login = try await client.signUp("refused@example.com")
            let admin = AdminService(env: gatehouse.env)
            let nobody = "000000000000000000000000"
            await #expect(throws: AdminRefusal.userNotFound(appId: "test-app", userId: nobody)) {
                _ = try await admin.logOutEverywhere(appId: "test-app", userId: nobody)
            }
            // A user of another app is no user of this one.
            await #expect(throws: AdminRefusal.userNotFound(appId: "auto-app", userId: login.userId)) {
                try await admin.setUserDisabled(appId: "auto-app", userId: login.userId, disabled: true)
            }
            await #expect(throws: AdminRefusal.appNotFound("no-app")) { try await admin.setCustomData(appId: "no-app", userId: login.userId, json: "{}") }
            await #expect(throws: AdminRefusal.customDataNotAnObject) { try await admin.setCustomData(appId: "test-app", userId: login.userId, json: "[1]") }
            let big = "{\"a\":\"" + String(repeating: "x", count: AdminService.maxCustomDataSize) + "\"}"
            await #expect(throws: AdminRefusal.customDataTooLarge(bytes: big.utf8.count)) {
                try await admin.setCustomData(appId: "test-app", userId: login.userId, json: big)
            }
            let only = try #require(try await admin.signingKeys().first)
            await #expect(throws: AdminRefusal.keyNotRetirable(only.key.kid)) { try await admin.retireSigningKey(kid: only.key.kid) }

            // The server says the same to the operator.
            let error = await #expect(throws: AdminError.self) { try await gatehouse.setUserDisabled(appId: "test-app", userId: nobody, disabled: true) }
            #expect(error?.description == "no user \(nobody) in app test-app")
            #expect(try await gatehouse.retryFailedMail(ids: nil) == 0)
            #expect(try await gatehouse.failedMail().isEmpty)

            let events = try await gatehouse.env.store.auditEvents(appId: nil, userId: nil, afterSeq: nil, limit: 100)
            #expect(!events.contains { $0.detail["by"] == "admin" }, "\(events.map(\.kind))")
            #expect(try await gatehouse.env.store.user(id: login.userId)?.disabled == false)
        }
    }

    /// The façades (the server library, the command line, the HTTP routes) never change a user's state, custom data,
    /// sessions en masse, signing keys or failed mail through the store themselves: ``AdminService`` does, and the
    /// domain's other services end sessions where their own rules say so.
    @Test func onlyTheDomainMakesAdminWrites() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources")
        let calls = ["setUserDisabled", "setCustomData", "revokeAllSessions", "insertSigningKey", "retireSigningKey", "failedMail", "retryFailedMail"]
        // A call on a store, however reached: `store.x(`, `env.store.x(`, `SQLStore(db: database).x(`.
        let pattern = try Regex(#"(?:store|SQLStore\([^)]*\))\s*\.\s*("# + calls.joined(separator: "|") + #")\("#)
        var found: [String: Set<String>] = [:]
        let walker = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let file as URL in walker where file.pathExtension == "swift" {
            let path = file.path.replacingOccurrences(of: root.path + "/", with: "")
            // The store implementations themselves.
            if path.hasPrefix("Sources/GatehouseServer/Store/") { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            let code = text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }.joined(separator: "\n")
            for match in code.matches(of: pattern) {
                found[String(code[match.output[1].range!]), default: []].insert(path)
            }
        }
        let adminService = "Sources/GatehouseDomain/Admin/AdminService.swift"
        for call in calls where call != "revokeAllSessions" {
            #expect(found[call] == [adminService], "\(call): \(found[call] ?? [])")
        }
        let revoking = found["revokeAllSessions"] ?? []
        #expect(revoking.contains(adminService))
        #expect(revoking.allSatisfy { $0.hasPrefix("Sources/GatehouseDomain/") }, "\(revoking)")
        // The scan sees what it looks for: the server's admin entry points call the service.
        let server = try String(contentsOf: sources.appendingPathComponent("GatehouseServer/AuthServer+Admin.swift"), encoding: .utf8)
        #expect(server.contains("AdminService(env:"))
    }
}
