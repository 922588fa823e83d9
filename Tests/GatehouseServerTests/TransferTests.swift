import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import Testing

/// `gatehouse export` / `gatehouse import`: a deployment moved from SQLite to the suite's database (PostgreSQL on
/// the PostgreSQL run), and every way an import is refused without writing anything.
@Suite struct TransferTests {
    /// A source deployment on a SQLite file with: a confirmed email user (with custom data and a live session), an
    /// unconfirmed one, and an anonymous user.
    struct Source {
        var folder: URL
        var configuration: GatehouseConfiguration
        var clock: ManualClock
        var confirmed: LoginResponse
        var unconfirmedId: String
        var anonymous: LoginResponse
    }

    static func makeSource() async throws -> Source {
        let folder = try temporaryDirectory()
        let configuration = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("source.sqlite").path))
        let clock = ManualClock()
        let (confirmed, unconfirmedId, anonymous) = try await withGatehouseResult(configuration, clock: clock) { gatehouse, client in
            let confirmed = try await client.signUp("ada@example.com", "old password 1")
            try await gatehouse.setCustomData(appId: "test-app", userId: confirmed.userId, json: #"{"plan":"pro"}"#)
            let registered = try await client.register("Bob@Example.com", "old password 2", app: "test-app")
            #expect(registered.status == .created)
            let bob = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "bob@example.com"))
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: "{}").decode(LoginResponse.self)
            // A revoked session is not exported.
            let other = try await client.login("ada@example.com", "old password 1").decode(LoginResponse.self)
            #expect(try await client.call(Path.session, .delete, bearer: other.refreshToken).status == .noContent)
            return (confirmed, bob.userId, anonymous)
        }
        return Source(folder: folder, configuration: configuration, clock: clock, confirmed: confirmed, unconfirmedId: unconfirmedId, anonymous: anonymous)
    }

    static func export(_ configuration: GatehouseConfiguration, clock: ManualClock, sessions: Bool) async throws -> [String] {
        let lines = LineBuffer()
        _ = try await AuthServer.exportUsers(configuration: configuration, includeSessions: sessions, clock: clock.clock, logger: quietLogger, write: lines.append)
        return lines.lines
    }

    static func importLines(_ lines: [String], into configuration: GatehouseConfiguration) async throws -> TransferSummary {
        try await AuthServer.importUsers(configuration: configuration, logger: quietLogger, next: LineBuffer(lines).next)
    }

    /// The user lines of an export, for comparing two exports.
    static func userLines(_ lines: [String]) -> [String] { lines.filter { $0.contains(#""type":"user""#) } }

    /// A fresh target database (PostgreSQL on the PostgreSQL run), its configuration, and how to drop it.
    static func target(in folder: URL, apps: [AppSettings]? = nil) async throws -> (GatehouseConfiguration, @Sendable () async -> Void) {
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("target.sqlite").path))
        var configuration = testConfiguration(database: url)
        if let apps { configuration.apps = apps }
        return (configuration, drop)
    }

    @Test func usersMoveWithTheirPasswordsDataAndSessions() async throws {
        let source = try await Self.makeSource()
        defer { try? FileManager.default.removeItem(at: source.folder) }
        let lines = try await Self.export(source.configuration, clock: source.clock, sessions: true)
        // The header, one signing key, three users, the end.
        #expect(lines.count == 6, "\(lines)")
        // The hash travels as stored; no password does.
        #expect(lines.contains { $0.contains("$argon2id$") })
        #expect(!lines.contains { $0.contains("old password") })

        let (target, drop) = try await Self.target(in: source.folder)
        let summary = try await Self.importLines(lines, into: target)
        #expect(summary == TransferSummary(users: 3, identities: 3, emailAccounts: 2, sessions: 2, signingKeys: 1))
        // Lossless: the target exports exactly the users the source did.
        let again = try await Self.export(target, clock: source.clock, sessions: true)
        #expect(Self.userLines(again).count == 3)
        #expect(Self.userLines(again) == Self.userLines(lines))

        try await withGatehouse(target, clock: source.clock) { gatehouse, client in
            // The old password signs in, as the same user, with the same custom data.
            let login = try await client.login("ada@example.com", "old password 1")
            #expect(login.status == .ok)
            let ada = try login.decode(LoginResponse.self)
            #expect(ada.userId == source.confirmed.userId)
            let claims = try jwtPayload(ada.accessToken)
            #expect((claims["user_data"] as? [String: Any])?["plan"] as? String == "pro")
            #expect(try await client.login("ada@example.com", "wrong password").status == .unauthorized)
            // The refresh token issued before the move still works: sessions and signing keys moved.
            let refreshed = try await client.call(Path.session, bearer: source.confirmed.refreshToken)
            #expect(refreshed.status == .created)
            #expect(try await client.call(Path.session, bearer: source.anonymous.refreshToken).status == .created)
            // The unconfirmed account is still unconfirmed.
            let bob = try await client.login("bob@example.com", "old password 2")
            #expect(bob.status == .unauthorized)
            // (This app hides user existence, so a pending account's right password is refused as a wrong one.)
            #expect(bob.error?.errorCode == .invalidPassword)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "bob@example.com")?.confirmedAt == nil)
            #expect(try await gatehouse.env.store.user(id: source.unconfirmedId) != nil)
        }
        await drop()
    }

    @Test func withoutSessionsUsersSignInAgain() async throws {
        let source = try await Self.makeSource()
        defer { try? FileManager.default.removeItem(at: source.folder) }
        let lines = try await Self.export(source.configuration, clock: source.clock, sessions: false)
        let secrets = lines.filter { $0.contains(#""type":"signingKey""#) || $0.contains("secretHash") }
        #expect(secrets.isEmpty)
        let (target, drop) = try await Self.target(in: source.folder)
        let summary = try await Self.importLines(lines, into: target)
        #expect(summary == TransferSummary(users: 3, identities: 3, emailAccounts: 2, sessions: 0, signingKeys: 0))
        try await withGatehouse(target, clock: source.clock) { _, client in
            let refresh = try await client.call(Path.session, bearer: source.confirmed.refreshToken)
            #expect(refresh.status == .unauthorized)
            let login = try await client.login("ada@example.com", "old password 1")
            #expect(login.status == .ok)
        }
        await drop()
    }

    @Test func expiredSessionsAndOtherAppsStayBehind() async throws {
        let source = try await Self.makeSource()
        defer { try? FileManager.default.removeItem(at: source.folder) }
        source.clock.advance(by: TimeInterval(source.configuration.apps[0].refreshTokenTTL) + 1)
        let lines = try await Self.export(source.configuration, clock: source.clock, sessions: true)
        #expect(!lines.contains { $0.contains("secretHash") })
        let none = LineBuffer()
        let summary = try await AuthServer.exportUsers(
            configuration: source.configuration, apps: ["auto-app"], clock: source.clock.clock, logger: quietLogger, write: none.append
        )
        #expect(summary.users == 0)
        #expect(none.lines.count == 2)
    }

    /// Every refused import names its line and leaves the target as it was.
    @Test func refusedImportsWriteNothing() async throws {
        let source = try await Self.makeSource()
        defer { try? FileManager.default.removeItem(at: source.folder) }
        let lines = try await Self.export(source.configuration, clock: source.clock, sessions: true)
        let (target, drop) = try await Self.target(in: source.folder)

        func refusal(_ lines: [String], into configuration: GatehouseConfiguration = target) async -> TransferError? {
            do {
                _ = try await Self.importLines(lines, into: configuration)
                return nil
            } catch {
                return error as? TransferError
            }
        }
        func usersInTarget() async throws -> Int { Self.userLines(try await Self.export(target, clock: source.clock, sessions: false)).count }

        let userLine = try #require(lines.firstIndex { $0.contains(#""type":"user""#) })
        var truncated = lines
        truncated.removeLast()
        #expect(await refusal(truncated)?.message.contains("truncated") == true)

        var broken = lines
        broken.insert(#"{"type":"user","id":"65a000000000000000000001"}"#, at: userLine + 1)
        let missing = await refusal(broken)
        #expect(missing?.line == userLine + 2)
        #expect(missing?.message.contains("appId is missing") == true, "\(String(describing: missing))")

        var garbage = lines
        garbage[userLine] = "not json"
        #expect(await refusal(garbage)?.line == userLine + 1)

        let adaLine = try #require(lines.firstIndex { $0.contains("$argon2id$") })
        var badHash = lines
        badHash[adaLine] = lines[adaLine].replacing(/\$argon2id\$[^"]*/, with: "5f4dcc3b5aa765d61d8327deb882cf99")
        #expect(badHash != lines)
        let hash = await refusal(badHash)
        #expect(hash?.message.contains("the password hash is in no form a login can verify") == true, "\(String(describing: hash))")

        var extra = lines
        extra.append(lines[userLine])
        #expect(await refusal(extra)?.message.contains("after the end line") == true)

        #expect(await refusal([])?.message.contains("empty") == true)
        #expect(await refusal([#"{"format":"something-else","version":1,"exportedAt":"2026-01-01T00:00:00.000Z","apps":[],"sessions":false}"#])?.line == 1)

        var otherApps = target
        otherApps.apps = [target.apps[1]]
        let app = await refusal(lines, into: otherApps)
        #expect(app?.message.contains("\"test-app\"") == true, "\(String(describing: app))")

        #expect(try await usersInTarget() == 0)

        // A complete file goes in once; the second time its first user conflicts, and still nothing changes.
        _ = try await Self.importLines(lines, into: target)
        let conflict = await refusal(lines)
        #expect(conflict?.line == userLine + 1)
        #expect(conflict?.message.contains("already in the target") == true, "\(String(describing: conflict))")
        #expect(try await usersInTarget() == 3)
        await drop()
    }

    /// Whether a confirmed account's mailbox was proven moves with it (an account an app confirmed automatically
    /// stays unproven, so the owner's first proof still resets trust); a version 1 file, which does not say, has its
    /// confirmed accounts taken as proven.
    @Test func provenMailboxesMoveAndVersionOneFilesCountConfirmedAsProven() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        var source = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("proven.sqlite").path))
        source.apps[0].localUserpass?.confirmation = .auto
        let clock = ManualClock()
        try await withGatehouse(source, clock: clock) { _, client throws in
            #expect(try await client.register("auto@example.com").status == .created)
        }
        let lines = try await Self.export(source, clock: clock, sessions: false)
        #expect(lines.first?.contains(#""version":4"#) == true)
        for (file, provenAfter) in [(lines, false), (lines.map { $0.replacing(#""version":4"#, with: #""version":1"#) }, true)] {
            let (target, drop) = try await Self.target(in: folder.appendingPathComponent(UUID().uuidString))
            _ = try await Self.importLines(file, into: target)
            try await withGatehouse(target, clock: clock) { gatehouse, _ in
                let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "auto@example.com"))
                #expect(account.confirmedAt != nil)
                #expect((account.mailboxProvenAt != nil) == provenAfter)
            }
            await drop()
        }
    }

    /// An account's registered spelling, its contested mark and whether it came from an old system move with it; a
    /// file that does not say where its accounts came from (one written by hand for a migration) brings them from an
    /// old system, so the migrate-user function may still vouch for a missing password.
    @Test func addressContestedMarkAndOriginMove() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("marks.sqlite").path))
        let clock = ManualClock()
        try await withGatehouse(source, clock: clock) { _, client throws in
            #expect(try await client.register("Mixed.Case@Example.com", "first one").status == .created)
            #expect(try await client.register("mixed.case@example.com", "second one").status == .created)
            _ = try await client.signUp("made.here@example.com")
        }
        let lines = try await Self.export(source, clock: clock, sessions: false)
        let handWritten = lines.map { $0.replacing(#","fromOldSystem":false"#, with: "") }
        for (file, fromOldSystem) in [(lines, false), (handWritten, true)] {
            let (target, drop) = try await Self.target(in: folder.appendingPathComponent(UUID().uuidString))
            _ = try await Self.importLines(file, into: target)
            try await withGatehouse(target, clock: clock) { gatehouse, _ in
                let contested = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "mixed.case@example.com"))
                #expect(contested.address == "Mixed.Case@Example.com")
                #expect(contested.contestedAt != nil)
                let made = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "made.here@example.com"))
                #expect(made.contestedAt == nil)
                #expect(made.fromOldSystem == fromOldSystem)
            }
            await drop()
        }
    }

    /// The old system hands an address over once, in the target database too: every address it handed over moves,
    /// also one whose account was deleted since (no account line carries it). A file that announces another count,
    /// or names an address not as accounts key it, is refused; a version 3 file (no such lines) still imports.
    @Test func addressesTheOldSystemHandedOverMoveWithoutTheirAccounts() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("handed.sqlite").path))
        let clock = ManualClock()
        try await withGatehouse(source, clock: clock) { gatehouse, _ throws in
            let app = try #require(gatehouse.env.configuration.app(id: "test-app"))
            var made: [UserRecord] = []
            for address in ["gone@example.com", "kept@example.com"] {
                var (user, identity, account) = EmailPasswordService.newAccount(
                    userId: Secrets.objectID(at: clock.now), app: app, email: try #require(EmailAddress(address)), passwordHash: "",
                    confirmed: true, proven: true, now: clock.now
                )
                account.fromOldSystem = true
                try await gatehouse.env.store.createEmailUser(user: user, identity: identity, account: account, token: nil, mail: nil, recording: nil)
                made.append(user)
            }
            try await gatehouse.env.store.deleteUser(id: made[0].id, notices: [], owner: nil)
            #expect(try await gatehouse.env.store.migratedAddress(appId: "test-app", email: "gone@example.com"))
        }
        let lines = try await Self.export(source, clock: clock, sessions: false)
        let addressLines = lines.filter { $0.contains(#""type":"migratedAddress""#) }
        #expect(addressLines.count == 2)
        #expect(addressLines.first?.contains(#""email":"gone@example.com""#) == true)
        #expect(lines.last?.contains(#""migratedAddresses":2"#) == true)

        let versionThree = lines.filter { !addressLines.contains($0) }.map {
            $0.replacing(#""version":4"#, with: #""version":3"#).replacing(#""migratedAddresses":2,"#, with: "")
        }
        for (file, gone) in [(lines, true), (versionThree, false)] {
            let (target, drop) = try await Self.target(in: folder.appendingPathComponent(UUID().uuidString))
            let summary = try await Self.importLines(file, into: target)
            #expect(summary.migratedAddresses == (gone ? 2 : 0))
            try await withGatehouse(target, clock: clock) { gatehouse, _ throws in
                #expect(try await gatehouse.env.store.migratedAddress(appId: "test-app", email: "gone@example.com") == gone)
                #expect(try await gatehouse.env.store.migratedAddress(appId: "test-app", email: "kept@example.com"))
            }
            await drop()
        }

        let (target, drop) = try await Self.target(in: folder.appendingPathComponent(UUID().uuidString))
        func refusal(_ file: [String]) async -> TransferError? {
            do {
                _ = try await Self.importLines(file, into: target)
                return nil
            } catch {
                return error as? TransferError
            }
        }
        let missing = await refusal(lines.filter { $0 != addressLines[0] })
        #expect(missing?.message.contains("2 migrated addresses, but holds 1, 0 and 1") == true, "\(String(describing: missing))")
        let spelled = await refusal(lines.map { $0.replacing(#""email":"gone@example.com""#, with: #""email":"Gone@Example.com""#) })
        #expect(spelled?.message.contains("not a normalized") == true, "\(String(describing: spelled))")
        #expect(try await Self.userLines(try await Self.export(target, clock: clock, sessions: false)).isEmpty)
        await drop()
    }

    @Test func timestampsAndBytesRoundTripExactly() throws {
        for milliseconds: Int64 in [0, 1, 999, -1, -1001, 1_800_000_000_123, 1_795_000_000_001, 253_402_300_799_999] {
            let encoded = try JSONEncoder().encode(TransferFormat.Timestamp(milliseconds: milliseconds))
            let decoded = try JSONDecoder().decode(TransferFormat.Timestamp.self, from: encoded)
            #expect(decoded.milliseconds == milliseconds, "\(String(decoding: encoded, as: UTF8.self))")
        }
        let stamp = String(decoding: try JSONEncoder().encode(TransferFormat.Timestamp(milliseconds: 1_800_000_000_123)), as: UTF8.self)
        #expect(stamp == #""2027-01-15T08:00:00.123Z""#)
        let short = try JSONDecoder().decode(TransferFormat.Timestamp.self, from: Data(#""2027-01-15T08:00:00.5Z""#.utf8))
        #expect(short.milliseconds == 1_800_000_000_500)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(TransferFormat.Timestamp.self, from: Data(#""2027-01-15 08:00:00""#.utf8)) }
        let bytes = TransferFormat.Bytes([0, 255, 16, 32])
        #expect(try JSONDecoder().decode(TransferFormat.Bytes.self, from: try JSONEncoder().encode(bytes)) == bytes)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(TransferFormat.Bytes.self, from: Data(#""not base64!""#.utf8)) }
    }
}

/// Lines written by an export, or read by an import.
final class LineBuffer: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String]
    private var position = 0

    init(_ lines: [String] = []) { storage = lines }

    var lines: [String] { lock.withLock { storage } }

    @Sendable func append(_ line: String) { lock.withLock { storage.append(line) } }

    @Sendable func next() -> String? {
        lock.withLock {
            guard position < storage.count else { return nil }
            defer { position += 1 }
            return storage[position]
        }
    }
}
