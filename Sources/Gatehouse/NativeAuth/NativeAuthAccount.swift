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
}

/// An access token from ``NativeAuthUserAccountResult/getAccessToken(parameters:delegate:)``.
public struct NativeAuthTokenResult: Sendable, Hashable {
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
}

/// A signed-in account with its tokens (MSAL's `MSALNativeAuthUserAccountResult`): what a completed sign-in
/// returns and what ``NativeAuthClient/getNativeAuthUserAccount(correlationId:)`` finds in the cache.
///
/// ```swift
/// let account = try await client.signIn(username: email, password: password).account   // or a state's signIn()
/// let token = try await account.getAccessToken()
/// ```
public final class NativeAuthUserAccountResult: Sendable {
    /// Who signed in.
    public let account: NativeAuthAccount
    /// The raw id token, as of this result.
    public let idToken: String?
    let engine: NativeAuthEngine

    init(_ cached: CachedNativeAccount, engine: NativeAuthEngine) {
        account = cached.account
        idToken = cached.idToken
        self.engine = engine
    }

    /// Signs out: the cached account and its tokens are deleted at once, and the server is asked to end the session
    /// (`oauth2/v2.0/revoke`), so that its refresh token and the access tokens it issued stop working there. The
    /// local sign-out never waits for the server and does not depend on it: offline, the app is signed out all the
    /// same (the session then ends on the server when its refresh token expires).
    ///
    /// - Returns: the server call, for a caller that wants to wait for it (`await account.signOut().value`); MSAL's
    ///   `signOut()` returns nothing, and ignoring the result is what most apps do.
    @discardableResult
    public func signOut() -> Task<Void, Never> {
        let refreshToken = engine.accounts.current.flatMap { $0.userId == account.userId ? $0.refreshToken : nil }
        engine.accounts.remove(userId: account.userId)
        return Task { [engine] in
            guard let refreshToken else { return }
            await engine.revoke(refreshToken: refreshToken)
        }
    }

    /// An access token: the cached one while it is not about to expire, otherwise a new one from a
    /// `refresh_token` grant. Concurrent calls share one refresh; the refresh token the server rotates in is stored.
    ///
    /// - Throws: ``RetrieveAccessTokenError``; `isRefreshTokenExpired` means the user must sign in again.
    public func getAccessToken(parameters: GetAccessTokenParameters) async throws(RetrieveAccessTokenError) -> NativeAuthTokenResult {
        try await engine.accounts.accessToken(
            userId: account.userId,
            request: parameters.snapshot,
            engine: engine
        )
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
        DelegateCall.deliver {
            do throws(RetrieveAccessTokenError) {
                let result = try await self.engine.accounts.accessToken(userId: self.account.userId, request: request, engine: self.engine)
                DelegateCall.optional {
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

// MARK: - Cache

/// What the SDK keeps about the signed-in account between launches.
struct CachedNativeAccount: Codable, Sendable, Hashable {
    var username: String
    var userId: String
    var tenantId: String
    var idToken: String?
    var accessToken: String
    var refreshToken: String?
    /// The scopes the access token was granted.
    var grantedScopes: [String]
    /// The app's scopes asked at sign-in (without `openid profile offline_access`); refreshes ask them again.
    var requestedScopes: [String]
    var expiresOn: Date

    var account: NativeAuthAccount {
        NativeAuthAccount(
            username: username,
            userId: userId,
            homeAccountId: "\(userId).\(tenantId)",
            claims: idToken.flatMap(Self.claims)
        )
    }

    /// The account a token answer describes. Its user comes from `client_info`, or else from the id token.
    init(
        _ answer: NativeAuthTokenResponse,
        username: String,
        requestedScopes: [String]?,
        now: Date,
        correlationId: UUID
    ) throws(NativeAuthFailure) {
        let claims = answer.idToken.flatMap(Self.claims)
        let info = Self.clientInfo(answer.clientInfo)
        guard let userId = info?.uid ?? claims?.sub, let tenantId = info?.utid ?? claims?.tid else {
            throw .general("The token answer names no user: no readable client_info or id_token", correlationId)
        }
        self.username = claims?.preferredUsername ?? username
        self.userId = userId
        self.tenantId = tenantId
        idToken = answer.idToken
        accessToken = answer.accessToken
        refreshToken = answer.refreshToken
        grantedScopes = answer.scope.split(separator: " ").map(String.init)
        self.requestedScopes = (requestedScopes ?? []).filter { !NativeAuthEngine.oidcScopes.contains($0) }
        expiresOn = now.addingTimeInterval(TimeInterval(answer.expiresIn))
    }

    /// This account after a refresh: new access token, the rotated refresh token (or the old one if none came), a
    /// new id token if one came.
    func refreshed(with answer: NativeAuthTokenResponse, requestedScopes: [String], now: Date) -> CachedNativeAccount {
        var copy = self
        copy.accessToken = answer.accessToken
        copy.refreshToken = answer.refreshToken ?? refreshToken
        copy.idToken = answer.idToken ?? idToken
        copy.grantedScopes = answer.scope.split(separator: " ").map(String.init)
        copy.requestedScopes = requestedScopes
        copy.expiresOn = now.addingTimeInterval(TimeInterval(answer.expiresIn))
        return copy
    }

    /// The payload of a JWT, not verified.
    static func claims(_ token: String) -> NativeAuthIDTokenClaims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = base64URLDecode(parts[1]) else { return nil }
        return try? JSONDecoder().decode(NativeAuthIDTokenClaims.self, from: data)
    }

    static func clientInfo(_ text: String) -> NativeAuthClientInfo? {
        guard let data = base64URLDecode(Substring(text)) else { return nil }
        return try? JSONDecoder().decode(NativeAuthClientInfo.self, from: data)
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

/// The blob saved in the account store.
struct PersistedNativeAccount: Codable, Sendable {
    var version = 1
    var account: CachedNativeAccount?
}

/// The one signed-in account of a client (MSAL keeps a single account: a new sign-in replaces it), saved in the
/// configuration's ``UserStore`` after every change, and the single-flight refresh of its access token.
final class NativeAuthAccountCache: Sendable {
    private let store: any UserStore
    private let key: String
    private let state: Locked<CachedNativeAccount?>
    let refresher = TokenRefresher()
    private let now: @Sendable () -> Date
    private let leeway: TimeInterval

    init(configuration: NativeAuthConfiguration) {
        store = configuration.accountStore
        key = configuration.accountStoreKey
        now = configuration.now
        leeway = configuration.refreshLeeway
        var loaded: CachedNativeAccount?
        if let data = try? store.load(appId: key), let persisted = try? Self.decoder.decode(PersistedNativeAccount.self, from: data) {
            loaded = persisted.account
        }
        state = Locked(loaded)
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }

    var current: CachedNativeAccount? { state.withLock { $0 } }

    /// Changes the account under the lock and saves the result. `change` returns false to leave everything as it is.
    @discardableResult
    private func mutate(_ change: (inout CachedNativeAccount?) -> Bool) throws -> Bool {
        // Saving under the lock keeps the store in the order of the changes.
        try state.withLock { account in
            var copy = account
            guard change(&copy) else { return false }
            try store.save(try Self.encoder.encode(PersistedNativeAccount(account: copy)), appId: key)
            account = copy
            return true
        }
    }

    /// Saves a newly signed-in account in place of any other.
    func replace(with account: CachedNativeAccount) throws {
        try mutate { current in
            current = account
            return true
        }
    }

    /// Forgets the account if it is still `userId`'s.
    func remove(userId: String) {
        _ = try? mutate { current in
            guard current?.userId == userId else { return false }
            current = nil
            return true
        }
    }

    // MARK: Access tokens

    /// The cached access token if it will do, otherwise a refreshed one.
    func accessToken(userId: String, request: GetAccessTokenParameters.Values, engine: NativeAuthEngine) async throws(RetrieveAccessTokenError)
        -> NativeAuthTokenResult
    {
        let correlationId = request.correlationId ?? UUID()
        guard let account = current, account.userId == userId else {
            throw RetrieveAccessTokenError(general: "The account is signed out", correlationId: correlationId)
        }
        let scopes = request.scopes.map { $0.filter { !NativeAuthEngine.oidcScopes.contains($0) } } ?? account.requestedScopes
        if !request.forceRefresh, request.claimsRequest == nil, usable(account, scopes: scopes) {
            return result(account, request: request, correlationId: correlationId)
        }
        let key = TokenRefresher.Key(userId: userId, scopes: scopes.sorted(), claims: request.claimsRequest)
        let refreshed: CachedNativeAccount
        do throws(NativeAuthFailure) {
            refreshed = try await refresher.refresh(key) { () async throws(NativeAuthFailure) -> CachedNativeAccount in
                try await self.refresh(userId: userId, scopes: scopes, claims: request.claimsRequest, correlationId: correlationId, engine: engine)
            }
        } catch {
            throw Self.tokenError(error)
        }
        return result(refreshed, request: request, correlationId: correlationId)
    }

    /// True when `account`'s access token covers `scopes` and will not expire within the leeway.
    private func usable(_ account: CachedNativeAccount, scopes: [String]) -> Bool {
        guard !account.accessToken.isEmpty, account.expiresOn.timeIntervalSince(now()) > leeway else { return false }
        return Set(scopes).isSubset(of: Set(account.grantedScopes))
    }

    private func result(_ account: CachedNativeAccount, request: GetAccessTokenParameters.Values, correlationId: UUID) -> NativeAuthTokenResult {
        NativeAuthTokenResult(
            accessToken: account.accessToken,
            refreshToken: request.returnRefreshToken ? account.refreshToken : nil,
            scopes: account.grantedScopes,
            expiresOn: account.expiresOn,
            correlationId: correlationId
        )
    }

    /// One `refresh_token` grant with the refresh token stored now (so a refresh that waited for another uses the
    /// token that one rotated in). The answer is stored only if the account is still the one refreshed.
    private func refresh(
        userId: String,
        scopes: [String],
        claims: String?,
        correlationId: UUID,
        engine: NativeAuthEngine
    ) async throws(NativeAuthFailure) -> CachedNativeAccount {
        guard let account = current, account.userId == userId, let refreshToken = account.refreshToken else {
            throw .general("The account is signed out or has no refresh token", correlationId)
        }
        let fields = engine.tokenForm(grant: .refreshToken, secret: ("refresh_token", refreshToken), scopes: scopes, claims: claims)
        let answer = try await engine.post(.token, fields, correlationId: correlationId, as: NativeAuthTokenResponse.self)
        let updated = account.refreshed(with: answer, requestedScopes: scopes, now: now())
        let applied: Bool
        do {
            applied = try mutate { current in
                guard let stored = current, stored.userId == userId, stored.refreshToken == refreshToken else { return false }
                current = updated
                return true
            }
        } catch {
            throw .general("Cannot save the refreshed tokens: \(error)", correlationId)
        }
        guard applied else { throw .general("The account was signed out during the refresh", correlationId) }
        return updated
    }

    private static func tokenError(_ failure: NativeAuthFailure) -> RetrieveAccessTokenError {
        if failure.isRedirect { return RetrieveAccessTokenError(.browserRequired, failure) }
        if failure.isServerError(.expiredRefreshToken) {
            return RetrieveAccessTokenError(.refreshTokenExpired, failure, fixedText: NativeAuthErrorText.refreshTokenExpired)
        }
        if failure.isServerError(.invalidScope) {
            return RetrieveAccessTokenError(.invalidScope, failure, fixedText: NativeAuthErrorText.invalidScope)
        }
        return RetrieveAccessTokenError(.generalError, failure)
    }
}

/// Runs one refresh at a time. A caller whose refresh (same user, scopes and claims) is already running waits for
/// it instead of sending its own; a caller with a different one waits for the running refresh to end first, so two
/// refreshes never spend the same refresh token.
actor TokenRefresher {
    struct Key: Hashable, Sendable {
        var userId: String
        var scopes: [String]
        var claims: String?
    }

    private var running: (id: Int, key: Key, task: Task<CachedNativeAccount, any Error>)?
    private var nextId = 0
    /// Callers inside ``refresh(_:_:)`` now, running, joining or waiting; tests read it.
    private(set) var callers = 0

    func refresh(
        _ key: Key,
        _ work: @escaping @Sendable () async throws(NativeAuthFailure) -> CachedNativeAccount
    ) async throws(NativeAuthFailure) -> CachedNativeAccount {
        callers += 1
        defer { callers -= 1 }
        while let current = running {
            if current.key == key {
                return try await Self.value(of: current.task)
            }
            _ = try? await current.task.value
            // The refresh has ended; its caller clears it when it runs again, which may be after us.
            if running?.id == current.id { running = nil }
        }
        nextId += 1
        let id = nextId
        // Unstructured, so that one caller's cancellation does not cancel the refresh the others wait for.
        let task = Task<CachedNativeAccount, any Error> { try await work() }
        running = (id, key, task)
        defer { if running?.id == id { running = nil } }
        return try await Self.value(of: task)
    }

    private static func value(of task: Task<CachedNativeAccount, any Error>) async throws(NativeAuthFailure) -> CachedNativeAccount {
        do {
            return try await task.value
        } catch let failure as NativeAuthFailure {
            throw failure
        } catch {
            throw .general("The refresh failed: \(error)", UUID())
        }
    }
}
