import Foundation
internal import GatehouseWire

/// What the SDK remembers about a user between launches.
struct StoredUser: Codable, Sendable, Hashable {
    struct Identity: Codable, Sendable, Hashable {
        var id: String
        var providerType: String
    }

    var id: String
    var deviceId: String
    var accessToken: String?
    var refreshToken: String?
    var loggedIn: Bool
    var identities: [Identity]
    var profileData: [String: JSONValue]
    var lastLogin: Date
    /// Set for a native-auth sign-in: what MSAL's account and token results report, and that the session is
    /// refreshed with the native `/token` grant (whose refresh token rotates) instead of `auth/session`.
    var native: NativeSession?

    var isAnonymous: Bool { identities.count == 1 && identities[0].providerType == "anon-user" }

    /// Takes identities and profile data from a profile answer.
    mutating func apply(_ profile: ProfileResponse) {
        identities = profile.identities.map { Identity(id: $0.id, providerType: $0.providerType) }
        profileData = profile.data
    }
}

/// Everything an app persists: its users and which one is current.
struct PersistedUsers: Codable, Sendable {
    var version = 1
    var currentUserId: String?
    var users: [StoredUser] = []

    func user(_ id: String) -> StoredUser? { users.first { $0.id == id } }

    mutating func update(_ id: String, _ change: (inout StoredUser) -> Void) {
        if let index = users.firstIndex(where: { $0.id == id }) { change(&users[index]) }
    }

    /// Makes the most recently logged-in user current when the current one is gone or logged out.
    mutating func repairCurrentUser() {
        if let current = currentUserId, user(current)?.loggedIn == true { return }
        currentUserId = users.filter(\.loggedIn).max { $0.lastLogin < $1.lastLogin }?.id
    }
}

/// What makes a core a native-auth client's: its client id, and how its sessions are refreshed — the `/token` grant
/// (`grant_type=refresh_token`), which throws ``NativeAuthFailure``.
struct NativeClientBinding: Sendable {
    typealias Grant = @Sendable (_ refreshToken: String, _ scopes: [String], _ claims: String?, _ correlationId: UUID) async throws
        -> NativeAuthTokenResponse
    var clientId: String
    var grant: Grant
}

/// The shared machinery of an ``App`` and its ``User``s — and of a ``NativeAuthClient``, whose signed-in account is a
/// user of the same kind: HTTP, persistence, and single-flight token refresh.
final class AppCore: Sendable {
    let appId: String
    let configuration: AppConfiguration
    /// The key of this core's users in the configuration's ``UserStore``: the app id for an ``App``,
    /// `native-auth.{appId}.{clientId}` for a native-auth client.
    let storeKey: String
    /// Set for a native-auth client's core; nil for an ``App``'s.
    let native: NativeClientBinding?
    /// The users, and how many times they changed.
    private let state: Locked<(users: PersistedUsers, changes: UInt64)>
    /// The change last written to the store (under its own lock, held while writing): each write is of the users as
    /// they are then, so an earlier state is never written after a later one, even when the later one's write failed.
    private let written = Locked<UInt64>(0)
    private let hostname = Locked<String?>(nil)
    /// The one single-flight refresher of both session kinds.
    let refresher = TokenRefresher()
    private let instances = Locked<[String: User]>([:])
    /// Where ``App/authEvents()`` streams come from.
    let events = AuthEventHub()

    init(appId: String, configuration: AppConfiguration, native: NativeClientBinding? = nil) {
        self.appId = appId
        self.configuration = configuration
        self.native = native
        storeKey = native.map { "native-auth.\(appId).\($0.clientId)" } ?? appId
        var loaded = PersistedUsers()
        if let data = try? configuration.userStore.load(appId: storeKey) {
            if let decoded = try? JSONDecoder().decode(PersistedUsers.self, from: data) {
                loaded = decoded
            } else if let native, let legacy = PersistedNativeAccount.users(from: data, clientId: native.clientId) {
                // The native-auth cache of earlier releases: its one account becomes a user.
                loaded = legacy
            }
        }
        state = Locked((loaded, 0))
    }

    // MARK: State

    func read<T>(_ body: (PersistedUsers) -> T) -> T { state.withLock { body($0.users) } }

    /// Changes the users under the lock, then saves them as they are by then — unless a later change was saved
    /// already: a refresh that ends as `signOut()` runs must not write back, after it, the account the sign-out
    /// removed. Writes to the ``UserStore`` happen one at a time (the lock order is `written`, then `state`).
    ///
    /// - Throws: ``ClientError/storage(_:)`` when the store cannot save them; the change stands in memory all the same.
    @discardableResult
    func mutate<T>(_ body: (inout PersistedUsers) -> T) throws -> T {
        let (result, unsaved) = mutateAnyway(body)
        if let unsaved { throw unsaved }
        return result
    }

    /// ``mutate(_:)`` for a change that must be carried through whatever the store does — a sign-out, which must
    /// still end the session on the server and tell the app: the body's result, and beside it the error of a save
    /// that failed (the change stands in memory; the store keeps what it had until a later save succeeds).
    func mutateAnyway<T>(_ body: (inout PersistedUsers) -> T) -> (result: T, unsaved: ClientError?) {
        let result = state.withLock { current -> T in
            let result = body(&current.users)
            current.users.repairCurrentUser()
            current.changes += 1
            return result
        }
        do {
            try written.withLock { last in
                let (data, change) = try state.withLock { current in (try JSONEncoder().encode(current.users), current.changes) }
                guard change > last else { return }
                try configuration.userStore.save(data, appId: storeKey)
                last = change
            }
        } catch {
            return (result, ClientError.storage("cannot save users: \(error)"))
        }
        return (result, nil)
    }

    /// How many times the users changed (tests).
    var changeCount: UInt64 { state.withLock { $0.changes } }

    /// The one `User` object for `id`.
    func user(_ id: String) -> User {
        instances.withLock { instances in
            if let user = instances[id] { return user }
            let user = User(id: id, core: self)
            instances[id] = user
            return user
        }
    }

    // MARK: HTTP

    /// The base URL to talk to: the `hostname` answered by `/location`, asked once.
    func resolvedBaseURL() async throws -> String {
        if let known = hostname.withLock({ $0 }) { return known }
        let location: LocationResponse = try decode(
            try await send("GET", base: configuration.baseURL, path: "/api/client/v2.0/app/\(appId)/location", headers: false)
        )
        let base = location.hostname.hasSuffix("/") ? String(location.hostname.dropLast()) : location.hostname
        try Self.checkLocation(base, from: configuration.baseURL)
        hostname.withLock { $0 = base }
        return base
    }

    /// Where `/location` may send the app: an origin (`scheme://host[:port]`, as App Services answers it: another
    /// host may serve the app, as a region's did), and never from `https` down to plain `http` (a compromised or
    /// misconfigured server, or a proxy, could otherwise move every password and token off TLS). Credentials, a
    /// path, a query or a fragment are refused: the API's paths are appended to the answer, and a `#` or `?` would
    /// turn them into a fragment or a query sent somewhere else than they name.
    static func checkLocation(_ target: String, from configured: String) throws {
        guard let components = URLComponents(string: target), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", components.host?.isEmpty == false
        else { throw ClientError.insecureLocation("the server's location \"\(target)\" is not an http(s) URL") }
        // Credentials need an `@`, a query a `?`, a fragment a `#` (even an empty one, which URLComponents may drop).
        guard components.path.isEmpty || components.path == "/", !target.contains(where: { "@?#".contains($0) }) else {
            throw ClientError.insecureLocation("the server's location \"\(target.prefix(200))\" is not an origin (scheme://host[:port])")
        }
        if scheme == "http", URLComponents(string: configured)?.scheme?.lowercased() == "https" {
            throw ClientError.insecureLocation("the server at \(configured) sent the app to \(target): plain http after https is refused")
        }
    }

    /// Sends a request to the resolved host. Non-2xx answers become ``AppError`` (or ``ClientError``).
    func request(_ method: String, _ path: String, body: JSONValue? = nil, bearer: String? = nil) async throws -> TransportResponse {
        try await send(method, base: try await resolvedBaseURL(), path: path, body: body, bearer: bearer)
    }

    private func send(
        _ method: String,
        base: String,
        path: String,
        body: JSONValue? = nil,
        bearer: String? = nil,
        headers withHeaders: Bool = true
    ) async throws -> TransportResponse {
        guard let url = URL(string: base + path) else { throw ClientError.transport("invalid URL \(base + path)") }
        var headers: [String: String] = [:]
        if withHeaders {
            headers["Content-Type"] = "application/json;charset=utf-8"
            headers["Accept"] = "application/json"
        }
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        var data: Data?
        if let body {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes]
            data = try encoder.encode(body)
        } else if method != "GET" && withHeaders {
            data = Data()
        }
        let request = TransportRequest(method: method, url: url, headers: headers, body: data, timeout: configuration.requestTimeout)
        let response: TransportResponse
        do {
            response = try await configuration.transport.send(request)
        } catch let error as AppError {
            throw error
        } catch let error as ClientError {
            throw error
        } catch {
            throw ClientError.transport(error.localizedDescription)
        }
        guard (200..<300).contains(response.statusCode) else { throw Self.error(from: response) }
        return response
    }

    /// The server's envelope as ``AppError``; anything else as ``ClientError/unexpectedResponse(status:body:)``.
    static func error(from response: TransportResponse) -> any Error {
        if (300..<400).contains(response.statusCode) {
            // Followed, it would have carried the request's password or token there (``URLSessionTransport``).
            let target = response.headers["location"].map { " to \($0.prefix(200))" } ?? ""
            return ClientError.unexpectedResponse(status: response.statusCode, body: "a redirect\(target), not followed: the SDK sends credentials to its configured server only")
        }
        let text = String(decoding: response.body, as: UTF8.self)
        if response.headers["content-type"]?.lowercased().hasPrefix("application/json") == true,
            let body = try? JSONDecoder().decode(ClientAPIErrorBody.self, from: response.body)
        {
            return AppError(
                code: body.errorCode ?? AppError.Code(rawValue: "Unknown"),
                message: body.error,
                link: body.link,
                httpStatus: response.statusCode
            )
        }
        return ClientError.unexpectedResponse(status: response.statusCode, body: text)
    }

    func decode<T: Decodable>(_ response: TransportResponse) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: response.body)
        } catch {
            throw ClientError.malformedResponse("cannot read the server's answer as \(T.self): \(error)")
        }
    }

    // MARK: Sessions

    /// An access token for `userId` that is not about to expire, refreshing first when it is.
    func freshAccessToken(_ userId: String) async throws -> String {
        guard let user = read({ $0.user(userId) }), user.loggedIn, user.refreshToken != nil else { throw ClientError.userNotLoggedIn }
        if let token = user.accessToken, hasFreshAccessToken(user) { return token }
        return try await refresh(userId, replacing: user.accessToken ?? "")
    }

    /// Whether `user` has an access token that will not expire within the refresh leeway (both session kinds).
    func hasFreshAccessToken(_ user: StoredUser) -> Bool {
        guard user.accessToken?.isEmpty == false, let expiry = user.accessTokenExpiry else { return false }
        return expiry.timeIntervalSince(configuration.now()) > configuration.refreshLeeway
    }

    /// A request with the user's access token. A 401 refreshes once (unless another call already replaced the token)
    /// and retries once.
    func authorized(_ method: String, _ path: String, userId: String, body: JSONValue? = nil) async throws -> TransportResponse {
        let token = try await freshAccessToken(userId)
        do {
            return try await request(method, path, body: body, bearer: token)
        } catch let error as AppError where error.httpStatus == 401 {
            return try await request(method, path, body: body, bearer: try await refresh(userId, replacing: token))
        }
    }

    /// A request with the current user's refresh token (the API key routes). A 401 means the session is over: the
    /// user is logged out locally, as Realm clients do (spec §4.2), and the error is rethrown.
    ///
    /// A native session's refresh token rotates: the request waits for a refresh of the user under way, and when a
    /// refresh that started after it rotated the token while it was out (the server refuses the spent token with a
    /// 401 before acting), it is sent once more with the new token instead of ending the session. With a reuse window
    /// of 0 the server ends the session for such a race, and the second 401 logs the user out here too.
    func withRefreshToken(_ method: String, _ path: String, body: JSONValue? = nil) async throws -> TransportResponse {
        guard let userId = read({ $0.currentUserId }) else { throw ClientError.userNotLoggedIn }
        try await refresher.settled(userId)
        var retried = false
        while true {
            guard let user = read({ $0.user(userId) }), user.loggedIn, let refreshToken = user.refreshToken else {
                throw ClientError.userNotLoggedIn
            }
            do {
                return try await request(method, path, body: body, bearer: refreshToken)
            } catch let error as AppError where error.httpStatus == 401 {
                try await refresher.settled(userId)
                if !retried, let current = read({ $0.user(userId)?.refreshToken }), current != refreshToken {
                    retried = true
                    continue
                }
                endSession(userId, refreshToken: refreshToken)
                throw error
            }
        }
    }

    /// Logs the user out here (an anonymous user is removed, since nobody could log in as them again) and reports
    /// it with ``AuthEvent/signedOut(userId:)``, even when the store cannot save it (then `unsaved` says so, for the
    /// caller to throw once it has ended the session on the server too).
    /// - Returns: the refresh token the user had; nil if the user was not logged in (then nothing changed).
    func signOutLocally(_ userId: String) -> (refreshToken: String?, unsaved: ClientError?) {
        let (refreshToken, unsaved) = mutateAnyway({ users -> String? in
            guard let user = users.user(userId), user.loggedIn else { return nil }
            let token = user.refreshToken
            if user.isAnonymous {
                users.users.removeAll { $0.id == userId }
            } else {
                users.update(userId) { user in
                    user.loggedIn = false
                    user.accessToken = nil
                    user.refreshToken = nil
                }
            }
            return token
        })
        if refreshToken != nil { events.emit(.signedOut(userId: userId)) }
        return (refreshToken, unsaved)
    }

    /// Logs the user out locally after the server refused `refreshToken`, unless the user has logged in again since.
    private func endSession(_ userId: String, refreshToken: String) {
        let ended = mutateAnyway { users -> Bool in
            guard users.user(userId)?.refreshToken == refreshToken else { return false }
            users.update(userId) { user in
                user.loggedIn = false
                user.accessToken = nil
                user.refreshToken = nil
            }
            return true
        }.result
        // Never silently: whoever shows the signed-in state hears that the server ended the session.
        if ended { events.emit(.sessionEnded(userId: userId)) }
    }

    /// Refreshes the user's access token (App-style callers). Concurrent calls for one user share one request. A
    /// refusal of the session logs the user out with ``AuthEvent/sessionEnded(userId:)``; an answer that arrives after
    /// the user logged out (or logged in again) is dropped.
    /// - Parameter seen: the access token that made the caller refresh (expired, answered 401, or empty when there
    ///   was none); a fresh token stored in its place since means another refresh did the work, and it is returned
    ///   without a request. Nil for a refresh the caller asked for as such.
    func refresh(_ userId: String, replacing seen: String? = nil) async throws -> String {
        do {
            let user = try await refreshed(userId, scopes: nil, claims: nil, correlationId: UUID(), replacing: seen)
            guard let token = user.accessToken else {
                throw ClientError.userNotLoggedIn
            }
            return token
        } catch let failure as NativeAuthFailure {
            // A native session seen through the App API: its errors as the App API's.
            if failure.endsSession {
                throw AppError(code: .invalidSession, message: failure.info(NativeAuthErrorText.general).description, httpStatus: 401)
            }
            // Signed out while the refresh ran: what an App-side refresh says then, not a network failure.
            if read({ $0.user(userId)?.loggedIn }) != true { throw ClientError.userNotLoggedIn }
            throw ClientError.transport(failure.info(NativeAuthErrorText.general).description)
        }
    }

    /// The user after a refresh, through the one single-flight refresher: `auth/session` for an App login, the
    /// native `/token` grant (for `scopes`, nil for those of the sign-in) for a native-auth sign-in, whose rotated
    /// refresh token is stored.
    ///
    /// With `seen` (the access token that made the caller refresh), a refresh that ended after the caller looked and
    /// left a fresh token for these scopes, without extra claims, is the caller's result: no second request.
    func refreshed(
        _ userId: String, scopes: [String]?, claims: String?, correlationId: UUID, replacing seen: String? = nil
    ) async throws -> StoredUser {
        let session = read { $0.user(userId)?.native }
        let scopes = session == nil ? [] : (scopes ?? session?.requestedScopes ?? [])
        let key = TokenRefresher.Key(userId: userId, scopes: scopes.sorted(), claims: claims)
        let unlessDone: @Sendable () -> StoredUser? = { [self] in
            guard let seen, claims == nil,
                let user = read({ $0.user(userId) }), user.loggedIn, user.accessToken != seen, hasFreshAccessToken(user)
            else { return nil }
            if let native = user.native, !Set(scopes).isSubset(of: Set(native.grantedScopes)) { return nil }
            return user
        }
        return try await refresher.refresh(key, unlessDone: unlessDone) {
            try await self.performRefresh(userId, scopes: scopes, claims: claims, correlationId: correlationId)
        }
    }

    /// One refresh with the refresh token stored now (so a refresh that waited for another uses the token that one
    /// rotated in).
    private func performRefresh(_ userId: String, scopes: [String], claims: String?, correlationId: UUID) async throws -> StoredUser {
        if read({ $0.user(userId)?.native }) != nil { adoptStoredRotation(of: userId) }
        guard let user = read({ $0.user(userId) }), user.loggedIn, let refreshToken = user.refreshToken else {
            throw ClientError.userNotLoggedIn
        }
        let apply: (inout StoredUser) -> Void
        if user.native != nil {
            guard let grant = native?.grant else { throw ClientError.userNotLoggedIn }
            let answer: NativeAuthTokenResponse
            do {
                answer = try await grant(refreshToken, scopes, claims, correlationId)
            } catch let failure as NativeAuthFailure where failure.endsSession {
                endSession(userId, refreshToken: refreshToken)
                throw failure
            }
            // An answer for another user (a proxy's cache serving someone else's answer, a confused server) is never
            // taken as this user's tokens.
            let named = [StoredUser.named(by: answer).userId, JWTClaims(answer.accessToken)?.sub].compactMap { $0 }
            if named.contains(where: { $0 != userId }) {
                throw NativeAuthFailure.general("The refresh answer names another user", correlationId)
            }
            let now = configuration.now()
            apply = { $0.applyRefresh(answer, requestedScopes: scopes, now: now) }
        } else {
            let response: TransportResponse
            do {
                response = try await request("POST", "/api/client/v2.0/auth/session", bearer: refreshToken)
            } catch let error as AppError where error.httpStatus == 401 {
                endSession(userId, refreshToken: refreshToken)
                throw error
            }
            let session: SessionResponse = try decode(response)
            if let named = JWTClaims(session.accessToken)?.sub, named != userId {
                throw ClientError.malformedResponse("the server answered the refresh with an access token of another user")
            }
            apply = { $0.accessToken = session.accessToken }
        }
        let updated = try mutate { users -> StoredUser? in
            guard let current = users.user(userId), current.loggedIn, current.refreshToken == refreshToken else { return nil }
            users.update(userId, apply)
            return users.user(userId)
        }
        guard let updated else {
            if user.native != nil { throw NativeAuthFailure.general("The account was signed out during the refresh", correlationId) }
            throw ClientError.userNotLoggedIn
        }
        events.emit(.tokenRefreshed(userId: userId))
        return updated
    }

    /// Takes the user's record from the store when another client of the same store rotated its refresh token since
    /// this one last wrote (a second `NativeAuthClient` of the app and client, an app extension sharing the
    /// keychain): the token held here is spent, and presenting it after the server's reuse window would end the
    /// session for both. Only while every change made here is saved, so that what differs in the store is another
    /// client's newer write, never an older state a failed save of this one left behind.
    private func adoptStoredRotation(of userId: String) {
        guard let data = try? configuration.userStore.load(appId: storeKey),
            let stored = try? JSONDecoder().decode(PersistedUsers.self, from: data),
            let theirs = stored.user(userId), theirs.loggedIn, theirs.refreshToken != nil
        else { return }
        written.withLock { saved in
            state.withLock { current in
                guard saved == current.changes, let mine = current.users.user(userId), mine.loggedIn, mine.refreshToken != theirs.refreshToken
                else { return }
                current.users.update(userId) { $0 = theirs }
                current.changes += 1
                saved = current.changes
            }
        }
    }

    // MARK: Completion handlers

    /// Runs `work` and hands its result to `completion` on the callback queue.
    func complete<T: Sendable>(
        _ completion: @escaping @Sendable (Result<T, any Error>) -> Void,
        _ work: @escaping @Sendable () async throws -> T
    ) {
        let queue = configuration.callbackQueue
        Task {
            let result: Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            queue.async { completion(result) }
        }
    }

    /// ``complete(_:_:)`` for calls without a value.
    func complete(_ completion: @escaping @Sendable ((any Error)?) -> Void, _ work: @escaping @Sendable () async throws -> Void) {
        complete({ (result: Result<Void, any Error>) in
            if case .failure(let error) = result { completion(error) } else { completion(nil) }
        }, work)
    }
}
