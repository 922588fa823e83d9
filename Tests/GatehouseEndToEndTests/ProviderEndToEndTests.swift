import Crypto
import Foundation
import Gatehouse
import GatehouseDomain
import GatehouseServer
import GatehouseTestSupport
import Testing

/// The SDK's `Credentials.jwt` and `linkUser` against a live server whose `test-app` trusts a custom JWT secret.
// Outbound calls have deadlines; the limit turns anything that still hangs into a named failure.
@Suite(.timeLimit(.minutes(3))) struct ProviderEndToEndTests {
    /// An HS256 token as the app's backend would mint it.
    static func jwt(sub: String, name: String, now: Date, secret: String = liveJWTSecret) throws -> String {
        func b64(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let header = b64(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let claims: [String: Any] = ["sub": sub, "aud": "test-app", "name": name, "iat": Int(now.timeIntervalSince1970), "exp": Int(now.timeIntervalSince1970) + 300]
        let payload = b64(try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
        let input = header + "." + payload
        return input + "." + b64(Data(HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: Data(secret.utf8)))))
    }

    @Test func anAnonymousUserLinksACustomJWTAndLogsInWithItLater() async throws {
        try await withLiveServer { server in
            let app = server.app()
            let anonymous = try await app.login(credentials: .anonymous)
            server.clock.advance(by: 1)
            let token = try Self.jwt(sub: "backend-7", name: "Seven", now: server.clock.now)
            let linked = try await anonymous.linkUser(credentials: .jwt(token: token))
            #expect(linked.id == anonymous.id)
            #expect(linked.identities.map(\.providerType) == ["anon-user", "custom-token"])
            #expect(linked.identities.last?.identifier == "backend-7")
            #expect(linked.profile.name == "Seven")

            try await linked.logOut()
            // No longer anonymous: logging out keeps it on the device, and the JWT logs in as the same user.
            #expect(linked.state == .loggedOut)
            let again = try await app.login(credentials: .jwt(token: token))
            #expect(again.id == anonymous.id)

            // A token signed with another secret is refused with the server's reason.
            let forged = try Self.jwt(sub: "backend-7", name: "Mallory", now: server.clock.now, secret: "not the secret the server trusts!!")
            let error = await #expect(throws: AppError.self) { try await app.login(credentials: .jwt(token: forged)) }
            #expect(error?.code == .invalidPassword)
            #expect(error?.message.contains("signature is invalid") == true, "\(String(describing: error))")
        }
    }

    /// Every `Credentials` case of an identity provider, through the SDK, against the test identity provider.
    @Test func googleAppleAndFacebookThroughTheSDK() async throws {
        try await withIdentityProvider { idp in
            let clock = ManualClock(Date())
            try await withLiveServer(clock: clock, identityProvider: idp) { server in
                let app = server.app()
                let now = clock.now
                let google = try await app.login(credentials: .googleId(token: try idp.token(idp.idTokenClaims(
                    sub: "g-1", aud: "ios-client.apps.example", now: now, extra: ["email": "g@example.com", "email_verified": true, "name": "Gee"]
                ))))
                #expect(google.identities.map(\.providerType) == ["oauth2-google"])
                #expect(google.profile.email == "g@example.com")
                // A server auth code for the same Google user is the same Gatehouse user.
                let code = idp.issueCode(idp.idTokenClaims(sub: "g-1", aud: TestIdentityProvider.clientId, now: now))
                #expect(try await app.login(credentials: .google(serverAuthCode: code)).id == google.id)

                let apple = try await app.login(credentials: .apple(idToken: try idp.token(idp.idTokenClaims(sub: "a-1", aud: "com.example.app", now: now), alg: "ES256")))
                #expect(apple.identities.map(\.providerType) == ["oauth2-apple"])
                #expect(apple.id != google.id)

                let token = idp.facebookToken(for: .init(id: "f-1", appId: "fb-app", name: "Eff Bee", email: "f@example.com"))
                let facebook = try await app.login(credentials: .facebook(accessToken: token))
                #expect(facebook.profile.name == "Eff Bee")

                // Linking: an Apple identity that is another user's is refused; a new one is added (in link order).
                clock.advance(by: 1)
                let taken = await #expect(throws: AppError.self) {
                    _ = try await facebook.linkUser(credentials: .apple(idToken: try idp.token(idp.idTokenClaims(sub: "a-1", aud: "com.example.app", now: now))))
                }
                #expect(taken?.code == .accountNameInUse)
                let linked = try await facebook.linkUser(credentials: .apple(idToken: try idp.token(idp.idTokenClaims(sub: "a-2", aud: "com.example.app", now: now))))
                #expect(linked.identities.map(\.providerType) == ["oauth2-facebook", "oauth2-apple"])
            }
        }
    }
}
