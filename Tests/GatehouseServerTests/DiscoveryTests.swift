import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// OpenID discovery: a resource server that knows only the issuer verifies Gatehouse's tokens with a standard library
/// (PyJWT's JWKS client, over real HTTP), refuses a refresh token, and stops accepting a retired key's tokens.
@Suite struct DiscoveryTests {
    /// Verifies each token as a resource server would: discovery document → `jwks_uri` → the key of the token's `kid`,
    /// checking signature, audience, issuer and expiry. One line of JSON out: name → `ok <sub>` or the error's class,
    /// and for a verified token, name + ` provenance` → `<amr joined by spaces>|<auth_time>|<sid>|<iat>`, as the
    /// verified claims say.
    static let verifier = #"""
        import json, sys, urllib.request
        import jwt
        request = json.load(sys.stdin)
        with urllib.request.urlopen(request["issuer"] + "/.well-known/openid-configuration") as answer:
            discovery = json.load(answer)
        keys = jwt.PyJWKClient(discovery["jwks_uri"], cache_keys=False)
        results = {}
        for case in request["tokens"]:
            try:
                key = keys.get_signing_key_from_jwt(case["token"])
                claims = jwt.decode(case["token"], key.key, algorithms=discovery["id_token_signing_alg_values_supported"],
                                    audience=case["aud"], issuer=discovery["issuer"], leeway=300)
                results[case["name"]] = "ok " + claims["sub"]
                results[case["name"] + " provenance"] = "|".join(
                    [" ".join(claims.get("amr", [])), str(claims.get("auth_time")), str(claims.get("sid")), str(claims.get("iat"))])
            except Exception as error:
                results[case["name"]] = type(error).__name__
        print(json.dumps(results))
        """#

    static func verify(issuer: String, _ tokens: [(name: String, token: String, aud: String)]) async throws -> [String: String] {
        guard let python = ProcessInfo.processInfo.environment["GATEHOUSE_PYTHON"] else {
            throw SMTPTestSetupError(description: "GATEHOUSE_PYTHON is not set: run the tests with scripts/test.sh")
        }
        let request: [String: Any] = ["issuer": issuer, "tokens": tokens.map { ["name": $0.name, "token": $0.token, "aud": $0.aud] }]
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("request.json")
        try JSONSerialization.data(withJSONObject: request).write(to: input)
        let run = try await FaultSuiteTests.spawn(["/bin/sh", "-c", "\"$0\" -c \"$1\" < \"$2\"", python, verifier, input.path], within: .seconds(60))
        #expect(run.status == 0, "\(run.stderr)")
        return try JSONDecoder().decode([String: String].self, from: Data(run.stdout.utf8))
    }

    @Test func theDocumentNamesTheTokensIssuerItsKeysAndEachAppsEndpoints() async throws {
        var configuration = nativeConfiguration()
        configuration.server.publicURL = "https://auth.example.com"
        configuration.apps[1].nativeAuth = nil
        try await withGatehouse(configuration) { _, client in
            let root = try await client.call("/.well-known/openid-configuration", .get)
            #expect(root.status == .ok && root.headers[.cacheControl] == "public, max-age=300")
            let document = try #require(try JSONSerialization.jsonObject(with: root.body) as? [String: Any])
            #expect(document["issuer"] as? String == "https://auth.example.com")
            #expect(document["jwks_uri"] as? String == "https://auth.example.com/.well-known/jwks.json")
            #expect(document["token_endpoint"] == nil, "each app has its own: the app's copy names it")
            #expect(document["id_token_signing_alg_values_supported"] as? [String] == ["ES256"])
            #expect((document["scopes_supported"] as? [String])?.contains("offline_access") == true)
            #expect((document["grant_types_supported"] as? [String])?.contains("refresh_token") == true)

            let app = try await client.call("/native/test-app/.well-known/openid-configuration", .get)
            let appDocument = try #require(try JSONSerialization.jsonObject(with: app.body) as? [String: Any])
            #expect(appDocument["issuer"] as? String == "https://auth.example.com")
            #expect(appDocument["token_endpoint"] as? String == "https://auth.example.com/native/test-app/oauth2/v2.0/token")
            #expect(appDocument["revocation_endpoint"] as? String == "https://auth.example.com/native/test-app/oauth2/v2.0/revoke")

            // Tokens carry exactly that issuer.
            let tokens = try await client.nativeSignedUp("disco@example.com")
            #expect(try jwtPayload(tokens.accessToken)["iss"] as? String == "https://auth.example.com")
            #expect(try jwtPayload(try #require(tokens.idToken))["iss"] as? String == "https://auth.example.com")

            for absent in ["/native/no-such-app/.well-known/openid-configuration", "/native/auto-app/.well-known/openid-configuration"] {
                #expect(try await client.call(absent, .get).status == .notFound, "\(absent)")
            }
        }
    }

    @Test func aResourceServerVerifiesTokensFromTheIssuerAloneRefusesRefreshTokensAndARetiredKeys() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (url, drop) = try await TestDatabase.fresh(.sqliteFile(folder.appendingPathComponent("discovery.sqlite").path))
        var configuration = nativeConfiguration()
        configuration.database.url = url
        configuration.server.publicURL = nil  // the issuer is the live server's own address
        let clock = ManualClock(Date())
        let shared = configuration
        let gatehouse = try await AuthServer.open(configuration: shared, clock: clock.clock, logger: quietLogger)
        do {
            try await gatehouse.makeApplication().test(.live) { client in
                let issuer = gatehouse.env.publicURL
                #expect(issuer.hasPrefix("http://127.0.0.1:"))
                let native = try await client.nativeSignedUp("rs@example.com")
                let idToken = try #require(native.idToken)
                let clientAPI = try await client.login("rs@example.com").decode(LoginResponse.self)
                let forged = native.accessToken.dropLast(4) + "AAAA"
                let results = try await Self.verify(
                    issuer: issuer,
                    [
                        ("native access", native.accessToken, "test-app"), ("native id", idToken, nativeClient),
                        ("client api access", clientAPI.accessToken, "test-app"), ("wrong audience", native.accessToken, "other-app"),
                        ("forged", String(forged), "test-app"),
                        // A refresh token has the access token's `aud` and `iss` and a 60 days' life: were it signed
                        // with the JWKS's key, a resource server checking those would take it for an access token.
                        ("client api refresh", clientAPI.refreshToken, "test-app"),
                    ]
                )
                let sub = try #require(try jwtPayload(native.accessToken)["sub"] as? String)
                #expect(results["native access"] == "ok \(sub)" && results["native id"] == "ok \(sub)" && results["client api access"] == "ok \(sub)", "\(results)")
                #expect(results["wrong audience"] == "InvalidAudienceError" && results["forged"] == "InvalidSignatureError", "\(results)")
                #expect(results["client api refresh"] == "InvalidAlgorithmError", "\(results)")
                // How each session was proven, as a backend reads it: amr, auth_time (not after the token), and the
                // session id (a native one is its refresh token's id; a Client API one is its refresh token's sid).
                let nativeRefresh = try #require(native.refreshToken)
                let nativeSid = try #require(OpaqueToken(nativeRefresh)?.id)
                let clientAPISid = try #require(try jwtPayload(clientAPI.refreshToken)["sid"] as? String)
                for (name, amr, sid) in [("native access", "otp", nativeSid), ("native id", "otp", nativeSid), ("client api access", "pwd", clientAPISid)] {
                    let parts = try #require(results[name + " provenance"]?.split(separator: "|", omittingEmptySubsequences: false).map(String.init))
                    #expect(parts.count == 4 && parts[0] == amr && parts[2] == sid, "\(name): \(parts)")
                    let (authTime, iat) = (try #require(Int(parts[1])), try #require(Int(parts[3])))
                    #expect(authTime <= iat, "\(name): \(parts)")
                }

                // The key is rotated and the old one retired: within a minute the JWKS drops it, and its tokens fail.
                let old = try KeyRotationTests.kid(native.accessToken)
                _ = try await AuthServer.rotateSigningKey(configuration: shared, clock: clock.clock, logger: quietLogger)
                try await AuthServer.retireSigningKey(configuration: shared, kid: old, clock: clock.clock, logger: quietLogger)
                clock.advance(by: 61)
                let fresh = try await client.login("rs@example.com").decode(LoginResponse.self)
                #expect(try KeyRotationTests.kid(fresh.accessToken) != old)
                let after = try await Self.verify(issuer: issuer, [("retired", native.accessToken, "test-app"), ("fresh", fresh.accessToken, "test-app")])
                #expect(after["retired"] == "PyJWKClientError" && after["fresh"] == "ok \(sub)", "\(after)")
            }
            try await gatehouse.close()
            await drop()
        } catch {
            try? await gatehouse.close()
            await drop()
            throw error
        }
    }
}
