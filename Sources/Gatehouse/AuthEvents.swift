import Foundation

/// What happened to an app's users, as ``App/authEvents()`` reports it.
public enum AuthEvent: Sendable, Hashable {
    /// A login succeeded; the user is current.
    case signedIn(userId: String)
    /// The user's access token was refreshed.
    case tokenRefreshed(userId: String)
    /// The app logged the user out, removed it or deleted it.
    case signedOut(userId: String)
    /// The server ended the session (a refresh or an API key call answered 401: revoked, expired, or the password
    /// was reset elsewhere). The user is logged out locally; sign in again.
    case sessionEnded(userId: String)
    /// ``App/switch(to:)`` made another user current.
    case currentUserChanged(userId: String?)

    /// The user the event is about.
    public var userId: String? {
        switch self {
        case .signedIn(let id), .tokenRefreshed(let id), .signedOut(let id), .sessionEnded(let id): id
        case .currentUserChanged(let id): id
        }
    }
}

/// Hands every event to every listening stream. A stream listens from the moment ``stream()`` returns it (the
/// registration is synchronous), so an event that follows that call is never missed; each keeps the newest 256 events
/// its reader has not taken yet.
final class AuthEventHub: Sendable {
    private let listeners = Locked<[UUID: AsyncStream<AuthEvent>.Continuation]>([:])

    func stream() -> AsyncStream<AuthEvent> {
        let (stream, continuation) = AsyncStream<AuthEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        listeners.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.listeners.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    /// Streams still listening (tests).
    var listenerCount: Int { listeners.withLock { $0.count } }

    func emit(_ event: AuthEvent) {
        for continuation in listeners.withLock({ Array($0.values) }) { continuation.yield(event) }
    }

    deinit {
        for continuation in listeners.withLock({ Array($0.values) }) { continuation.finish() }
    }
}

extension App {
    /// The app's auth events from now on: logins, refreshes, logouts and sessions the server ended. The stream is
    /// registered when this returns, so nothing that happens after the call is missed; it ends when the reading task
    /// is cancelled.
    ///
    /// ```swift
    /// let events = app.authEvents()
    /// Task {
    ///     for await event in events {
    ///         if case .sessionEnded = event { showSignIn() }
    ///     }
    /// }
    /// ```
    public func authEvents() -> AsyncStream<AuthEvent> { core.events.stream() }
}

#if canImport(Observation)
import Observation

/// The signed-in state of an ``App`` for SwiftUI: observe ``currentUser`` and ``isSignedIn`` (and the last
/// ``lastEvent``), kept up to date from ``App/authEvents()`` on the main actor.
///
/// ```swift
/// @State private var auth = AuthState(app: app)
/// var body: some View { auth.isSignedIn ? AnyView(HomeView()) : AnyView(SignInView()) }
/// ```
@MainActor
@Observable
public final class AuthState {
    /// The app's current user, nil when nobody is logged in.
    public private(set) var currentUser: User?
    /// Whether the current user is logged in.
    public private(set) var isSignedIn: Bool
    /// The newest event, for a banner ("your session ended").
    public private(set) var lastEvent: AuthEvent?

    @ObservationIgnored private let app: App
    @ObservationIgnored private var listener: Task<Void, Never>?

    /// A model of `app`'s auth state, listening to its events from now on.
    public init(app: App) {
        self.app = app
        // Registered before the user is read: a login that ends in between is in the stream, and its event reads
        // the user again (read the other way round, it would be missed until the next event).
        let events = app.authEvents()
        let user = app.currentUser
        currentUser = user
        isSignedIn = user?.state == .loggedIn
        listener = Task { @MainActor [weak self] in
            for await event in events {
                guard let self else { return }
                self.lastEvent = event
                let user = self.app.currentUser
                self.currentUser = user
                self.isSignedIn = user?.state == .loggedIn
            }
        }
    }

    isolated deinit {
        listener?.cancel()
    }
}
#endif
