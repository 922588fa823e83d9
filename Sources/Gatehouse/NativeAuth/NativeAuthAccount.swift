import Foundation
internal import GatehouseWire

/// The signed-in account, as the id token describes it.
public struct NativeAuthAccount: Sendable, Hashable {
    /// The address the user signs in with (the id token's `preferred_username`, or the username the flow used).
    public let username: String
    /// The user id (`client_info.uid`, the same id the Client API uses).
    public let userId: String
    /// MSAL's account identifier: `{uid}.{utid}` from `client_info`.
    public let homeAccountId: String
    /// The id token's claims, read without verifying its signature (the token came straight from the server over
    /// the connection the app trusts). Nil when the server sent no readable id token.
    public let claims: NativeAuthIDTokenClaims?
    /// The id token's payload as it came, behind ``accountClaims``.
    let claimsJSON: Data?

    /// MSAL's `accountClaims`: every claim of the id token, by name (`claims?["preferred_username"] as? String`).
    public var accountClaims: [String: Any]? {
        claimsJSON.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }

    /// MSAL's `identifier`: the same as ``homeAccountId``.
    public var identifier: String? { homeAccountId }
}

/// An access token from ``NativeAuthUserAccountResult/getAccessToken(parameters:delegate:)``. Printing it shows its
/// scopes and expiry, never the tokens.
public struct NativeAuthTokenResult: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The access token ("" if the server sent none).
    public let accessToken: String
    /// The refresh token, only when the parameters asked for it (`returnRefreshToken`).
    public let refreshToken: String?
    /// The scopes the access token was granted.
    public let scopes: [String]
    /// When the access token expires (local time of receipt plus `expires_in`).
    public let expiresOn: Date?
    /// The correlation id of the call.
    public let correlationId: UUID

    public var description: String {
        "NativeAuthTokenResult(accessToken: \(redacted), refreshToken: \(redacted(refreshToken)), scopes: \(scopes), "
            + "expiresOn: \(expiresOn.map { "\($0)" } ?? "nil"), correlationId: \(correlationId))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: [
            "accessToken": redacted, "refreshToken": redacted(refreshToken), "scopes": scopes,
            "expiresOn": expiresOn as Any, "correlationId": correlationId,
        ])
    }
}

/// A signed-in account with its tokens (MSAL's `MSALNativeAuthUserAccountResult`): what a completed sign-in
/// returns and what ``NativeAuthClient/getNativeAuthUserAccount(correlationId:)`` finds in the cache.
///
/// ```swift
/// let account = try await client.signIn(username: email, password: password).account   // or a state's signIn()
/// let token = try await account.getAccessToken()
/// let user = account.user   // the same session as an App-style User: profile, linking, API keys, delete
/// ```
public final class NativeAuthUserAccountResult: Sendable {
    /// Who signed in.
    public let account: NativeAuthAccount
    /// The raw id token, as of this result.
    public let idToken: String?
    let engine: NativeAuthEngine

    init(_ stored: StoredUser, session: NativeSession, engine: NativeAuthEngine) {
        account = session.account(userId: stored.id)
        idToken = session.idToken
        self.engine = engine
    }

    /// The same signed-in session as a ``User`` of the App-style API (of ``NativeAuthClient/app``): its profile,
    /// custom data, identity linking, user API keys and deletion. One session: refreshing either refreshes both,
    /// signing out of either signs out of both.
    public var user: User { engine.core.user(account.userId) }

    /// Signs out: the cached account and its tokens are deleted at once, and the server is asked to end the session
    /// (`oauth2/v2.0/revoke`), so that its refresh token and the access tokens it issued stop working there. The
    /// local sign-out never waits for the server and does not depend on it: offline, the app is signed out all the
    /// same (the session then ends on the server when its refresh token expires).
    ///
    /// - Returns: the server call, for a caller that wants to wait for it (`await account.signOut().value`); MSAL's
    ///   `signOut()` returns nothing, and ignoring the result is what most apps do.
    @discardableResult
    public func signOut() -> Task<Void, Never> {
        let userId = account.userId
        let core = engine.core
        // Carried through even when the store cannot save it: the session still ends on the server, so that an
        // account the store kept is signed out at its next refresh.
        let refreshToken = core.mutateAnyway { users -> String? in
            guard let user = users.user(userId), user.native != nil else { return nil }
            users.users.removeAll { $0.id == userId }
            return user.loggedIn ? user.refreshToken : nil
        }.result
        if refreshToken != nil { core.events.emit(.signedOut(userId: userId)) }
        return Task { [engine] in
            guard let refreshToken else { return }
            await engine.revoke(refreshToken: refreshToken)
        }
    }

    /// An access token: the cached one while it is not about to expire, otherwise a new one from a
    /// `refresh_token` grant. Concurrent calls share one refresh; the refresh token the server rotates in is stored.
    ///
    /// - Throws: ``RetrieveAccessTokenError``; `isRefreshTokenExpired` means the user must sign in again (the account
    ///   is already signed out: the server ended the session).
    public func getAccessToken(parameters: GetAccessTokenParameters) async throws(RetrieveAccessTokenError) -> NativeAuthTokenResult {
        try await engine.accessToken(userId: account.userId, request: parameters.snapshot)
    }

    /// ``getAccessToken(parameters:)`` with its common options.
    public func getAccessToken(
        forceRefresh: Bool = false,
        scopes: [String]? = nil,
        correlationId: UUID? = nil
    ) async throws(RetrieveAccessTokenError) -> NativeAuthTokenResult {
        let parameters = GetAccessTokenParameters()
        parameters.forceRefresh = forceRefresh
        parameters.scopes = scopes
        parameters.correlationId = correlationId
        return try await getAccessToken(parameters: parameters)
    }

    /// Delegate form of ``getAccessToken(parameters:)``.
    public func getAccessToken(parameters: GetAccessTokenParameters, delegate: any CredentialsDelegate) {
        let request = parameters.snapshot
        DelegateCall.deliver(delegate) { delegate in
            do throws(RetrieveAccessTokenError) {
                let result = try await self.engine.accessToken(userId: self.account.userId, request: request)
                DelegateCall.optional(delegate, .onAccessTokenRetrieveCompleted) {
                    delegate.onAccessTokenRetrieveCompleted(result: result)
                } otherwise: { message in
                    delegate.onAccessTokenRetrieveError(error: RetrieveAccessTokenError(general: message, correlationId: result.correlationId))
                }
            } catch {
                delegate.onAccessTokenRetrieveError(error: error)
            }
        }
    }

    /// MSAL 1.x form of ``getAccessToken(parameters:delegate:)``.
    public func getAccessToken(forceRefresh: Bool = false, correlationId: UUID? = nil, delegate: any CredentialsDelegate) {
        getAccessToken(scopes: [], forceRefresh: forceRefresh, correlationId: correlationId, delegate: delegate)
    }

    /// MSAL 1.x form of ``getAccessToken(parameters:delegate:)`` with scopes.
    public func getAccessToken(scopes: [String], forceRefresh: Bool = false, correlationId: UUID? = nil, delegate: any CredentialsDelegate) {
        let parameters = GetAccessTokenParameters()
        parameters.scopes = scopes.isEmpty ? nil : scopes
        parameters.forceRefresh = forceRefresh
        parameters.correlationId = correlationId
        getAccessToken(parameters: parameters, delegate: delegate)
    }
}

// MARK: - The session, stored

/// What a native-auth sign-in adds to its ``StoredUser``: the fields of MSAL's account and token results.
struct NativeSession: Codable, Sendable, Hashable {
    /// The client id that signed in (whose `/token` refreshes the session).
    var clientId: String
    var username: String
    var tenantId: String
    var idToken: String?
    /// The scopes the access token was granted.
    var grantedScopes: [String]
    /// The app's scopes asked at sign-in (without `openid profile offline_access`); refreshes ask them again.
    var requestedScopes: [String]
    /// When the access token expires: the time of receipt plus `expires_in`.
    var expiresOn: Date

    func account(userId: String) -> NativeAuthAccount {
        NativeAuthAccount(
            username: username,
            userId: userId,
            homeAccountId: "\(userId).\(tenantId)",
            claims: idToken.flatMap { TokenDecoder.payload(of: $0, as: NativeAuthIDTokenClaims.self) },
            claimsJSON: idToken.flatMap { TokenDecoder.payloadData(of: $0) }
        )
    }
}

extension StoredUser {
    /// The user a native token answer signs in. Its id comes from `client_info`, or else from the id token; the
    /// profile from the id token's `email` and `name` (the server's profile, identities included, comes with
    /// ``User/refreshProfile()``).
    init(
        signedIn answer: NativeAuthTokenResponse,
        clientId: String,
        username: String,
        requestedScopes: [String]?,
        now: Date,
        correlationId: UUID
    ) throws(NativeAuthFailure) {
        let (userId, tenantId, claims) = Self.named(by: answer)
        guard let userId, let tenantId else {
            throw .general("The token answer names no user: no readable client_info or id_token", correlationId)
        }
        var profile: [String: JSONValue] = [:]
        if let email = claims?.email { profile["email"] = .string(email) }
        if let name = claims?.name { profile["name"] = .string(name) }
        self.init(
            id: userId,
            deviceId: "000000000000000000000000",
            accessToken: answer.accessToken,
            refreshToken: answer.refreshToken,
            loggedIn: true,
            identities: [],
            profileData: profile,
            lastLogin: now,
            native: NativeSession(
                clientId: clientId,
                username: claims?.preferredUsername ?? username,
                tenantId: tenantId,
                idToken: answer.idToken,
                grantedScopes: answer.scope.split(separator: " ").map(String.init),
                requestedScopes: (requestedScopes ?? []).filter { !NativeAuthEngine.oidcScopes.contains($0) },
                expiresOn: now.addingTimeInterval(TimeInterval(answer.expiresIn))
            )
        )
    }

    /// The user and tenant a native token answer names (`client_info`, else the id token's claims), and those claims.
    static func named(by answer: NativeAuthTokenResponse) -> (userId: String?, tenantId: String?, claims: NativeAuthIDTokenClaims?) {
        let claims = answer.idToken.flatMap { TokenDecoder.payload(of: $0, as: NativeAuthIDTokenClaims.self) }
        let info = TokenDecoder.base64URL(Substring(answer.clientInfo)).flatMap { try? JSONDecoder().decode(NativeAuthClientInfo.self, from: $0) }
        return (info?.uid ?? claims?.sub, info?.utid ?? claims?.tid, claims)
    }

    /// When the access token expires: as the native answer said, else the token's `exp`.
    var accessTokenExpiry: Date? {
        if let native { return native.expiresOn }
        return accessToken.flatMap { JWTClaims($0)?.exp }.map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    /// Takes a native refresh answer: the new access token, the rotated refresh token (or the old one if none came),
    /// a new id token if one came.
    mutating func applyRefresh(_ answer: NativeAuthTokenResponse, requestedScopes: [String], now: Date) {
        accessToken = answer.accessToken
        refreshToken = answer.refreshToken ?? refreshToken
        guard var session = native else { return }
        session.idToken = answer.idToken ?? session.idToken
        session.grantedScopes = answer.scope.split(separator: " ").map(String.init)
        session.requestedScopes = requestedScopes
        session.expiresOn = now.addingTimeInterval(TimeInterval(answer.expiresIn))
        native = session
    }
}

extension NativeAuthFailure {
    /// The server refused the refresh token itself (expired, revoked, replayed): the session is over.
    var endsSession: Bool { isServerError(.invalidGrant) || isServerError(.expiredRefreshToken) }
}

/// The native-auth cache of earlier releases (`{"version":1,"account":{…}}`), read once and then saved as users.
struct PersistedNativeAccount: Decodable {
    struct Account: Decodable {
        var username: String
        var userId: String
        var tenantId: String
        var idToken: String?
        var accessToken: String
        var refreshToken: String?
        var grantedScopes: [String]
        var requestedScopes: [String]
        var expiresOn: Date
    }

    var version: Int
    var account: Account?

    static func users(from data: Data, clientId: String) -> PersistedUsers? {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let legacy = try? decoder.decode(Self.self, from: data), legacy.version == 1 else { return nil }
        var users = PersistedUsers()
        if let account = legacy.account {
            let session = NativeSession(
                clientId: clientId, username: account.username, tenantId: account.tenantId, idToken: account.idToken,
                grantedScopes: account.grantedScopes, requestedScopes: account.requestedScopes, expiresOn: account.expiresOn
            )
            users.users = [
                StoredUser(
                    id: account.userId, deviceId: "000000000000000000000000", accessToken: account.accessToken,
                    refreshToken: account.refreshToken, loggedIn: true, identities: [], profileData: [:], lastLogin: account.expiresOn,
                    native: session
                )
            ]
            users.currentUserId = account.userId
        }
        return users
    }
}
