import Foundation
@testable import Gatehouse
import GatehouseWire
import Testing

/// Every credential is encoded exactly as the App Services clients encode it (spec §3.2).
@Suite struct CredentialsTests {
    @Test(arguments: [
        (Credentials.anonymous, "anon-user", #"{"provider":"anon-user"}"#),
        (.emailPassword(email: "a@b.co", password: "pw"), "local-userpass", #"{"password":"pw","provider":"local-userpass","username":"a@b.co"}"#),
        (.userAPIKey("k1"), "api-key", #"{"key":"k1","provider":"api-key"}"#),
        (.serverAPIKey("k2"), "api-key", #"{"key":"k2","provider":"api-key"}"#),
        (.jwt(token: "t"), "custom-token", #"{"provider":"custom-token","token":"t"}"#),
        (.facebook(accessToken: "fb"), "oauth2-facebook", #"{"accessToken":"fb","provider":"oauth2-facebook"}"#),
        (.google(serverAuthCode: "code"), "oauth2-google", #"{"authCode":"code","provider":"oauth2-google"}"#),
        (.googleId(token: "gid"), "oauth2-google", #"{"id_token":"gid","provider":"oauth2-google"}"#),
        (.apple(idToken: "aid"), "oauth2-apple", #"{"id_token":"aid","provider":"oauth2-apple"}"#),
    ])
    func credentialBodies(_ credentials: Credentials, provider: String, json: String) throws {
        #expect(credentials.provider == provider)
        #expect(try canonical(.object(credentials.body)) == json)
    }

    @Test func functionPayloadIsTheDocumentItselfAsExtendedJSON() throws {
        let payload: Document = ["username": "bob", "age": .int32(42), "score": 1.5, "id": .objectId(ObjectId("5f1b2c3d4e5f6a7b8c9d0e1f"))]
        let credentials = Credentials.function(payload: payload)
        #expect(credentials.provider == "custom-function")
        #expect(credentials.body["provider"] == nil)
        #expect(
            try canonical(.object(credentials.body))
                == #"{"age":{"$numberInt":"42"},"id":{"$oid":"5f1b2c3d4e5f6a7b8c9d0e1f"},"score":{"$numberDouble":"1.5"},"username":"bob"}"#
        )
    }

    /// Printed, dumped or interpolated — as a log line or a crash report would — a credential, a user API key, a
    /// native token result and a request the transport sends show no password, key or token.
    @Test func printingShowsNoSecret() throws {
        let secret = "S3CRET-VALUE-41"
        let values: [Any] = [
            Credentials.emailPassword(email: "a@b.co", password: secret), Credentials.userAPIKey(secret), Credentials.serverAPIKey(secret),
            Credentials.jwt(token: secret), Credentials.facebook(accessToken: secret), Credentials.google(serverAuthCode: secret),
            Credentials.googleId(token: secret), Credentials.apple(idToken: secret), Credentials.function(payload: ["pin": .string(secret)]),
            try UserAPIKey(APIKeyResponse(id: "5f1b2c3d4e5f6a7b8c9d0e1f", name: "build", key: secret, disabled: false)),
            NativeAuthTokenResult(accessToken: secret, refreshToken: secret, scopes: ["openid"], expiresOn: nil, correlationId: UUID()),
            TransportRequest(method: "POST", url: URL(string: "https://auth.example.com/x")!, headers: ["Authorization": "Bearer \(secret)"], body: Data(secret.utf8)),
        ]
        for value in values {
            var dumped = ""
            dump(value, to: &dumped)
            for text in [String(describing: value), String(reflecting: value), "\(value)", dumped] {
                #expect(!text.contains(secret), "\(type(of: value)): \(text)")
            }
        }
        #expect(String(describing: Credentials.emailPassword(email: "a@b.co", password: secret)).contains("a@b.co"))
    }
}
