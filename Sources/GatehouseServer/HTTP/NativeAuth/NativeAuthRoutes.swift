import Foundation
import GatehouseDomain
import GatehouseWire
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The native auth API (spec `native-auth-api.md`) under `/native/{appId}/`: form-encoded POSTs, JSON answers,
/// HTTP 200 for success and for the `redirect` fallback, HTTP 400 ``NativeAuthErrorBody`` for protocol errors
/// (rendered by ``NativeAuthErrorResponse``).
struct NativeAuthRoutes {
    let env: AuthEnvironment

    static let pathPrefix = "/native/"

    func register(on router: Router<GatehouseRequestContext>) {
        let native = router.group("native/:appId")
        native.post(Self.path(.signUpStart), use: route { NativeAuthStepResponse(try await $0.signUpStart(client: $1, request: $2)) })
        native.post(Self.path(.signUpChallenge), use: route { NativeAuthStepResponse(try await $0.signUpChallenge(client: $1, request: $2)) })
        native.post(Self.path(.signUpContinue), use: route { NativeAuthStepResponse(try await $0.signUpContinue(client: $1, request: $2)) })
        native.post(Self.path(.signInInitiate), use: route { NativeAuthStepResponse(try await $0.signInInitiate(client: $1, request: $2)) })
        native.post(Self.path(.signInChallenge), use: route { NativeAuthStepResponse(try await $0.signInChallenge(client: $1, request: $2)) })
        native.post(Self.path(.token), use: route { NativeAuthTokenResponse(try await $0.token(client: $1, request: $2)) })
        native.post(Self.path(.resetPasswordStart), use: route { NativeAuthStepResponse(try await $0.resetPasswordStart(client: $1, request: $2)) })
        native.post(Self.path(.resetPasswordChallenge), use: route { NativeAuthStepResponse(try await $0.resetPasswordChallenge(client: $1, request: $2)) })
        native.post(Self.path(.resetPasswordContinue), use: route { NativeAuthStepResponse(try await $0.resetPasswordContinue(client: $1, request: $2)) })
        native.post(Self.path(.resetPasswordSubmit), use: route { NativeAuthSubmitResponse(try await $0.resetPasswordSubmit(client: $1, request: $2)) })
        native.post(
            Self.path(.resetPasswordPollCompletion),
            use: route { NativeAuthPollResponse(try await $0.resetPasswordPollCompletion(client: $1, request: $2)) }
        )
        native.post(Self.path(.revoke), use: route { try await $0.revoke(client: $1, request: $2); return NativeAuthRevokeResponse() })
    }

    private static func path(_ endpoint: NativeAuthEndpoint) -> RouterPath { RouterPath(endpoint.rawValue) }

    /// One endpoint: reads the form, resolves app and client, runs `action`, answers its value as JSON (200).
    private func route<Answer: Encodable & Sendable>(
        _ action: @escaping @Sendable (NativeAuthService, NativeAuthService.Client, NativeAuthRequest) async throws -> Answer
    ) -> @Sendable (Request, GatehouseRequestContext) async throws -> Response {
        { [env] request, context in
            let appId = try context.parameters.require("appId")
            let parameters = try await request.decodeNativeAuthRequest(context: context)
            let service = NativeAuthService(env: env.serving(context.origin))
            let client = try service.client(appId: appId, request: parameters)
            var response = try JSONResponse.make(try await action(service, client, parameters))
            if let correlation = request.headers[NativeAuthErrorResponse.correlationHeader] {
                response.headers[NativeAuthErrorResponse.correlationHeader] = correlation
            }
            return response
        }
    }
}

extension Request {
    /// The parameters of a native auth request, from its form fields (an empty value counts as absent; fields the
    /// protocol does not have are ignored). Any other content type, a body that is not valid percent-encoded UTF-8, or
    /// a parameter of the protocol given more than once (RFC 6749, section 3.2: one reader must not take the first
    /// `client_id` where another takes the last) is `invalid_request`; a body over the size limit is 413.
    func decodeNativeAuthRequest(context: some RequestContext) async throws -> NativeAuthRequest {
        if let type = headers[.contentType], !type.lowercased().hasPrefix("application/x-www-form-urlencoded") {
            throw NativeAuthFailure.invalidRequest("the body must be application/x-www-form-urlencoded")
        }
        let buffer = try await body.collect(upTo: context.maxUploadSize)
        guard let pairs = FormURLEncoding.pairs(Data(buffer.readableBytesView)) else {
            throw NativeAuthFailure.invalidRequest("the body is not valid form encoding")
        }
        if let field = pairs.first(where: { BodyGuard.containsNUL($0.0) || BodyGuard.containsNUL($0.1) }) {
            throw NativeAuthFailure.invalidRequest("AADSTS90100: \(field.0.prefix(64)) contains a NUL character.")
        }
        // Each parameter the protocol reads, read once: the names below are the whole list.
        func field(_ name: String) throws -> String? {
            var found: String?
            for (key, value) in pairs where key == name {
                guard found == nil else { throw NativeAuthFailure.invalidRequest("AADSTS90100: \(name) parameter is given more than once.") }
                found = value
            }
            guard let found, !found.isEmpty else { return nil }
            return found
        }
        return NativeAuthRequest(
            clientId: try field("client_id"), username: try field("username"), challengeType: try field("challenge_type"),
            continuationToken: try field("continuation_token"), grantType: try field("grant_type"), password: try field("password"),
            newPassword: try field("new_password"), oob: try field("oob"), attributes: try field("attributes"), scope: try field("scope"),
            refreshToken: try field("refresh_token"), token: try field("token")
        )
    }
}

/// Renders errors under `/native/` in the native auth envelope: ``NativeAuthFailure`` as HTTP 400; rate limits and
/// login delays as 429 `slow_down` with `Retry-After` (MSAL reports these as general errors); an unreachable
/// database as 503 (MSAL retries 5xx); unknown endpoints as 404 and oversized bodies as 413, both with the same
/// JSON body; anything unexpected as a logged 500 without detail.
enum NativeAuthErrorResponse {
    static let correlationHeader = HTTPField.Name("client-request-id")!

    static func make(for error: any Error, request: Request, logger: Logger) throws -> Response {
        let status: HTTPResponse.Status
        let failure: NativeAuthFailure
        switch error {
        case let error as NativeFlowError:
            (status, failure) = (.badRequest, NativeAuthFailure(error))
        case let error as NativeAuthFailure:
            (status, failure) = (.badRequest, error)
        case AuthError.rateLimited(let retryAfter):
            (status, failure) = (.tooManyRequests, .rateLimited(retryAfter: retryAfter))
        case AuthError.loginDelayed(let retryAfter):
            (status, failure) = (.tooManyRequests, .loginDelayed(retryAfter: retryAfter))
        case StoreError.unavailable(let reason):
            logger.error("database unavailable", metadata: ["reason": "\(reason)"])
            (status, failure) = (
                .serviceUnavailable,
                NativeAuthFailure(error: .invalidRequest, description: "the database is unavailable; try again shortly", codes: [], retryAfter: StoreError.retryAfterSeconds)
            )
        case StoreError.outcomeUnknown(let reason):
            logger.error("database lost during a write; its outcome is unknown", metadata: ["reason": "\(reason)"])
            (status, failure) = (
                .serviceUnavailable,
                NativeAuthFailure(
                    error: .invalidRequest,
                    description: "the database stopped answering during this request: it may or may not have taken effect; check before retrying",
                    codes: [], retryAfter: StoreError.retryAfterSeconds
                )
            )
        case let error as HTTPError where error.status == .notFound:
            (status, failure) = (.notFound, .invalidRequest("no endpoint \(request.method) \(request.uri.path)", code: 0))
        case let error as HTTPError where error.status == .contentTooLarge:
            (status, failure) = (.contentTooLarge, tooLarge)
        case is NIOTooManyBytesError:
            (status, failure) = (.contentTooLarge, tooLarge)
        case _ where Connections.clientFault(error) != nil:
            let (faultStatus, message) = Connections.clientFault(error)!
            logger.debug("request failed on the client's side", metadata: ["error": "\(String(reflecting: error))"])
            (status, failure) = (faultStatus, .invalidRequest(message, code: 0))
        case let error as HTTPError:
            (status, failure) = (error.status, .invalidRequest(error.body ?? error.status.reasonPhrase, code: 0))
        default:
            logger.error("unexpected error", metadata: ["error": "\(String(reflecting: error))"])
            (status, failure) = (.internalServerError, NativeAuthFailure(error: .invalidRequest, description: "internal server error", codes: []))
        }
        let correlation = request.headers[correlationHeader] ?? UUID().uuidString.lowercased()
        let body = NativeAuthErrorBody(
            error: status == .internalServerError ? "server_error" : status == .serviceUnavailable ? "temporarily_unavailable" : failure.error.rawValue,
            errorDescription: failure.description,
            errorCodes: failure.codes,
            timestamp: ISO8601DateFormatter().string(from: Date()),
            traceId: UUID().uuidString.lowercased(),
            correlationId: correlation,
            suberror: failure.suberror?.rawValue,
            continuationToken: failure.continuationToken,
            requiredAttributes: failure.requiredAttributes,
            invalidAttributes: failure.invalidAttributes?.map(NativeAuthAttributeName.init(name:)),
            retryAfter: failure.retryAfter
        )
        var response = try JSONResponse.make(status, body)
        response.headers[correlationHeader] = correlation
        if let retryAfter = failure.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    private static var tooLarge: NativeAuthFailure {
        .invalidRequest("request body exceeds \(GatehouseRequestContext.maxBodySize) bytes", code: 0)
    }
}

// MARK: - Encoding the domain's answers

extension NativeAuthStepResponse {
    /// The body of a step's answer (spec §2): the continuation token, and what the client does next.
    init(_ step: NativeStep) {
        switch step {
        case .next(let token, let expiresIn):
            self.init(continuationToken: token, expiresIn: expiresIn)
        case .passwordRequired(let token):
            self.init(continuationToken: token, challengeType: .password)
        case .codeSent(let token, let maskedAddress, let codeLength, let resendInterval):
            self.init(
                continuationToken: token, challengeType: .oob, bindingMethod: "prompt", challengeChannel: "email",
                challengeTargetLabel: maskedAddress, codeLength: codeLength, interval: resendInterval
            )
        case .redirect(let reason):
            self = .redirect(reason: reason)
        }
    }
}

extension NativeAuthSubmitResponse {
    init(_ submitted: NativeResetSubmitted) {
        self.init(continuationToken: submitted.continuationToken, pollInterval: submitted.pollInterval)
    }
}

extension NativeAuthPollResponse {
    /// A reset's password is set at `submit`, so the first poll already succeeds.
    init(_ completed: NativeResetCompleted) {
        self.init(status: .succeeded, continuationToken: completed.continuationToken, expiresIn: completed.expiresIn)
    }
}

extension NativeAuthTokenResponse {
    /// The `/token` answer, with MSAL's `client_info` (base64url JSON of the user and tenant ids).
    init(_ tokens: NativeTokens) {
        let info = (try? JSONEncoder().encode(NativeAuthClientInfo(uid: tokens.userId, utid: tokens.tenantId))) ?? Data()
        self.init(
            scope: tokens.scopes.joined(separator: " "), expiresIn: tokens.expiresIn, accessToken: tokens.accessToken,
            refreshToken: tokens.refreshToken, idToken: tokens.idToken, clientInfo: Base64URL.encode(info)
        )
    }
}
