import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// One model of credentials: every kind a user can hold is listed with who added it, travels through export and
/// import, goes when the user is deleted, and goes in the mailbox owner's trust reset when someone else added it.
/// `give(_:to:)` switches over every ``CredentialKind``: a new kind does not compile here until it is covered.
@Suite struct CredentialModelTests {
    /// A user holding one credential of every kind, each added the way a user adds it: a registration (mailbox and
    /// password), a link from a signed-in session (an identity), a key made by that session.
    struct Holder {
        var userId: String
        var login: LoginResponse
        var sessionId: String
    }

    static func holder(_ client: some TestClientProtocol, _ gatehouse: AuthServer) async throws -> Holder {
        let login = try await client.signUp("holder@example.com")
        let sessionId = try #require(try jwtPayload(login.accessToken)["sid"] as? String)
        let holder = Holder(userId: login.userId, login: login, sessionId: sessionId)
        for kind in CredentialKind.allCases { try await give(kind, to: holder, client, gatehouse) }
        return holder
    }

    /// Makes `holder` hold a credential of `kind` (if it does not already).
    static func give(_ kind: CredentialKind, to holder: Holder, _ client: some TestClientProtocol, _ gatehouse: AuthServer) async throws {
        switch kind {
        case .mailbox, .password:
            break  // the registration made both
        case .identity:
            // A second email/password address, registered and confirmed by its owner, then linked by the session.
            try await client.linkConfirmedAddress("holder-two@example.com", "correct horse", into: holder.login.accessToken)
            // And an identity a provider vouches for, added by the same session.
            let provider = IdentityRecord(
                id: Secrets.objectID(), userId: holder.userId, appId: "test-app", providerType: "oauth2-google", externalId: "google-sub-1",
                data: [:], createdAt: Date(timeIntervalSince1970: 1_800_000_000),
                addedBy: Provenance(session: holder.sessionId, methods: [.password, .federated])
            )
            try await gatehouse.env.store.addIdentity(provider, owner: nil)
        case .apiKey:
            _ = try await client.createKey("holder-key", refreshToken: holder.login.refreshToken)
        }
    }

    @Test func everyKindIsListedWithWhoAddedIt() async throws {
        try await withGatehouse { gatehouse, client in
            let holder = try await Self.holder(client, gatehouse)
            let credentials = try await gatehouse.env.store.credentials(userId: holder.userId)
            #expect(Set(credentials.map(\.kind)) == Set(CredentialKind.allCases))
            // What came with the account has no adding session; what the session added names it and its proof.
            let registered = try #require(credentials.first { $0.kind == .mailbox && $0.id == "holder@example.com" })
            #expect(registered.addedBy == nil)
            #expect(registered.proven == true)
            let linked = try #require(credentials.first { $0.kind == .mailbox && $0.id == "holder-two@example.com" })
            #expect(linked.addedBy == Provenance(session: holder.sessionId, methods: [.password]))
            let key = try #require(credentials.first { $0.kind == .apiKey })
            #expect(key.label == "holder-key")
            #expect(key.addedBy == Provenance(session: holder.sessionId, methods: [.password]))
            // A password change records its session; the admin view shows the same.
            let change = try await client.call(AccountPath.password, json: ChangePasswordRequest(password: "a brand new passphrase"), bearer: holder.login.accessToken)
            #expect(change.status == .noContent)
            let view = try await gatehouse.credentials(appId: "test-app", userId: holder.userId)
            let password = try #require(view.first { $0.kind == "password" && $0.id == "holder@example.com" })
            #expect(password.addedBySession == holder.sessionId)
            #expect(view.count == (try await gatehouse.env.store.credentials(userId: holder.userId)).count)
        }
    }

    /// Export and import carry every credential with its provenance, a user's second address included.
    @Test func everyKindTravelsThroughExportAndImport() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = testConfiguration(database: .sqliteFile(folder.appendingPathComponent("source.sqlite").path))
        let clock = ManualClock()
        let (userId, before) = try await withGatehouseResult(configuration, clock: clock) { gatehouse, client in
            let holder = try await Self.holder(client, gatehouse)
            return (holder.userId, try await gatehouse.env.store.credentials(userId: holder.userId))
        }
        let lines = try await TransferTests.export(configuration, clock: clock, sessions: false)
        let (target, drop) = try await TransferTests.target(in: folder)
        _ = try await TransferTests.importLines(lines, into: target)
        let after = try await withGatehouseResult(target, clock: clock) { gatehouse, _ in try await gatehouse.env.store.credentials(userId: userId) }
        await drop()
        #expect(Set(after.map(\.kind)) == Set(CredentialKind.allCases))
        #expect(after.sorted { ($0.kind.rawValue, $0.id) < ($1.kind.rawValue, $1.id) } == before.sorted { ($0.kind.rawValue, $0.id) < ($1.kind.rawValue, $1.id) })
    }

    /// Deleting the user leaves no credential of any kind, and no row that names the user.
    @Test func deletingTheUserRemovesEveryKind() async throws {
        try await withGatehouse { gatehouse, client in
            let holder = try await Self.holder(client, gatehouse)
            #expect(try await client.call(Path.delete, .delete, bearer: holder.login.accessToken).status == .noContent)
            #expect(try await gatehouse.env.store.credentials(userId: holder.userId).isEmpty)
            let store = try #require(gatehouse.env.store as? SQLStore)
            for table in ["identities", "email_accounts", "sessions", "one_time_tokens", "api_keys"] {
                let rows = try await store.db.query("SELECT COUNT(*) AS n FROM \(table) WHERE user_id = $1", .text(holder.userId))
                #expect(try rows.first?.int("n") == 0, "\(table)")
            }
            #expect(try await client.login("holder-two@example.com").status == .unauthorized)
        }
    }

    /// The first proof of a mailbox by its owner discards every credential someone else could have added: on a user
    /// whose address was never proven (an app that confirms at once), a reset keeps only the proven mailbox and the
    /// password it sets.
    @Test func theMailboxOwnersProofDiscardsEveryOtherKind() async throws {
        try await withGatehouse { gatehouse, client in
            #expect(try await client.register("unproven@example.com", app: "auto-app").status == .created)
            let login = try await client.login("unproven@example.com", app: "auto-app").decode(LoginResponse.self)
            let sessionId = try #require(try jwtPayload(login.accessToken)["sid"] as? String)
            let holder = Holder(userId: login.userId, login: login, sessionId: sessionId)
            for kind in CredentialKind.allCases where kind != .apiKey && kind != .identity {
                try await Self.give(kind, to: holder, client, gatehouse)
            }
            // auto-app has no API keys and no linking target of its own: the session's additions, written as they
            // would be, for every kind a session can add.
            for kind in CredentialKind.allCases {
                switch kind {
                case .mailbox, .password: break
                case .identity:
                    try await gatehouse.env.store.addIdentity(IdentityRecord(
                        id: Secrets.objectID(), userId: holder.userId, appId: "auto-app", providerType: "oauth2-google", externalId: "google-sub-2",
                        data: [:], createdAt: Date(), addedBy: Provenance(session: sessionId, methods: [.password, .federated])
                    ), owner: nil)
                case .apiKey:
                    let key = APIKeyRecord(
                        id: Secrets.objectID(), appId: "auto-app", userId: holder.userId, name: "planted", keyHash: Secrets.sha256("x"), disabled: false,
                        createdAt: Date()
                    )
                    let identity = IdentityRecord(
                        id: key.id, userId: holder.userId, appId: "auto-app", providerType: APIKeyService.providerType, externalId: key.id, data: [:],
                        createdAt: Date(), addedBy: Provenance(session: sessionId, methods: [.password])
                    )
                    #expect(try await gatehouse.env.store.createAPIKey(key, identity: identity, serverUser: nil, ownerEpoch: nil, limit: APIKeyService.maxKeysPerUser) == .created)
                }
            }
            #expect(Set(try await gatehouse.env.store.credentials(userId: holder.userId).map(\.kind)) == Set(CredentialKind.allCases))

            #expect(try await client.call(Path.local("reset/send", app: "auto-app"), json: EmailRequest(email: "unproven@example.com")).status == .ok)
            let link = try await client.latestLink("unproven@example.com")
            let reset = ResetPasswordRequest(password: "the owner's own", token: link.token, tokenId: link.tokenId)
            #expect(try await client.call(Path.local("reset", app: "auto-app"), json: reset).status == .ok)

            let left = try await gatehouse.env.store.credentials(userId: holder.userId)
            #expect(left.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.mailbox, .password])
            #expect(left.allSatisfy { $0.id == "unproven@example.com" })
            #expect(left.first { $0.kind == .password }?.addedBy == nil)
        }
    }
}
