import Foundation
internal import GatehouseWire

// The pieces both session kinds share — an App login and a native-auth sign-in are the same stored user, refreshed
// by the same single-flight refresher, their tokens read by the same decoder.

/// Reads JWTs and `client_info` without verifying them (the SDK got them straight from the server over the
/// connection the app trusts, as Realm and MSAL clients do).
enum TokenDecoder {
    /// The payload of a JWT, decoded as `T`; nil for anything that is not a three-part token with a JSON payload.
    static func payload<T: Decodable>(of token: String, as type: T.Type) -> T? {
        payloadData(of: token).flatMap { try? JSONDecoder().decode(T.self, from: $0) }
    }

    /// The payload of a JWT as bytes; nil for anything that is not a three-part token.
    static func payloadData(of token: String) -> Data? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return base64URL(parts[1])
    }

    /// Base64url without padding, decoded.
    static func base64URL(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

/// The claims the SDK reads from a Gatehouse access or refresh token.
struct JWTClaims {
    var exp: Int64?
    /// The user the token is for.
    var sub: String?
    var userData: [String: JSONValue]?
    /// The session the token belongs to.
    var sid: String?

    init?(_ token: String) {
        guard case .object(let claims)? = TokenDecoder.payload(of: token, as: JSONValue.self) else { return nil }
        if case .int(let exp)? = claims["exp"] { self.exp = exp }
        if case .string(let sid)? = claims["sid"] { self.sid = sid }
        if case .string(let sub)? = claims["sub"] { self.sub = sub }
        if case .object(let userData)? = claims["user_data"] { self.userData = userData }
    }
}

/// Runs one refresh at a time per user. A caller whose refresh (same user, scopes and claims) is already running
/// waits for it instead of sending its own; a caller with a different one for the same user waits for the running
/// refresh to end first, so two refreshes never spend the same refresh token (native-auth refresh tokens rotate on
/// every use). Different users refresh independently.
///
/// A caller that is cancelled stops waiting at once (`CancellationError`); the refresh it started or joined runs on
/// for the others, and stays the user's running refresh until it ends, so no second one starts beside it.
///
/// A caller that decided to refresh because of the token it saw (expired, or answered 401) passes `unlessDone`: a
/// refresh that ended between that caller's look and its arrival here has already replaced that token, and starting
/// another would spend a second request (and, natively, a second rotation) on the same need. The check runs in the
/// actor, with no suspension before the refresh would start, so no finished refresh slips between them.
actor TokenRefresher {
    struct Key: Hashable, Sendable {
        var userId: String
        /// Sorted; empty for an App-style refresh of the scopes the session already has.
        var scopes: [String]
        var claims: String?
    }

    private var running: [String: (id: Int, key: Key, task: Task<StoredUser, any Error>)] = [:]
    private var nextId = 0
    /// Callers inside ``refresh(_:_:)`` or ``settled(_:)`` now, running, joining or waiting; tests read it.
    private(set) var callers = 0

    /// The user as `work` left it, the running refresh's result for the same key, or what `unlessDone` returns when
    /// a refresh already did the caller's work.
    func refresh(
        _ key: Key,
        unlessDone: @Sendable () -> StoredUser? = { nil },
        _ work: @escaping @Sendable () async throws -> StoredUser
    ) async throws -> StoredUser {
        callers += 1
        defer { callers -= 1 }
        while let current = running[key.userId] {
            if current.key == key {
                return try await Self.value(of: current.task)
            }
            // Its failure is its callers'; this caller's refresh runs next.
            try await waitOut(current)
        }
        // A caller cancelled before its refresh starts sends nothing (a native refresh spends its token).
        try Task.checkCancellation()
        if let done = unlessDone() { return done }
        nextId += 1
        let id = nextId
        // Unstructured, so that one caller's cancellation does not cancel the refresh the others wait for.
        let task = Task<StoredUser, any Error> { try await work() }
        running[key.userId] = (id, key, task)
        Task { [userId = key.userId] in
            _ = await task.result
            self.ended(userId, id)
        }
        do {
            let user = try await Self.value(of: task)
            ended(key.userId, id)
            return user
        } catch is CancellationError where Task.isCancelled {
            // This caller stopped waiting; the refresh runs on and clears itself when it ends.
            throw CancellationError()
        } catch {
            ended(key.userId, id)
            throw error
        }
    }

    /// Returns once no refresh of `userId` is running (whatever its outcome, which is its own callers'), so that a
    /// request made with the user's refresh token next presents the token a rotation left, not the one it spends.
    /// Throws `CancellationError` when the caller is cancelled while it waits.
    func settled(_ userId: String) async throws {
        callers += 1
        defer { callers -= 1 }
        while let current = running[userId] { try await waitOut(current) }
    }

    /// Waits until `current` ends, whatever its outcome (its callers'), and clears it; throws `CancellationError` only
    /// when the waiting caller is cancelled.
    private func waitOut(_ current: (id: Int, key: Key, task: Task<StoredUser, any Error>)) async throws {
        do {
            _ = try await Self.value(of: current.task)
        } catch is CancellationError where Task.isCancelled {
            throw CancellationError()
        } catch {}
        if running[current.key.userId]?.id == current.id { running[current.key.userId] = nil }
    }

    private func ended(_ userId: String, _ id: Int) {
        if running[userId]?.id == id { running[userId] = nil }
    }

    /// `task`'s value, or `CancellationError` as soon as the calling task is cancelled (`task` runs on).
    private static func value(of task: Task<StoredUser, any Error>) async throws -> StoredUser {
        let waiter = Locked<(continuation: CheckedContinuation<StoredUser, any Error>?, done: Bool)>((nil, false))
        let finish = { @Sendable (result: Result<StoredUser, any Error>) in
            let continuation = waiter.withLock { state -> CheckedContinuation<StoredUser, any Error>? in
                guard !state.done else { return nil }
                state.done = true
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(with: result)
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<StoredUser, any Error>) in
                let resumeNow = waiter.withLock { state -> Bool in
                    if state.done { return true }
                    state.continuation = continuation
                    return false
                }
                if resumeNow {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                Task { finish(await task.result) }
            }
        } onCancel: {
            finish(.failure(CancellationError()))
        }
    }
}
