import Foundation
@testable import Gatehouse
import GatehouseServer
import Testing

/// `App.authEvents()` and `AuthState` against a live server: every change of a user's session is heard, including the
/// one the server makes (a refresh answered 401), and nothing that follows the registration is missed.
@Suite struct AuthEventTests {
    /// The next `count` events of `events` (at most 30 s).
    func take(_ count: Int, from events: AsyncStream<AuthEvent>) async throws -> [AuthEvent] {
        try await withThrowingTaskGroup(of: [AuthEvent]?.self) { group in
            group.addTask {
                var taken: [AuthEvent] = []
                for await event in events {
                    taken.append(event)
                    if taken.count == count { break }
                }
                return taken
            }
            group.addTask {
                try await Task.sleep(for: .seconds(30))
                return nil
            }
            defer { group.cancelAll() }
            guard let taken = try await group.next(), let taken else { throw CancellationError() }
            return taken
        }
    }

    @Test func loginsRefreshesLogoutsAndSessionsTheServerEndsAreEachHeard() async throws {
        try await withLiveServer { server in
            let app = server.app()
            try await server.signUp(app, "events@example.com")
            // Registered before anything happens: synchronously, so the first event cannot slip past.
            let events = app.authEvents()
            let second = app.authEvents()
            let user = try await app.login(credentials: .emailPassword(email: "events@example.com", password: "correct horse"))
            server.clock.advance(by: 1801)  // the access token has expired
            _ = try await user.refreshCustomData()

            // The server ends the session behind the app's back (a logout everywhere); the next refresh hears 401.
            _ = try await server.gatehouse.logOutEverywhere(appId: "test-app", userId: user.id)
            server.clock.advance(by: 1801)
            await #expect(throws: AppError.self) { try await user.refreshCustomData() }
            #expect(user.state == .loggedOut)

            let again = try await app.login(credentials: .emailPassword(email: "events@example.com", password: "correct horse"))
            try await again.logOut()

            let expected: [AuthEvent] = [
                .signedIn(userId: user.id), .tokenRefreshed(userId: user.id), .sessionEnded(userId: user.id),
                .signedIn(userId: user.id), .signedOut(userId: user.id),
            ]
            #expect(try await take(5, from: events) == expected)
            // Every stream hears every event.
            #expect(try await take(5, from: second) == expected)
        }
    }

    @Test func aSwitchOfTheCurrentUserIsHeardAndAStreamNobodyReadsFreesItself() async throws {
        try await withLiveServer { server in
            let app = server.app()
            try await server.signUp(app, "one@example.com")
            try await server.signUp(app, "two@example.com")
            let one = try await app.login(credentials: .emailPassword(email: "one@example.com", password: "correct horse"))
            let two = try await app.login(credentials: .emailPassword(email: "two@example.com", password: "correct horse"))
            let events = app.authEvents()
            app.switch(to: one)
            app.switch(to: one)  // already current: nothing to hear
            app.switch(to: two)
            #expect(try await take(2, from: events) == [.currentUserChanged(userId: one.id), .currentUserChanged(userId: two.id)])

            // A stream whose reader went away is dropped from the hub.
            do {
                let abandoned = app.authEvents()
                let reader = Task { for await _ in abandoned {} }
                reader.cancel()
                _ = await reader.value
            }
            try await waitUntil { app.core.events.listenerCount == 1 }
        }
    }

    @Test func authStateFollowsTheAppOnTheMainActor() async throws {
        try await withLiveServer { server in
            let app = server.app()
            try await server.signUp(app, "state@example.com")
            let state = await AuthState(app: app)
            #expect(await state.isSignedIn == false)
            let user = try await app.login(credentials: .emailPassword(email: "state@example.com", password: "correct horse"))
            try await waitUntil { await state.isSignedIn }
            #expect(await state.currentUser?.id == user.id)
            #expect(await state.lastEvent == .signedIn(userId: user.id))
            // The server ends the session: the state says signed out, with the reason.
            _ = try await server.gatehouse.logOutEverywhere(appId: "test-app", userId: user.id)
            server.clock.advance(by: 1801)
            _ = try? await user.refreshCustomData()
            try await waitUntil { await !state.isSignedIn }
            #expect(await state.lastEvent == .sessionEnded(userId: user.id))
        }
    }

    /// Polls until `condition` holds (at most 30 s): events arrive on their own.
    func waitUntil(_ condition: @Sendable () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while await !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
