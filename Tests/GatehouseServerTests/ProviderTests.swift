import Crypto
import CryptoExtras
import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// `custom-token`, `oauth2-google`, `oauth2-apple` and `oauth2-facebook` against ``TestIdentityProvider`` over real
/// HTTP: each provider's success and refusals, and identity linking.
// Outbound calls have deadlines; the limit turns anything that still hangs into a named failure.
@Suite(.timeLimit(.minutes(3))) struct ProviderTests {
    static let secret = "a shared secret of at least thirty-two bytes"

    static func configuration(_ idp: TestIdentityProvider) -> GatehouseConfiguration {
        var config = testConfiguration()
        config.apps[0].customToken = CustomTokenSettings(
            keys: [.secret(secret, kid: nil)], jwksURL: idp.baseURL + "/jwks", issuers: [idp.baseURL, "my-backend"], audiences: ["test-app"],
            metadataFields: [.init(name: "email", required: true), .init(name: "profile.name", field: "name")]
        )
        config.apps[0].google = GoogleSettings(
            clientIds: ["ios-client.apps.example"], serverClientId: TestIdentityProvider.clientId, clientSecret: TestIdentityProvider.clientSecret,
            issuers: [idp.baseURL], jwksURL: idp.baseURL + "/jwks", tokenURL: idp.baseURL + "/token"
        )
        config.apps[0].apple = AppleSettings(clientIds: ["com.example.app"], issuer: idp.baseURL, jwksURL: idp.baseURL + "/jwks")
        config.apps[0].facebook = FacebookSettings(appId: "fb-app", appSecret: "fb-secret", graphURL: idp.baseURL)
        return config
    }

    /// An HS256 token from "my-backend".
    static func hs256(_ claims: [String: JSONValue], secret: String = secret, alg: String = "HS256") throws -> String {
        try TestIdentityProvider.compact(header: ["alg": .string(alg), "typ": "JWT"], claims: claims) { input in
            Data(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: Data(secret.utf8))))
        }
    }

    static func backendClaims(sub: String, now: Date, extra: [String: JSONValue] = [:]) -> [String: JSONValue] {
        var claims: [String: JSONValue] = [
            "iss": "my-backend", "aud": "test-app", "sub": .string(sub), "email": .string("\(sub)@example.com"),
            "profile": ["name": .string("User \(sub)")], "iat": .int(Int64(now.timeIntervalSince1970)),
            "exp": .int(Int64(now.timeIntervalSince1970) + 600),
        ]
        claims.merge(extra) { $1 }
        return claims
    }

    static func path(_ provider: String) -> String { Path.app() + "/auth/providers/\(provider)/login" }

    /// Runs `body` with an identity provider and a Gatehouse configured to trust it.
    func withProviders(_ body: @escaping @Sendable (TestIdentityProvider, ManualClock, any TestClientProtocol) async throws -> Void) async throws {
        try await withIdentityProvider { idp in
            let clock = ManualClock(Date())
            try await withGatehouse(Self.configuration(idp), clock: clock) { _, client in try await body(idp, clock, client) }
        }
    }

    @Test func customTokenWithASharedSecretFindsTheSameUserAndFillsTheProfile() async throws {
        try await withProviders { _, clock, client in
            let token = try Self.hs256(Self.backendClaims(sub: "u-1", now: clock.now))
            let first = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: token))
            #expect(first.status == .ok, "\(first.text)")
            let login = try first.decode(LoginResponse.self)
            let again = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: try Self.hs256(Self.backendClaims(sub: "u-1", now: clock.now))))
            #expect(try again.decode(LoginResponse.self).userId == login.userId)
            let other = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: try Self.hs256(Self.backendClaims(sub: "u-2", now: clock.now))))
            #expect(try other.decode(LoginResponse.self).userId != login.userId)

            let profile = try await client.call(Path.profile, .get, bearer: login.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["custom-token"])
            #expect(profile.identities.map(\.id) == ["u-1"])
            #expect(profile.data["email"] == "u-1@example.com")
            #expect(profile.data["name"] == "User u-1")
        }
    }

    @Test func customTokenRefusalsSayWhy() async throws {
        try await withProviders { idp, clock, client in
            func refusal(_ token: String) async throws -> String {
                let reply = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: token))
                #expect(reply.status == .unauthorized, "\(reply.text)")
                #expect(reply.error?.errorCode == .invalidPassword)
                return reply.error?.error ?? ""
            }
            let now = clock.now
            #expect(try await refusal("not-a-jwt").contains("invalid number of segments"))
            #expect(try await refusal("a.b.c.d").contains("invalid number of segments"))
            // alg none, with and without a signature.
            let unsigned = try TestIdentityProvider.compact(header: ["alg": "none"], claims: Self.backendClaims(sub: "x", now: now)) { _ in Data() }
            #expect(try await refusal(unsigned).contains("not allowed"))
            #expect(try await refusal(try Self.hs256(Self.backendClaims(sub: "x", now: now), secret: "another secret that is long enough!!")).contains("signature is invalid"))
            #expect(try await refusal(try Self.hs256(Self.backendClaims(sub: "x", now: now, extra: ["aud": "other-app"]))).contains("aud"))
            #expect(try await refusal(try Self.hs256(Self.backendClaims(sub: "x", now: now, extra: ["iss": "someone-else"]))).contains("iss"))
            #expect(try await refusal(try Self.hs256(Self.backendClaims(sub: "x", now: now, extra: ["email": .null]))).contains("\"email\" is missing"))
            var noExpiry = Self.backendClaims(sub: "x", now: now)
            noExpiry["exp"] = nil
            #expect(try await refusal(try Self.hs256(noExpiry)).contains("exp"))
            var noSubject = Self.backendClaims(sub: "x", now: now)
            noSubject["sub"] = nil
            #expect(try await refusal(try Self.hs256(noSubject)).contains("sub"))
            // Tampered payload: the signature no longer matches.
            let good = try Self.hs256(Self.backendClaims(sub: "x", now: now)).split(separator: ".")
            let forged = Base64URL.encode(try JSONEncoder().encode(Self.backendClaims(sub: "admin", now: now)))
            #expect(try await refusal("\(good[0]).\(forged).\(good[2])").contains("signature is invalid"))
            // Expiry is checked against the injected clock (with a minute of leeway).
            let token = try Self.hs256(Self.backendClaims(sub: "x", now: now))
            clock.advance(by: 600 + 61)
            #expect(try await refusal(token).contains("expired"))
            // An RS256 token re-signed as HS256 with the provider's public key as the secret (algorithm confusion).
            let primitives = try TestIdentityProvider.rsaKey().publicKey.getKeyPrimitives()
            let confused = try Self.hs256(Self.backendClaims(sub: "x", now: clock.now, extra: ["iss": .string(idp.baseURL)]), secret: Base64URL.encode(primitives.modulus))
            #expect(try await refusal(confused).contains("signature is invalid"))
        }
    }

    /// An HS256 token whose header and payload are exactly these JSON texts (to write what an encoder would not).
    static func rawHS256(header: String, payload: String) -> String {
        rawHS256Bytes(header: Data(header.utf8), payload: Data(payload.utf8))
    }

    /// An HS256 token whose header and payload are exactly these bytes.
    static func rawHS256Bytes(header: Data, payload: Data) -> String {
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return input + "." + Base64URL.encode(Data(mac))
    }

    /// The issuer and Gatehouse must read one token one way: duplicate names (escaped or not), `crit`, mistyped
    /// registered claims, what JSON does not allow, tokens that live too long and oversized ones are refused, each well
    /// signed.
    @Test func customTokensAreParsedStrictly() async throws {
        try await withProviders { _, clock, client in
            let now = Int64(clock.now.timeIntervalSince1970)
            let claims = #""iss":"my-backend","aud":"test-app","email":"x@example.com","exp":\#(now + 600)"#
            func status(_ token: String) async throws -> (HTTPResponse.Status, String) {
                let reply = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: token))
                return (reply.status, reply.error?.error ?? "")
            }
            let header = #"{"alg":"HS256","typ":"JWT"}"#
            // The control: the same shape, well formed, logs in.
            #expect(try await status(Self.rawHS256(header: header, payload: "{\(claims),\"sub\":\"alice\"}")).0 == .ok)
            for (label, token, reason) in [
                ("duplicate sub", Self.rawHS256(header: header, payload: "{\"sub\":\"alice\",\(claims),\"sub\":\"admin\"}"), "twice"),
                ("escaped duplicate", Self.rawHS256(header: header, payload: "{\"sub\":\"alice\",\(claims),\"s\\u0075b\":\"admin\"}"), "twice"),
                ("duplicate alg", Self.rawHS256(header: #"{"alg":"HS256","alg":"none"}"#, payload: "{\(claims),\"sub\":\"alice\"}"), "twice"),
                ("crit b64", Self.rawHS256(header: #"{"alg":"HS256","crit":["b64"],"b64":false}"#, payload: "{\(claims),\"sub\":\"alice\"}"), "crit"),
                ("string nbf", Self.rawHS256(header: header, payload: "{\(claims),\"sub\":\"alice\",\"nbf\":\"2099-01-01\"}"), "type"),
                ("numeric sub", Self.rawHS256(header: header, payload: "{\(claims),\"sub\":42}"), "type"),
                ("a year long", Self.rawHS256(header: header, payload: #"{"iss":"my-backend","aud":"test-app","email":"x@example.com","sub":"alice","exp":\#(now + 31_536_000)}"#), "longer"),
                // What Foundation's decoder accepts and RFC 8259 does not.
                ("trailing comma", Self.rawHS256(header: header, payload: "{\(claims),\"sub\":\"alice\",}"), "trailing comma"),
                ("trailing comma in a list", Self.rawHS256(header: header, payload: "{\(claims),\"sub\":\"alice\",\"x\":[\"a\",]}"), "trailing comma"),
                ("UTF-16", Self.rawHS256Bytes(header: Data(header.utf8), payload: "{\(claims),\"sub\":\"alice\"}".data(using: .utf16LittleEndian)!), "not UTF-8"),
                ("header trailing comma", Self.rawHS256(header: #"{"alg":"HS256",}"#, payload: "{\(claims),\"sub\":\"alice\"}"), "trailing comma"),
                ("byte order mark", Self.rawHS256(header: header, payload: "\u{FEFF}{\(claims),\"sub\":\"alice\"}"), "byte order mark"),
                ("too large", Self.rawHS256(header: header, payload: "{\(claims),\"sub\":\"alice\",\"name\":\"\(String(repeating: "n", count: 16_000))\"}"), "larger than"),
            ] {
                let (code, message) = try await status(token)
                #expect(code == .unauthorized, "\(label)")
                #expect(message.contains(reason), "\(label): \(message)")
            }
        }
    }

    /// A token signed by a configured key logs in whether or not the key set (also configured) can be fetched.
    @Test func anUnreachableKeySetNeverBlocksAConfiguredKey() async throws {
        var config = testConfiguration()
        config.apps[0].customToken = CustomTokenSettings(
            keys: [.secret(Self.secret, kid: nil)], jwksURL: "http://127.0.0.1:\(try freePort())/jwks", issuers: ["my-backend"], audiences: ["test-app"]
        )
        let clock = ManualClock(Date())
        try await withGatehouse(config, clock: clock) { _, client in
            let token = try Self.hs256(Self.backendClaims(sub: "static", now: clock.now))
            let reply = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: token))
            #expect(reply.status == .ok, "\(reply.text)")
        }
    }

    @Test func customTokenFromAJWKSFollowsKeyRotation() async throws {
        try await withProviders { idp, clock, client in
            let claims = Self.backendClaims(sub: "jwks-user", now: clock.now, extra: ["iss": .string(idp.baseURL)])
            for alg in ["RS256", "ES256"] {
                let reply = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: try idp.token(claims, alg: alg)))
                #expect(reply.status == .ok, "\(alg): \(reply.text)")
            }
            #expect(idp.jwksRequests == 1, "the key set is cached")
            // A new key: the first token naming it makes Gatehouse fetch the set again (at most every 30 seconds).
            let kid = try idp.rotate()
            clock.advance(by: 31)
            let rotated = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: try idp.token(claims, kid: kid)))
            #expect(rotated.status == .ok, "\(rotated.text)")
            #expect(idp.jwksRequests == 2)
            // Made-up kids do not make Gatehouse hammer the provider.
            for _ in 0..<3 {
                let unknown = try TestIdentityProvider.compact(header: ["alg": "RS256", "kid": "nope"], claims: claims) { _ in Data(repeating: 1, count: 256) }
                let reply = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: unknown))
                #expect(reply.status == .unauthorized)
            }
            #expect(idp.jwksRequests == 2)
        }
    }

    @Test func googleIdTokensAndAuthCodes() async throws {
        try await withProviders { idp, clock, client in
            let claims = idp.idTokenClaims(
                sub: "g-123", aud: "ios-client.apps.example", now: clock.now,
                extra: ["email": "gina@example.com", "email_verified": true, "name": "Gina G", "given_name": "Gina", "family_name": "G", "picture": "https://example.com/g.png"]
            )
            let login = try await client.call(Self.path("oauth2-google"), json: GoogleLoginRequest(idToken: try idp.token(claims)))
            #expect(login.status == .ok, "\(login.text)")
            let user = try login.decode(LoginResponse.self)
            let profile = try await client.call(Path.profile, .get, bearer: user.accessToken).decode(ProfileResponse.self)
            #expect(profile.data["email"] == "gina@example.com")
            #expect(profile.data["first_name"] == "Gina")
            #expect(profile.data["last_name"] == "G")
            #expect(profile.data["picture_url"] == "https://example.com/g.png")

            // A server auth code, exchanged at the token endpoint, is the same Google user.
            let code = idp.issueCode(idp.idTokenClaims(sub: "g-123", aud: TestIdentityProvider.clientId, now: clock.now))
            let byCode = try await client.call(Self.path("oauth2-google"), json: GoogleLoginRequest(authCode: code))
            #expect(byCode.status == .ok, "\(byCode.text)")
            #expect(try byCode.decode(LoginResponse.self).userId == user.userId)
            // A code works once.
            let reused = try await client.call(Self.path("oauth2-google"), json: GoogleLoginRequest(authCode: code))
            #expect(reused.status == .unauthorized)
            #expect(reused.error?.error.contains("invalid_grant") == true, "\(reused.text)")

            let wrongAudience = try await client.call(
                Self.path("oauth2-google"), json: GoogleLoginRequest(idToken: try idp.token(idp.idTokenClaims(sub: "g-1", aud: "someone-else", now: clock.now)))
            )
            #expect(wrongAudience.status == .unauthorized)
            #expect(wrongAudience.error?.error.contains("aud") == true)
            // A token for several audiences must have been issued to this app (`azp`). One for this app alone may
            // name another party: the token an Android client asks for on behalf of its server.
            func google(aud: [String], azp: String?) async throws -> Reply {
                var extra: [String: JSONValue] = ["aud": .array(aud.map { .string($0) })]
                if let azp { extra["azp"] = .string(azp) }
                let token = try idp.token(idp.idTokenClaims(sub: "g-123", aud: "", now: clock.now, extra: extra))
                return try await client.call(Self.path("oauth2-google"), json: GoogleLoginRequest(idToken: token))
            }
            for azp in ["another-client", nil] {
                let refused = try await google(aud: ["another-client", "ios-client.apps.example"], azp: azp)
                #expect(refused.status == .unauthorized, "azp \(azp ?? "missing")")
                #expect(refused.error?.error.contains("azp") == true, "\(refused.text)")
            }
            #expect(try await google(aud: ["another-client", "ios-client.apps.example"], azp: "ios-client.apps.example").status == .ok)
            #expect(try await google(aud: ["ios-client.apps.example"], azp: "android-client.apps.example").status == .ok)
            let hs = try Self.hs256(idp.idTokenClaims(sub: "g-1", aud: "ios-client.apps.example", now: clock.now))
            #expect(try await client.call(Self.path("oauth2-google"), json: GoogleLoginRequest(idToken: hs)).status == .unauthorized)
            let neither = try await client.call(Self.path("oauth2-google"), body: #"{"provider":"oauth2-google"}"#)
            #expect(neither.status == .badRequest)
            #expect(neither.error?.errorCode == .missingParameter)
        }
    }

    @Test func appleIdTokensCheckTheBundleId() async throws {
        try await withProviders { idp, clock, client in
            let token = try idp.token(idp.idTokenClaims(sub: "001234.apple", aud: "com.example.app", now: clock.now, extra: ["email": "a@privaterelay.appleid.com", "email_verified": "true"]), alg: "ES256")
            let login = try await client.call(Self.path("oauth2-apple"), json: AppleLoginRequest(idToken: token))
            #expect(login.status == .ok, "\(login.text)")
            let profile = try await client.call(Path.profile, .get, bearer: try login.decode(LoginResponse.self).accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["oauth2-apple"])
            #expect(profile.data["email"] == "a@privaterelay.appleid.com")
            let other = try idp.token(idp.idTokenClaims(sub: "001234.apple", aud: "com.other.app", now: clock.now))
            #expect(try await client.call(Self.path("oauth2-apple"), json: AppleLoginRequest(idToken: other)).status == .unauthorized)
            let expired = try idp.token(idp.idTokenClaims(sub: "001234.apple", aud: "com.example.app", now: clock.now.addingTimeInterval(-7200)))
            let late = try await client.call(Self.path("oauth2-apple"), json: AppleLoginRequest(idToken: expired))
            #expect(late.error?.error.contains("expired") == true, "\(late.text)")
        }
    }

    /// Anyone can put someone else's address on a Google or Apple account they own: the profile shows an ID token's
    /// address only when the provider says it verified it (`email_verified`, a boolean from Google, a string from
    /// Apple); the rest of the profile is filled as before.
    @Test(arguments: [JSONValue.bool(false), .string("false"), nil]) func anAddressTheProviderDidNotVerifyIsNotInTheProfile(_ verified: JSONValue?) async throws {
        try await withProviders { idp, clock, client in
            for (provider, aud, alg, sub) in [("oauth2-google", "ios-client.apps.example", "RS256", "g-unverified"), ("oauth2-apple", "com.example.app", "ES256", "a-unverified")] {
                var extra: [String: JSONValue] = ["email": "victim@example.com", "name": "Not The Victim"]
                if let verified { extra["email_verified"] = verified }
                let token = try idp.token(idp.idTokenClaims(sub: sub, aud: aud, now: clock.now, extra: extra), alg: alg)
                let login = provider == "oauth2-google"
                    ? try await client.call(Self.path(provider), json: GoogleLoginRequest(idToken: token))
                    : try await client.call(Self.path(provider), json: AppleLoginRequest(idToken: token))
                #expect(login.status == .ok, "\(provider): \(login.text)")
                let profile = try await client.call(Path.profile, .get, bearer: try login.decode(LoginResponse.self).accessToken).decode(ProfileResponse.self)
                #expect(profile.data["email"] == nil, "\(provider)")
                #expect(profile.data["name"] == "Not The Victim", "\(provider)")
            }
        }
    }

    @Test func facebookTokensAreCheckedWithTheGraphAPI() async throws {
        try await withProviders { idp, _, client in
            let token = idp.facebookToken(for: .init(id: "10001", appId: "fb-app", name: "Fay Book", email: "fay@example.com"))
            let login = try await client.call(Self.path("oauth2-facebook"), json: FacebookLoginRequest(accessToken: token))
            #expect(login.status == .ok, "\(login.text)")
            let profile = try await client.call(Path.profile, .get, bearer: try login.decode(LoginResponse.self).accessToken).decode(ProfileResponse.self)
            #expect(profile.data["name"] == "Fay Book")
            #expect(profile.data["first_name"] == "Fay")
            #expect(profile.data["picture_url"] == "https://example.com/10001.jpg")
            // A token of another Facebook app, and a made-up one.
            let foreign = idp.facebookToken(for: .init(id: "10002", appId: "other-fb-app", name: "X Y", email: "x@example.com"))
            #expect(try await client.call(Self.path("oauth2-facebook"), json: FacebookLoginRequest(accessToken: foreign)).status == .unauthorized)
            #expect(try await client.call(Self.path("oauth2-facebook"), json: FacebookLoginRequest(accessToken: "EAAmadeup")).status == .unauthorized)
        }
    }

    @Test func anUnreachableProviderIs502AndCreatesNoUser() async throws {
        let clock = ManualClock(Date())
        var config = testConfiguration()
        // A port nothing listens on.
        config.apps[0].apple = AppleSettings(clientIds: ["com.example.app"], issuer: "https://appleid.apple.com", jwksURL: "http://127.0.0.1:9/keys")
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            let token = try TestIdentityProvider.compact(header: ["alg": "RS256", "kid": "k"], claims: ["sub": "s", "exp": .int(Int64(clock.now.timeIntervalSince1970) + 60)]) { _ in Data(repeating: 0, count: 256) }
            let reply = try await client.call(Self.path("oauth2-apple"), json: AppleLoginRequest(idToken: token))
            #expect(reply.status == .badGateway, "\(reply.text)")
            #expect(reply.error?.errorCode == .httpError)
            #expect(try await gatehouse.env.store.identity(appId: "test-app", providerType: "oauth2-apple", externalId: "s") == nil)
        }
    }

    @Test func redirectsAreNotFollowed() async throws {
        try await withIdentityProvider { idp in
            let clock = ManualClock(Date())
            var config = Self.configuration(idp)
            config.apps[0].apple = AppleSettings(clientIds: ["com.example.app"], issuer: idp.baseURL, jwksURL: idp.baseURL + "/moved-jwks")
            try await withGatehouse(config, clock: clock) { _, client in
                let token = try idp.token(idp.idTokenClaims(sub: "a", aud: "com.example.app", now: clock.now))
                let reply = try await client.call(Self.path("oauth2-apple"), json: AppleLoginRequest(idToken: token))
                #expect(reply.status == .badGateway, "\(reply.text)")
                #expect(idp.jwksRequests == 0)
            }
        }
    }

    @Test func providersThatAreOffAreNotFound() async throws {
        try await withGatehouse { _, client in
            for provider in ["custom-token", "oauth2-google", "oauth2-apple", "oauth2-facebook"] {
                let reply = try await client.call(Self.path(provider), body: #"{"token":"x"}"#)
                #expect(reply.status == .notFound)
                #expect(reply.error?.errorCode == .authProviderNotFound)
            }
        }
    }

    @Test func racingFirstLoginsMakeOneUser() async throws {
        try await withProviders { _, clock, client in
            let token = try Self.hs256(Self.backendClaims(sub: "racer", now: clock.now))
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<8 {
                    group.addTask { try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: token)).decode(LoginResponse.self).userId }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(ids.count == 1)
        }
    }

    // MARK: Linking

    static func link(_ client: any TestClientProtocol, _ provider: String, body: some Encodable, bearer: String) async throws -> Reply {
        try await client.call(Self.path(provider) + "?link=true", json: body, bearer: bearer)
    }

    @Test func anAnonymousUserIsUpgradedByLinkingAndKeepsItsId() async throws {
        try await withProviders { _, clock, client in
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: "{}").decode(LoginResponse.self)
            clock.advance(by: 1)
            let token = try Self.hs256(Self.backendClaims(sub: "upgraded", now: clock.now))
            let linked = try await Self.link(client, "custom-token", body: CustomTokenLoginRequest(token: token), bearer: anonymous.accessToken)
            #expect(linked.status == .ok, "\(linked.text)")
            let access = try linked.decode(SessionResponse.self).accessToken
            let profile = try await client.call(Path.profile, .get, bearer: access).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["anon-user", "custom-token"])
            // The linked identity now logs in as the (formerly anonymous) user.
            let login = try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: token)).decode(LoginResponse.self)
            #expect(login.userId == anonymous.userId)
            // Linking it again is harmless; anonymous credentials cannot be linked.
            #expect(try await Self.link(client, "custom-token", body: CustomTokenLoginRequest(token: token), bearer: login.accessToken).status == .ok)
            let anon = try await Self.link(client, "anon-user", body: AnonymousLoginRequest(), bearer: login.accessToken)
            #expect(anon.status == .badRequest)
            #expect(anon.error?.error == "Cannot add anonymous credentials to an existing user.")
        }
    }

    @Test func anIdentityOfAnotherUserIsRefused() async throws {
        try await withProviders { _, clock, client in
            let owner = try Self.hs256(Self.backendClaims(sub: "owner", now: clock.now))
            #expect(try await client.call(Self.path("custom-token"), json: CustomTokenLoginRequest(token: owner)).status == .ok)
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: "{}").decode(LoginResponse.self)
            let refused = try await Self.link(client, "custom-token", body: CustomTokenLoginRequest(token: owner), bearer: anonymous.accessToken)
            #expect(refused.status == .conflict)
            #expect(refused.error?.errorCode == .accountNameInUse)
            // The refresh token is not an access token.
            let wrongKind = try await Self.link(client, "custom-token", body: CustomTokenLoginRequest(token: owner), bearer: anonymous.refreshToken)
            #expect(wrongKind.status == .unauthorized)
            #expect(wrongKind.error?.errorCode == .invalidSession)
        }
    }

    @Test func aRegisteredEmailThatNeverLoggedInMovesToTheLinkingUser() async throws {
        try await withProviders { _, clock, client in
            // test-app confirms by email: register and confirm, but do not log in.
            #expect(try await client.register("link@example.com", "correct horse").status == .created)
            let link = try await client.latestLink("link@example.com")
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: link.token, tokenId: link.tokenId)).status == .ok)
            let anonymous = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: "{}").decode(LoginResponse.self)
            clock.advance(by: 1)
            let linked = try await Self.link(
                client, "local-userpass", body: EmailPasswordLoginRequest(username: "link@example.com", password: "correct horse"), bearer: anonymous.accessToken
            )
            #expect(linked.status == .ok, "\(linked.text)")
            let profile = try await client.call(Path.profile, .get, bearer: try linked.decode(SessionResponse.self).accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["anon-user", "local-userpass"])
            #expect(profile.data["email"] == "link@example.com")
            let login = try await client.login("link@example.com", "correct horse").decode(LoginResponse.self)
            #expect(login.userId == anonymous.userId)

            // An email account that has logged in belongs to its user: linking it elsewhere is refused.
            let second = try await client.call(Path.app() + "/auth/providers/anon-user/login", body: "{}").decode(LoginResponse.self)
            let refused = try await Self.link(
                client, "local-userpass", body: EmailPasswordLoginRequest(username: "link@example.com", password: "correct horse"), bearer: second.accessToken
            )
            #expect(refused.status == .conflict)
            // A wrong password is a wrong password, linking or not.
            let wrong = try await Self.link(
                client, "local-userpass", body: EmailPasswordLoginRequest(username: "link@example.com", password: "wrong horse"), bearer: second.accessToken
            )
            #expect(wrong.status == .unauthorized)
        }
    }
}
