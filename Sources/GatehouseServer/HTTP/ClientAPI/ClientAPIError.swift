import Foundation
import GatehouseDomain
import GatehouseWire
import Hummingbird
import Logging
import NIOCore

/// A Client API v2.0 error: status, `error_code` and message, rendered as `{"error","error_code","link"}` by
/// ``ClientAPIErrorMiddleware``.
struct ClientAPIError: Error, Hashable, Sendable {
    var status: HTTPResponse.Status
    var code: ClientAPIErrorCode
    var message: String
    /// Seconds, sent as `Retry-After` (with 429).
    var retryAfter: Int? = nil

    /// The envelope, with `link` pointing at the server's API description.
    func response(publicURL: String) throws -> Response {
        var response = try JSONResponse.make(status, ClientAPIErrorBody(error: message, errorCode: code, link: publicURL + "/openapi.yaml"))
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    static func badRequest(_ message: String) -> Self { .init(status: .badRequest, code: .badRequest, message: message) }
    static func missingParameter(_ name: String) -> Self {
        .init(status: .badRequest, code: .missingParameter, message: "missing parameter '\(name)'")
    }
    static func invalidParameter(_ message: String) -> Self { .init(status: .badRequest, code: .invalidParameter, message: message) }
    static func invalidSession(_ message: String) -> Self { .init(status: .unauthorized, code: .invalidSession, message: message) }
}

extension AuthError {
    /// The Client API's answer to a domain refusal (spec §4.2, §4.3).
    var clientAPIError: ClientAPIError {
        switch self {
        case .appNotFound(let id):
            ClientAPIError(status: .notFound, code: .appNotFound, message: "cannot find app using Client App ID '\(id)'")
        case .providerNotEnabled(let provider):
            ClientAPIError(status: .notFound, code: .authProviderNotFound, message: "authentication via '\(provider)' is unsupported")
        case .invalidCredentials:
            ClientAPIError(status: .unauthorized, code: .invalidPassword, message: "unauthorized")
        case .confirmationRequired:
            ClientAPIError(status: .unauthorized, code: .invalidPassword, message: "confirmation required")
        case .userDisabled:
            ClientAPIError(status: .unauthorized, code: .userDisabled, message: "user disabled")
        case .accountNameInUse:
            ClientAPIError(status: .conflict, code: .accountNameInUse, message: "name already in use")
        case .userNotFound:
            ClientAPIError(status: .notFound, code: .userNotFound, message: "user not found")
        case .userAlreadyConfirmed:
            ClientAPIError(status: .conflict, code: .userAlreadyConfirmed, message: "already confirmed")
        case .invalidTokenData:
            .badRequest("invalid token data")
        case .invalidSession(let message):
            .invalidSession(message)
        case .invalidEmail:
            .badRequest("email invalid")
        case .passwordPolicy(let violation, let message):
            // Realm SDKs see `BadRequest`; the message starts with the rule's name, as native auth's suberror.
            .badRequest("\(violation.rawValue): \(message)")
        case .tooManyEmails(let retryAfter):
            ClientAPIError(
                status: .tooManyRequests, code: .tooManyRequests,
                message: "too many emails to this address; try again in \(retryAfter) seconds", retryAfter: retryAfter
            )
        case .rateLimited(let retryAfter):
            ClientAPIError(
                status: .tooManyRequests, code: .tooManyRequests, message: "too many requests; try again in \(retryAfter) seconds",
                retryAfter: retryAfter
            )
        case .loginDelayed(let retryAfter):
            ClientAPIError(
                status: .tooManyRequests, code: .tooManyRequests,
                message: "too many failed logins for this account; try again in \(retryAfter) seconds", retryAfter: retryAfter
            )
        case .invalidAPIKey:
            ClientAPIError(status: .unauthorized, code: .invalidPassword, message: "invalid API key")
        case .apiKeyNotFound:
            // Never 401 on an api_keys route: Realm clients log the user out on one (spec §4.2).
            ClientAPIError(status: .notFound, code: .apiKeyNotFound, message: "API key not found")
        case .apiKeyAlreadyExists:
            ClientAPIError(status: .conflict, code: .apiKeyAlreadyExists, message: "API key already exists")
        case .invalidAPIKeyName(let message):
            .invalidParameter(message)
        case .storeUnavailable:
            ClientAPIError(
                status: .serviceUnavailable, code: .maintenanceInProgress, message: "the database is unavailable; try again shortly",
                retryAfter: StoreError.retryAfterSeconds
            )
        case .invalidCredential(let message):
            ClientAPIError(status: .unauthorized, code: .invalidPassword, message: message)
        case .providerUnavailable(let message):
            ClientAPIError(status: .badGateway, code: .httpError, message: message)
        case .identityInUse:
            ClientAPIError(status: .conflict, code: .accountNameInUse, message: "a user already exists with the specified provider")
        case .apiKeyRefused(let message):
            .badRequest(message)
        case .forbidden(let message):
            // Never 401: Realm clients take a 401 for an expired token, refresh and retry.
            ClientAPIError(status: .forbidden, code: .forbidden, message: message)
        case .cannotLinkAnonymous:
            .badRequest("Cannot add anonymous credentials to an existing user.")
        case .cannotLinkAPIKey:
            .badRequest("API key credentials cannot be linked to a user")
        case .confirmationFailed(let email):
            .badRequest("failed to confirm user \"\(email)\"")
        case .resetFailed(let email):
            ClientAPIError(status: .badRequest, code: .functionFailed, message: "failed to reset password for user \"\(email)\"")
        case .functionNotEnabled(let message):
            ClientAPIError(status: .badRequest, code: .functionFailed, message: message)
        case .reauthenticationRequired:
            // Never 401, which clients take for an expired token.
            ClientAPIError(
                status: .forbidden, code: .reauthenticationRequired,
                message: "this change needs a recent proof: reauthenticate (POST auth/reauthenticate) and try again; a password or email change also takes currentPassword"
            )
        case .wrongCurrentPassword:
            ClientAPIError(status: .forbidden, code: .invalidPassword, message: "the current password is wrong")
        case .sessionNotFound:
            ClientAPIError(status: .notFound, code: .sessionNotFound, message: "session not found")
        case .identityNotFound:
            ClientAPIError(status: .notFound, code: .identityNotFound, message: "identity not found")
        case .accountChangeRefused(let message):
            .badRequest(message)
        case .invalidCode:
            .badRequest("invalid or expired code")
        }
    }
}

/// Turns every error into the Client API envelope: domain refusals, unknown routes, oversized bodies, and
/// (logged, never expected) anything else as a 500 without internal detail. Under `/native/` it uses the native
/// auth envelope instead (``NativeAuthErrorResponse``).
struct ClientAPIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let publicURL: PublicURL

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            // The native auth API has an envelope of its own.
            if request.uri.path.hasPrefix(NativeAuthRoutes.pathPrefix) {
                return try NativeAuthErrorResponse.make(for: error, request: request, logger: context.logger)
            }
            return try Self.clientAPIError(for: error, request: request, logger: context.logger).response(publicURL: publicURL.value)
        }
    }

    static func clientAPIError(for error: any Error, request: Request, logger: Logger) -> ClientAPIError {
        switch error {
        case let error as ClientAPIError:
            return error
        case let error as AuthError:
            return error.clientAPIError
        case StoreError.unavailable(let reason):
            logger.error("database unavailable", metadata: ["reason": "\(reason)"])
            return AuthError.storeUnavailable.clientAPIError
        case StoreError.outcomeUnknown(let reason):
            logger.error("database lost during a write; its outcome is unknown", metadata: ["reason": "\(reason)"])
            return ClientAPIError(
                status: .serviceUnavailable, code: .maintenanceInProgress,
                message: "the database stopped answering during this request: it may or may not have taken effect; check before retrying",
                retryAfter: StoreError.retryAfterSeconds
            )
        case let error as HTTPError:
            switch error.status {
            case .notFound:
                return ClientAPIError(status: .notFound, code: .notFound, message: "no route for \(request.method) \(request.uri.path)")
            case .contentTooLarge:
                return tooLarge
            case .forbidden:
                return ClientAPIError(status: .forbidden, code: .forbidden, message: error.body ?? "forbidden")
            default:
                return ClientAPIError(status: error.status, code: .badRequest, message: error.body ?? error.status.reasonPhrase)
            }
        case is NIOTooManyBytesError:
            return tooLarge
        case _ where Connections.clientFault(error) != nil:
            let (status, message) = Connections.clientFault(error)!
            logger.debug("request failed on the client's side", metadata: ["error": "\(String(reflecting: error))"])
            return ClientAPIError(status: status, code: .badRequest, message: message)
        default:
            logger.error("unexpected error", metadata: ["error": "\(String(reflecting: error))"])
            return ClientAPIError(status: .internalServerError, code: .internalServerError, message: "internal server error")
        }
    }

    static var tooLarge: ClientAPIError {
        ClientAPIError(
            status: .contentTooLarge, code: .readSizeLimitExceeded,
            message: "request body exceeds \(GatehouseRequestContext.maxBodySize) bytes"
        )
    }
}

extension Request {
    /// Decodes a JSON body, answering malformed JSON, missing fields and wrong types with the right 400.
    func decodeClientAPIBody<T: Decodable>(_ type: T.Type, context: some RequestContext) async throws -> T {
        let buffer = try await body.collect(upTo: context.maxUploadSize)
        guard buffer.readableBytes > 0 else { throw ClientAPIError.badRequest("request body is empty; expected a JSON object") }
        if let problem = BodyGuard.jsonProblem(buffer.readableBytesView) { throw ClientAPIError.badRequest(problem) }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch let DecodingError.keyNotFound(key, context) {
            throw ClientAPIError.missingParameter(Self.path(context.codingPath + [key]))
        } catch let DecodingError.valueNotFound(_, context) {
            throw ClientAPIError.invalidParameter("parameter '\(Self.path(context.codingPath))' must not be null")
        } catch let DecodingError.typeMismatch(expected, context) {
            if context.codingPath.isEmpty { throw ClientAPIError.badRequest("request body must be a JSON object") }
            throw ClientAPIError.invalidParameter("parameter '\(Self.path(context.codingPath))' must be \(Self.describe(expected))")
        } catch let DecodingError.dataCorrupted(context) {
            if context.codingPath.isEmpty { throw ClientAPIError.badRequest("request body is not valid JSON") }
            throw ClientAPIError.invalidParameter("parameter '\(Self.path(context.codingPath))' is invalid")
        } catch {
            throw ClientAPIError.badRequest("request body is not valid JSON")
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "a boolean"
        case is [String: JSONValue].Type, is LoginOptions.Type: "an object"
        case is [JSONValue].Type: "an array"
        default: "of another type"
        }
    }

    /// The bearer token of the `Authorization` header (``BearerToken``), or a 401.
    func bearerToken() throws -> String {
        switch BearerToken(headers) {
        case .token(let token): return token
        case .missing: throw ClientAPIError.invalidSession("must authenticate first: missing bearer token")
        case .malformed: throw ClientAPIError.invalidSession("invalid session: expected one Authorization: Bearer header")
        }
    }
}

