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
    var userData: [String: JSONValue]?
    /// The session the token belongs to.
    var sid: String?

    init?(_ token: String) {
        guard case .object(let claims)? = TokenDecoder.payload(of: token, as: JSONValue.self) else { return nil }
        if case .int(let exp)? = claims["exp"] { self.exp = exp }
        if case .string(let sid)? = claims["sid"] { self.sid = sid }
        if case .object(let userData)? = claims["user_data"] { self.userData = userData }
    }
}

/// Runs one refresh at a time per user. A caller whose refresh (same user, scopes and claims) is already running
/// waits for it instead of sending its own; a caller with a different one for the same user waits for the running
/// refresh to end first, so two refreshes never spend the same refresh token (native-auth refresh tokens rotate on
/// every use). Different users refresh independently.
actor TokenRefresher {
    struct Key: Hashable, Sendable {
        var userId: String
        /// Sorted; empty for an App-style refresh of the scopes the session already has.
        var scopes: [String]
        var claims: String?
    }

    private var running: [String: (id: Int, key: Key, task: Task<StoredUser, any Error>)] = [:]
    private var nextId = 0
    /// Callers inside ``refresh(_:_:)`` now, running, joining or waiting; tests read it.
    private(set) var callers = 0

    /// The user as `work` left it, or the running refresh's result for the same key.
    func refresh(_ key: Key, _ work: @escaping @Sendable () async throws -> StoredUser) async throws -> StoredUser {
        callers += 1
        defer { callers -= 1 }
        while let current = running[key.userId] {
            if current.key == key {
                return try await current.task.value
            }
            _ = try? await current.task.value
            // The refresh has ended; its caller clears it when it runs again, which may be after us.
            if running[key.userId]?.id == current.id { running[key.userId] = nil }
        }
        nextId += 1
        let id = nextId
        // Unstructured, so that one caller's cancellation does not cancel the refresh the others wait for.
        let task = Task<StoredUser, any Error> { try await work() }
        running[key.userId] = (id, key, task)
        defer { if running[key.userId]?.id == id { running[key.userId] = nil } }
        return try await task.value
    }
}
