import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The native auth client id of the test apps.
let nativeClient = "ios-app"

/// ``testConfiguration(database:mailbox:reveal:hash:localUserpass:)`` with native auth on for `test-app`
/// (client `ios-app`, both sign-up methods, an optional `country` attribute, the default refresh-token reuse window)
/// and `auto-app` (which reveals user existence).
func nativeConfiguration(
    reveal: Bool = false,
    methods: Set<NativeAuthSettings.SignUpMethod> = [.emailOTP, .emailPassword],
    attributes: [NativeAuthSettings.Attribute] = [.init(name: "country", regex: "^[A-Z]{2}$")],
    code: NativeAuthSettings.CodeSettings = .init(),
    reuseWindow: Int = NativeAuthSettings(clientIds: []).refreshTokenReuseWindow
) -> GatehouseConfiguration {
    var config = testConfiguration(reveal: reveal)
    let settings = NativeAuthSettings(
        clientIds: [nativeClient], signUpMethods: methods, attributes: attributes, code: code, refreshTokenReuseWindow: reuseWindow
    )
    config.apps[0].nativeAuth = settings
    config.apps[1].nativeAuth = settings
    return config
}

/// The challenge types an MSAL client sends when it takes both codes and passwords.
let allChallengeTypes = "oob password redirect"

extension TestClientProtocol {
    /// One native auth call: a form-encoded POST with `client_id` filled in unless given.
    func native(
        _ endpoint: NativeAuthEndpoint,
        app: String = "test-app",
        headers extra: HTTPFields = [:],
        _ fields: [String: String]
    ) async throws -> Reply {
        var fields = fields
        if fields["client_id"] == nil { fields["client_id"] = nativeClient }
        let body = FormURLEncoding.encode(fields.sorted { $0.key < $1.key })
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        headers.append(contentsOf: extra)
        return try await execute(uri: endpoint.path(appId: app), method: .post, headers: headers, body: ByteBuffer(bytes: body)) { response in
            Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
        }
    }

    /// The newest one-time code emailed to `email`.
    func latestCode(_ email: String) async throws -> String {
        let mail = try #require(try await mailbox(email).first)
        #expect(mail.subject.contains("code"))
        return String(try #require(mail.text.firstMatch(of: /(?m)^\s+(\d{4,10})\s*$/)?.output.1))
    }

    /// A step that must succeed: its continuation token.
    func nativeStep(
        _ endpoint: NativeAuthEndpoint,
        app: String = "test-app",
        _ fields: [String: String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> NativeAuthStepResponse {
        let reply = try await native(endpoint, app: app, fields)
        #expect(reply.status == .ok, "\(endpoint.rawValue): \(reply.text)", sourceLocation: sourceLocation)
        return try reply.decode(NativeAuthStepResponse.self)
    }

    /// A sign-up of `email` started (with `password` and `attributes` when given) and its code sent: the continuation
    /// token that takes the code.
    func nativeSignUpCodeSent(_ email: String, password: String? = nil, attributes: String? = nil, app: String = "test-app") async throws -> String {
        var start = ["username": email, "challenge_type": allChallengeTypes]
        start["password"] = password
        start["attributes"] = attributes
        let started = try await nativeStep(.signUpStart, app: app, start)
        let challenged = try await nativeStep(
            .signUpChallenge, app: app, ["continuation_token": try #require(started.continuationToken), "challenge_type": allChallengeTypes]
        )
        return try #require(challenged.continuationToken)
    }

    /// A full sign-up by code (and `password` when given) of `email`: the token for sign-in after sign-up.
    func nativeSignUp(_ email: String, password: String? = nil, attributes: String? = nil, app: String = "test-app") async throws -> String {
        let token = try await nativeSignUpCodeSent(email, password: password, attributes: attributes, app: app)
        let done = try await nativeStep(.signUpContinue, app: app, ["continuation_token": token, "grant_type": "oob", "oob": try await latestCode(email)])
        return try #require(done.continuationToken)
    }

    /// `/token` with `grant_type=continuation_token`: the tokens.
    func nativeTokens(_ continuationToken: String, username: String, app: String = "test-app") async throws -> NativeAuthTokenResponse {
        let reply = try await native(
            .token, app: app,
            [
                "continuation_token": continuationToken, "grant_type": "continuation_token", "username": username,
                "scope": "openid profile offline_access", "client_info": "true", "challenge_type": allChallengeTypes,
            ]
        )
        #expect(reply.status == .ok, "\(reply.text)")
        return try reply.decode(NativeAuthTokenResponse.self)
    }
}

extension TestClientProtocol {
    /// Signs `email` up (code, then a password) and in after sign-up: the tokens.
    func nativeSignedUp(_ email: String, password: String = "correct horse") async throws -> NativeAuthTokenResponse {
        try await nativeTokens(try await nativeSignUp(email, password: password), username: email)
    }

    /// `/token` with `grant_type=refresh_token`.
    func nativeRefresh(_ token: String, app: String = "test-app") async throws -> Reply {
        try await native(
            .token, app: app,
            ["grant_type": "refresh_token", "refresh_token": token, "scope": "openid profile offline_access", "client_info": "true"]
        )
    }
}

extension Reply {
    /// The native auth error body.
    var nativeError: NativeAuthErrorBody? { try? JSONDecoder().decode(NativeAuthErrorBody.self, from: body) }
    var step: NativeAuthStepResponse? { try? JSONDecoder().decode(NativeAuthStepResponse.self, from: body) }
}

/// Checks a native auth error answer: status 400 (unless given), `error`, first error code, suberror.
func expectNativeError(
    _ reply: Reply,
    _ error: NativeAuthErrorName,
    code: Int? = nil,
    suberror: NativeAuthSuberror? = nil,
    status: HTTPResponse.Status = .badRequest,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(reply.status == status, "\(reply.text)", sourceLocation: sourceLocation)
    #expect(reply.contentType == "application/json", sourceLocation: sourceLocation)
    guard let body = reply.nativeError else {
        Issue.record("not a native auth error body: \(reply.text)", sourceLocation: sourceLocation)
        return
    }
    #expect(body.error == error.rawValue, "\(reply.text)", sourceLocation: sourceLocation)
    if let code { #expect(body.errorCodes.first == code, "\(reply.text)", sourceLocation: sourceLocation) }
    #expect(body.suberror == suberror?.rawValue, "\(reply.text)", sourceLocation: sourceLocation)
    #expect(!body.errorDescription.isEmpty, sourceLocation: sourceLocation)
    #expect(body.correlationId != nil && body.traceId != nil && body.timestamp != nil, sourceLocation: sourceLocation)
}
