import Foundation
@testable import Gatehouse
import GatehouseDomain
import GatehouseServer
import GatehouseTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The SDK against a real server over real HTTP.
@Suite struct SDKEndToEndTests {
    @Test func theWholeLifeOfAUser() async throws {
        try await withLiveServer { server in
            let app = server.app()
            let auth = app.emailPasswordAuth
            try await auth.registerUser(email: "life@example.com", password: "correct horse")
            // Pending: no login yet.
            await #expect(throws: AppError.self) { try await app.login(credentials: .emailPassword(email: "life@example.com", password: "correct horse")) }

            let link = try await server.latestLink("life@example.com")
            try await auth.confirmUser(link.token, tokenId: link.tokenId)

            let user = try await app.login(credentials: .emailPassword(email: "life@example.com", password: "correct horse"))
            #expect(app.currentUser == user)
            #expect(user.state == .loggedIn && user.isLoggedIn)
            #expect(user.id.count == 24)
            #expect(user.deviceId.count == 24)
            #expect(user.profile.email == "life@example.com")
            #expect(user.identities.map(\.providerType) == ["local-userpass"])
            #expect(user.customData.isEmpty)

            let access = try #require(user.accessToken)
            server.clock.advance(by: 5)
            try await user.refreshCustomData()
            #expect(user.accessToken != access)
            #expect(try await user.refreshProfile().email == "life@example.com")

            let refreshToken = try #require(user.refreshToken)
            try await user.logOut()
            #expect(user.state == .loggedOut)
            #expect(user.accessToken == nil && user.refreshToken == nil)
            #expect(app.currentUser == nil)
            #expect(app.allUsers[user.id] == user)
            // The server revoked the session too.
            let stale = server.app()
            await #expect(throws: AppError.self) { _ = try await stale.core.request("POST", "/api/client/v2.0/auth/session", bearer: refreshToken) }

            let again = try await app.login(credentials: .emailPassword(email: "life@example.com", password: "correct horse"))
            #expect(again === user)
            #expect(user.state == .loggedIn)
            try await user.delete()
            #expect(user.state == .removed)
            #expect(app.allUsers.isEmpty)
            let gone = await #expect(throws: AppError.self) {
                try await app.login(credentials: .emailPassword(email: "life@example.com", password: "correct horse"))
            }
            #expect(gone?.code == .invalidPassword)
        }
    }

    @Test func usersSurviveANewAppWithTheSameStoreWithoutANetworkCall() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-sdk-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withLiveServer { server in
            let first = server.app(store: FileUserStore(directory: folder))
            try await server.signUp(first, "offline@example.com")
            try await server.signUp(first, "second@example.com")
            let one = try await first.login(credentials: .emailPassword(email: "offline@example.com", password: "correct horse"))
            let two = try await first.login(credentials: .emailPassword(email: "second@example.com", password: "correct horse"))
            first.switch(to: one)

            let transport = ObservingTransport()
            let second = server.app(store: FileUserStore(directory: folder), transport: transport)
            let current = try #require(second.currentUser)
            #expect(current.id == one.id)
            #expect(current.accessToken == one.accessToken)
            #expect(current.refreshToken == one.refreshToken)
            #expect(current.profile.email == "offline@example.com")
            #expect(Set(second.allUsers.keys) == [one.id, two.id])
            #expect(transport.requests.isEmpty)
            // And the restored session works.
            #expect(try await current.refreshProfile().email == "offline@example.com")
        }
    }

    @Test func tenCallsWithAnExpiredAccessTokenShareOneRefresh() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            let user = try await server.signedInUser(app, "ten@example.com")
            server.clock.advance(by: 1801)  // the access token (1800 s) has expired, for the server and the SDK

            try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<10 { group.addTask { try await user.refreshProfile().email } }
                for try await email in group { #expect(email == "ten@example.com") }
            }
            #expect(transport.count("POST /api/client/v2.0/auth/session") == 1)
            #expect(transport.count("GET /api/client/v2.0/auth/profile") == 11)  // login + 10
        }
    }

    @Test func tenCallsThatMeet401ShareOneRefresh() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            let user = try await server.signedInUser(app, "four01@example.com")
            // Only the server's clock moves: the SDK thinks the token is fine, the server answers 401.
            var configuration = app.configuration
            configuration.now = { Date(timeIntervalSince1970: 0) }
            let frozen = App(id: "test-app", configuration: configuration)
            let same = try #require(frozen.currentUser)
            server.clock.advance(by: 1801)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<10 { group.addTask { _ = try await same.refreshProfile() } }
                try await group.waitForAll()
            }
            #expect(transport.count("POST /api/client/v2.0/auth/session") == 1)
            #expect(same.id == user.id)
        }
    }

    /// The interleaving behind the test above, made certain: a call read the token, met a 401, and reaches the
    /// refresher only after another call's refresh replaced that token. It takes the new token; no second refresh.
    @Test func aCallWhose401OutlivedAnotherRefreshTakesItsToken() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            _ = try await server.signedInUser(app, "outlived@example.com")
            var configuration = app.configuration
            configuration.now = { Date(timeIntervalSince1970: 0) }
            let frozen = App(id: "test-app", configuration: configuration)
            let same = try #require(frozen.currentUser)
            let seen = try #require(same.accessToken)
            server.clock.advance(by: 1801)
            _ = try await same.refreshProfile()
            #expect(transport.count("POST /api/client/v2.0/auth/session") == 1)
            let replaced = try #require(same.accessToken)
            #expect(replaced != seen)

            #expect(try await frozen.core.refresh(same.id, replacing: seen) == replaced)
            #expect(transport.count("POST /api/client/v2.0/auth/session") == 1)
            // A refresh asked for as such still asks.
            _ = try await frozen.core.refresh(same.id)
            #expect(transport.count("POST /api/client/v2.0/auth/session") == 2)
        }
    }

    @Test func aRefreshThatReturnsAfterLogOutChangesNothing() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            let user = try await server.signedInUser(app, "late@example.com")

            let gate = transport.hold("POST /api/client/v2.0/auth/session")
            let refresh = Task { try await user.refreshCustomData() }
            await gate.waitForArrival()
            try await user.logOut()
            gate.open()
            await #expect(throws: ClientError.userNotLoggedIn) { try await refresh.value }
            #expect(user.state == .loggedOut)
            #expect(user.accessToken == nil)
            #expect(app.currentUser == nil)
        }
    }

    /// A link whose answer arrives after the user logged out (offline: the server session lives on) gives the
    /// logged-out user no access token.
    @Test func aLinkThatReturnsAfterLogOutLeavesTheUserLoggedOut() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            let user = try await server.signedInUser(app, "link-late@example.com")
            try await server.signUp(app, "link-late-second@example.com")

            let gate = transport.hold("POST /api/client/v2.0/app/test-app/auth/providers/local-userpass/login")
            let link = Task { try await user.linkUser(credentials: .emailPassword(email: "link-late-second@example.com", password: "correct horse")) }
            await gate.waitForArrival()
            transport.unreachable = true
            await #expect(throws: ClientError.self) { try await user.logOut() }
            transport.unreachable = false
            gate.open()
            _ = try await link.value
            #expect(user.state == .loggedOut)
            #expect(user.accessToken == nil)
        }
    }

    @Test func aLateRefreshNeverOverwritesANewerLogin() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            let user = try await server.signedInUser(app, "relogin@example.com")

            let gate = transport.hold("POST /api/client/v2.0/auth/session")
            let refresh = Task { try await user.refreshCustomData() }
            await gate.waitForArrival()
            try await user.logOut()
            let again = try await app.login(credentials: .emailPassword(email: "relogin@example.com", password: "correct horse"))
            let tokens = (again.accessToken, again.refreshToken)
            gate.open()
            _ = try? await refresh.value
            #expect(user.state == .loggedIn)
            #expect(user.accessToken == tokens.0)
            #expect(user.refreshToken == tokens.1)
        }
    }

    @Test func aRefreshAnswered401LogsTheUserOut() async throws {
        try await withLiveServer { server in
            let app = server.app()
            let user = try await server.signedInUser(app, "revoked@example.com")
            // Revoke the session behind the SDK's back: a second app instance logs out with the same tokens.
            let other = server.app()
            let refreshToken: String = try #require(user.refreshToken)
            _ = try await other.core.request("DELETE", "/api/client/v2.0/auth/session", bearer: refreshToken)
            let error = await #expect(throws: AppError.self) { try await user.refreshCustomData() }
            #expect(error?.code == .invalidSession)
            #expect(error?.httpStatus == 401)
            #expect(user.state == .loggedOut)
        }
    }

    @Test func logOutClearsLocalStateEvenWhenTheServerIsUnreachable() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            let user = try await server.signedInUser(app, "offline-logout@example.com")
            transport.unreachable = true
            let error = await #expect(throws: ClientError.self) { try await user.logOut() }
            #expect(error?.isTransport == true)
            #expect(user.state == .loggedOut)
            #expect(user.accessToken == nil)
            #expect(app.currentUser == nil)
        }
    }

    /// A logout the user store cannot save (its folder was swapped for a symbolic link, which the file store
    /// refuses) is carried through: the user is logged out here and on the server, and then the storage error is
    /// thrown, so the app knows the device may still hold the session the server no longer accepts.
    @Test func aLogOutTheStoreCannotSaveStillEndsTheSessionAndSaysSo() async throws {
        try await withLiveServer { server in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-store-\(UUID().uuidString)")
            let moved = directory.appendingPathExtension("moved")
            defer { for url in [directory, moved] { try? FileManager.default.removeItem(at: url) } }
            let app = server.app(store: FileUserStore(directory: directory))
            let user = try await server.signedInUser(app, "unsaved-logout@example.com")
            let refreshToken = try #require(user.refreshToken)
            try FileManager.default.moveItem(at: directory, to: moved)
            try FileManager.default.createSymbolicLink(at: directory, withDestinationURL: moved)

            let error = await #expect(throws: ClientError.self) { try await user.logOut() }
            #expect(error?.message.hasPrefix("cannot save users") == true, "a storage error, not \(String(describing: error))")
            #expect(user.state == .loggedOut)
            #expect(app.currentUser == nil)
            var refresh = URLRequest(url: try #require(URL(string: "\(server.base)/api/client/v2.0/auth/session")))
            refresh.httpMethod = "POST"
            refresh.setValue("Bearer \(refreshToken)", forHTTPHeaderField: "Authorization")
            let (_, response) = try await URLSession.shared.data(for: refresh)
            #expect((response as? HTTPURLResponse)?.statusCode == 401)
        }
    }

    @Test func severalUsersSwitchAndRemove() async throws {
        try await withLiveServer { server in
            let app = server.app()
            try await server.signUp(app, "ann@example.com")
            try await server.signUp(app, "ben@example.com")
            let ann = try await app.login(credentials: .emailPassword(email: "ann@example.com", password: "correct horse"))
            let ben = try await app.login(credentials: .emailPassword(email: "ben@example.com", password: "correct horse"))
            #expect(app.currentUser == ben)
            #expect(Set(app.allUsers.values) == [ann, ben])
            #expect(app.switch(to: ann) == ann)
            #expect(app.currentUser == ann)

            try await ann.remove()
            #expect(ann.state == .removed)
            #expect(app.allUsers.keys.sorted() == [ben.id])
            #expect(app.currentUser == ben)
            // A removed user cannot become current.
            app.switch(to: ann)
            #expect(app.currentUser == ben)
        }
    }

    @Test func anonymousLoginReusesALoggedInAnonymousUserAndLogOutRemovesIt() async throws {
        try await withLiveServer { server in
            let transport = ObservingTransport()
            let app = server.app(transport: transport)
            let first = try await app.login(credentials: .anonymous)
            #expect(first.identities.map(\.providerType) == ["anon-user"])
            let second = try await app.login(credentials: .anonymous)
            #expect(second === first)
            #expect(transport.count("POST /api/client/v2.0/app/test-app/auth/providers/anon-user/login") == 1)

            try await first.logOut()
            #expect(first.state == .removed)
            #expect(app.allUsers.isEmpty)
            let third = try await app.login(credentials: .anonymous)
            #expect(third.id != first.id)
            #expect(transport.count("POST /api/client/v2.0/app/test-app/auth/providers/anon-user/login") == 2)
        }
    }

    @Test func customDataSetOnTheServerReachesTheUser() async throws {
        try await withLiveServer { server in
            let app = server.app()
            let user = try await server.signedInUser(app, "data@example.com")
            #expect(user.customData.isEmpty)
            try await server.gatehouse.setCustomData(appId: "test-app", userId: user.id, json: #"{"plan":"pro","seats":5,"tags":["a"]}"#)
            let data = try await user.refreshCustomData()
            #expect(data["plan"] == "pro")
            #expect(data["seats"]??.intValue == 5)
            #expect(data["tags"] == .array(["a"]))
            #expect(user.customData == data)

            await #expect(throws: AdminError.self) { try await server.gatehouse.setCustomData(appId: "test-app", userId: user.id, json: "[1]") }
            let big = #"{"x":""# + String(repeating: "y", count: AuthServer.maxCustomDataSize) + #""}"#
            await #expect(throws: AdminError.self) { try await server.gatehouse.setCustomData(appId: "test-app", userId: user.id, json: big) }
            await #expect(throws: AdminError.self) { try await server.gatehouse.setCustomData(appId: "test-app", userId: "000000000000000000000000", json: "{}") }
        }
    }
}

/// Plays a TLS-terminating load balancer in front of the live server: the app talks `https://`, the balancer
/// forwards over plain HTTP on loopback. Records every URL the app asked for.
final class TLSTerminatingTransport: NetworkTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var asked: [String] = []
    private let forward = URLSessionTransport()

    var requestedURLs: [String] { lock.withLock { asked } }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        lock.withLock { asked.append(request.url.absoluteString) }
        guard var components = URLComponents(url: request.url, resolvingAgainstBaseURL: false), components.scheme == "https" else {
            throw ClientError.transport("the balancer serves https only")
        }
        components.scheme = "http"
        var plain = request
        plain.url = try #require(components.url)
        return try await forward.send(plain)
    }
}
