public import Crypto
public import CryptoExtras
import Foundation
public import GatehouseWire
public import Hummingbird
import GatehouseDomain
import HummingbirdTesting
public import NIOConcurrencyHelpers

/// A stand-in for Google, Apple, Facebook and an app's own backend, served over real HTTP on a loopback port and
/// speaking their protocols: OpenID discovery, a JSON Web Key Set (RSA and P-256 keys made at test time), an OAuth
/// token endpoint for auth codes, and Graph API `debug_token` and `me`.
public final class TestIdentityProvider: Sendable {
    public struct FacebookUser: Sendable {
        public var id: String
        public var appId: String
        public var name: String
        public var email: String
        public init(id: String, appId: String, name: String, email: String) {
            (self.id, self.appId, self.name, self.email) = (id, appId, name, email)
        }
    }

    struct State {
        var rsaKeys: [(kid: String, key: _RSA.Signing.PrivateKey)] = []
        var ecKey: (kid: String, key: P256.Signing.PrivateKey)
        var codes: [String: [String: JSONValue]] = [:]
        var facebookTokens: [String: FacebookUser] = [:]
        var jwksRequests = 0
    }

    let state: NIOLockedValueBox<State>
    public let baseURL: String
    /// The token endpoint's client credentials.
    public static let clientId = "server-client.apps.example"
    public static let clientSecret = "test-client-secret"

    init(port: Int) throws {
        baseURL = "http://127.0.0.1:\(port)"
        state = NIOLockedValueBox(State(rsaKeys: [("rsa-1", try Self.rsaKey())], ecKey: ("ec-1", P256.Signing.PrivateKey())))
    }

    /// One 2048-bit key per test run: generating RSA keys is slow, and tests need fresh ones only for rotation.
    private static let sharedRSA = NIOLockedValueBox<_RSA.Signing.PrivateKey?>(nil)
    public static func rsaKey(fresh: Bool = false) throws -> _RSA.Signing.PrivateKey {
        if fresh { return try _RSA.Signing.PrivateKey(keySize: .bits2048) }
        return try sharedRSA.withLockedValue { key in
            if let key { return key }
            let made = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            key = made
            return made
        }
    }

    public var jwksRequests: Int { state.withLockedValue { $0.jwksRequests } }

    /// Publishes a new RSA key (the old ones stay published) and returns its kid.
    public func rotate() throws -> String {
        let key = try Self.rsaKey(fresh: true)
        return state.withLockedValue { state in
            let kid = "rsa-\(state.rsaKeys.count + 1)"
            state.rsaKeys.append((kid, key))
            return kid
        }
    }

    /// A signed JWT. `alg` RS256 (with the newest RSA key unless `kid` names another) or ES256.
    public func token(_ claims: [String: JSONValue], alg: String = "RS256", kid: String? = nil) throws -> String {
        let header: [String: JSONValue]
        let sign: (Data) throws -> Data
        switch alg {
        case "ES256":
            let (keyId, key) = state.withLockedValue { $0.ecKey }
            header = ["alg": "ES256", "typ": "JWT", "kid": .string(kid ?? keyId)]
            sign = { Data(try key.signature(for: $0).rawRepresentation) }
        default:
            let (keyId, key) = state.withLockedValue { state in kid.flatMap { k in state.rsaKeys.first { $0.kid == k } } ?? state.rsaKeys.last! }
            header = ["alg": "RS256", "typ": "JWT", "kid": .string(keyId)]
            sign = { Data(try key.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation) }
        }
        return try Self.compact(header: header, claims: claims, sign: sign)
    }

    /// Standard claims for an ID token from this issuer.
    public func idTokenClaims(sub: String, aud: String, now: Date, lifetime: TimeInterval = 3600, extra: [String: JSONValue] = [:]) -> [String: JSONValue] {
        var claims: [String: JSONValue] = [
            "iss": .string(baseURL), "sub": .string(sub), "aud": .string(aud),
            "iat": .int(Int64(now.timeIntervalSince1970)), "exp": .int(Int64(now.addingTimeInterval(lifetime).timeIntervalSince1970)),
        ]
        claims.merge(extra) { $1 }
        return claims
    }

    /// An auth code the token endpoint exchanges for an ID token with `claims`.
    public func issueCode(_ claims: [String: JSONValue]) -> String {
        let code = "code-" + UUID().uuidString
        state.withLockedValue { $0.codes[code] = claims }
        return code
    }

    /// A Facebook user access token.
    public func facebookToken(for user: FacebookUser) -> String {
        let token = "EAA" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        state.withLockedValue { $0.facebookTokens[token] = user }
        return token
    }

    public static func compact(header: [String: JSONValue], claims: [String: JSONValue], sign: (Data) throws -> Data) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let input = base64URL(try encoder.encode(header)) + "." + base64URL(try encoder.encode(claims))
        return input + "." + base64URL(try sign(Data(input.utf8)))
    }

    var jwks: [String: JSONValue] {
        state.withLockedValue { state in
            var keys: [JSONValue] = state.rsaKeys.map { kid, key in
                let primitives = try! key.publicKey.getKeyPrimitives()
                return .object([
                    "kty": "RSA", "alg": "RS256", "use": "sig", "kid": .string(kid),
                    "n": .string(base64URL(primitives.modulus)), "e": .string(base64URL(primitives.publicExponent)),
                ])
            }
            let point = state.ecKey.key.publicKey.x963Representation
            keys.append(.object([
                "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": .string(state.ecKey.kid),
                "x": .string(base64URL(point.dropFirst().prefix(32))), "y": .string(base64URL(point.suffix(32))),
            ]))
            // Keys a real set may hold and a verifier must skip: an encryption key.
            keys.append(.object(["kty": "RSA", "use": "enc", "kid": "enc-1", "n": "AQAB", "e": "AQAB"]))
            return ["keys": .array(keys)]
        }
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get(".well-known/openid-configuration") { _, _ in
            try Self.json([
                "issuer": .string(self.baseURL), "jwks_uri": .string(self.baseURL + "/jwks"), "token_endpoint": .string(self.baseURL + "/token"),
            ])
        }
        // Points elsewhere: verifiers must not follow it.
        router.get("moved-jwks") { _, _ in
            Response(status: .temporaryRedirect, headers: [.location: self.baseURL + "/jwks"])
        }
        router.get("jwks") { _, _ in
            self.state.withLockedValue { $0.jwksRequests += 1 }
            return try Self.json(self.jwks)
        }
        router.post("token") { request, context in
            let body = try await request.body.collect(upTo: 65536)
            var form: [String: String] = [:]
            for pair in String(buffer: body).split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
                if parts.count == 2 { form[parts[0]] = parts[1] }
            }
            guard form["grant_type"] == "authorization_code", form["client_id"] == Self.clientId, form["client_secret"] == Self.clientSecret
            else { return try Self.json(["error": "invalid_client"], status: .unauthorized) }
            guard let code = form["code"], let claims = self.state.withLockedValue({ $0.codes.removeValue(forKey: code) }) else {
                return try Self.json(["error": "invalid_grant", "error_description": "Bad Request"], status: .badRequest)
            }
            return try Self.json([
                "access_token": "ya29.test", "token_type": "Bearer", "expires_in": 3599, "id_token": .string(try self.token(claims)),
            ])
        }
        router.get("debug_token") { request, _ in
            let query = request.uri.queryParameters
            guard let appToken = query.get("access_token"), let input = query.get("input_token") else {
                return try Self.json(["error": ["message": "missing parameters", "code": 100]], status: .badRequest)
            }
            let appId = String(appToken.split(separator: "|").first ?? "")
            guard appToken == "\(appId)|fb-secret" else {
                return try Self.json(["error": ["message": "Invalid OAuth access token", "code": 190]], status: .badRequest)
            }
            guard let user = self.state.withLockedValue({ $0.facebookTokens[input] }) else {
                return try Self.json(["data": ["is_valid": false, "error": ["message": "Invalid OAuth access token."]]])
            }
            return try Self.json(["data": ["app_id": .string(user.appId), "is_valid": true, "user_id": .string(user.id), "type": "USER"]])
        }
        router.get("me") { request, _ in
            guard let token = request.uri.queryParameters.get("access_token"), let user = self.state.withLockedValue({ $0.facebookTokens[token] })
            else { return try Self.json(["error": ["message": "Invalid OAuth access token", "code": 190]], status: .badRequest) }
            let (first, last) = (String(user.name.split(separator: " ").first ?? ""), String(user.name.split(separator: " ").last ?? ""))
            return try Self.json([
                "id": .string(user.id), "name": .string(user.name), "email": .string(user.email), "first_name": .string(first),
                "last_name": .string(last), "picture": ["data": ["url": .string("https://example.com/\(user.id).jpg")]],
            ])
        }
        return router
    }

    static func json(_ object: [String: JSONValue], status: HTTPResponse.Status = .ok) throws -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(object))))
    }
}

/// Runs a ``TestIdentityProvider`` on a loopback port for `body`.
public func withIdentityProvider<T: Sendable>(_ body: @Sendable (TestIdentityProvider) async throws -> T) async throws -> T {
    // The router is built once the port is known; requests are forwarded to it.
    let inner = NIOLockedValueBox<RouterResponder<BasicRequestContext>?>(nil)
    let app = Application(
        responder: ForwardingResponder(inner: inner),
        configuration: .init(address: .hostname("127.0.0.1", port: 0))
    )
    return try await app.test(.live) { client in
        guard let port = client.port else { throw TestIdentityProviderError() }
        let idp = try TestIdentityProvider(port: port)
        inner.withLockedValue { $0 = idp.router().buildResponder() }
        return try await body(idp)
    }
}

/// Hands requests to a router set after the server started (it needs the port to know its own URL).
struct ForwardingResponder: HTTPResponder {
    typealias Context = BasicRequestContext
    let inner: NIOLockedValueBox<RouterResponder<BasicRequestContext>?>

    func respond(to request: Request, context: BasicRequestContext) async throws -> Response {
        guard let responder = inner.withLockedValue({ $0 }) else { return Response(status: .serviceUnavailable) }
        return try await responder.respond(to: request, context: context)
    }
}

struct TestIdentityProviderError: Error, CustomStringConvertible {
    var description: String { "the test identity provider did not get a port" }
}

/// base64url without padding (RFC 7515 §2).
public func base64URL(_ data: some DataProtocol) -> String {
    Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}
