import Foundation
import GatehouseWire

/// Runs an app's confirmation, reset and custom-login functions: the embedding program's closure when it gave one
/// (``FunctionHandlers``), else the configured webhook. The JSON each webhook receives and answers:
///
/// - confirmation: `{"type":"confirmation","appId","token","tokenId","username"}` → `{"status":"success"|"pending"|"fail"}`
/// - reset: `{"type":"reset","appId","token","tokenId","username","arguments":[…]}` → the same
/// - custom-function login: `{"type":"login","appId","payload":{…}}` → `{"id":"…","name":"…"}` or `{"error":"…"}`
/// - migrate user: `{"type":"migrateUser","appId","email","reason":"login"|"passwordReset","password"?}` →
///   `{"status":"migrated","emailVerified":true,"userId"?,"customData"?}`, `{"status":"unknown"}` or
///   `{"status":"wrong_password"}` (the password only at a login)
package struct FunctionRunner: Sendable {
    package let env: AuthEnvironment

    private var webhooks: WebhookCaller { WebhookCaller(http: env.outbound, clock: env.clock) }

    package func confirm(_ call: ConfirmationCall, settings: WebhookSettings?) async throws(AuthError) -> FunctionStatus {
        if let closure = env.functions.confirmation {
            do { return try await closure(call) } catch { throw .providerUnavailable("the confirmation function failed") }
        }
        guard let settings else { throw .providerUnavailable("no confirmation function is configured") }
        let answer = try await webhooks.call(settings, function: "confirmation", body: [
            "type": "confirmation", "appId": .string(call.appId), "token": .string(call.token), "tokenId": .string(call.tokenId),
            "username": .string(call.username),
        ])
        return try Self.status(answer, function: "confirmation")
    }

    package func reset(_ call: ResetCall, settings: WebhookSettings?) async throws(AuthError) -> FunctionStatus {
        if let closure = env.functions.reset {
            do { return try await closure(call) } catch { throw .providerUnavailable("the reset function failed") }
        }
        guard let settings else { throw .providerUnavailable("no reset function is configured") }
        let answer = try await webhooks.call(settings, function: "reset", body: [
            "type": "reset", "appId": .string(call.appId), "token": .string(call.token), "tokenId": .string(call.tokenId),
            "username": .string(call.username), "arguments": .array(call.arguments),
        ])
        return try Self.status(answer, function: "reset")
    }

    /// The provider whose logins the custom function decides.
    package static let providerType = "custom-function"

    /// The identity a custom-function login proves.
    package func login(appId: String, payload: [String: JSONValue], settings: WebhookSettings?) async throws(AuthError) -> ExternalIdentity {
        let outcome: CustomLoginOutcome
        if let closure = env.functions.customLogin {
            do { outcome = try await closure(appId, payload) } catch { throw .providerUnavailable("the custom-function login failed") }
        } else {
            guard let settings else { throw .providerUnavailable("no custom-function webhook is configured") }
            let answer = try await webhooks.call(settings, function: "custom-function", body: ["type": "login", "appId": .string(appId), "payload": .object(payload)])
            // An error refuses whatever else the answer holds: an answer that says both logs no one in.
            if let error = answer["error"], error != .null {
                outcome = .refused(error.profileString ?? "refused")
            } else if case .string(let id)? = answer["id"] {
                outcome = .user(id: id, name: answer["name"]?.profileString)
            } else {
                throw .providerUnavailable("the custom-function login failed: its answer has neither id nor error")
            }
        }
        switch outcome {
        case .user(let id, let name):
            guard !id.isEmpty, id.utf8.count <= 256 else { throw .providerUnavailable("the custom-function login failed: the id is empty or too long") }
            return ExternalIdentity(providerType: Self.providerType, externalId: id, data: name.map { ["name": .string($0)] } ?? [:])
        case .refused(let reason):
            throw .invalidCredential("custom function refused the login: \(reason.prefix(200))")
        }
    }

    /// Asks the migrate-user function about `call`. Nil when no function is configured for the app and no closure
    /// was given. Throws when the function fails, cannot be reached, or answers something else than the documented
    /// shapes; the error never carries the password.
    package func migrateUser(_ call: MigrateUserCall, settings: WebhookSettings?) async throws(AuthError) -> MigrateUserOutcome? {
        if let closure = env.functions.migrateUser {
            do { return try await closure(call) } catch { throw .providerUnavailable("the migrate-user function failed") }
        }
        guard let settings else { return nil }
        var body: [String: JSONValue] = [
            "type": "migrateUser", "appId": .string(call.appId), "email": .string(call.email), "reason": .string(call.reason.rawValue),
        ]
        if let password = call.password { body["password"] = .string(password) }
        let answer = try await webhooks.call(settings, function: "migrate-user", body: body)
        switch answer["status"] {
        case "unknown"?: return .unknown
        case "wrong_password"?: return .wrongPassword
        case "migrated"?:
            var customData: [String: JSONValue] = [:]
            switch answer["customData"] {
            case nil, .null?: break
            case .object(let object)?: customData = object
            default: throw .providerUnavailable("the migrate-user function failed: customData is not an object")
            }
            var userId: String?
            switch answer["userId"] {
            case nil, .null?: break
            case .string(let id)?: userId = id
            default: throw .providerUnavailable("the migrate-user function failed: userId is not a string")
            }
            return .migrated(emailVerified: answer["emailVerified"] == .bool(true), userId: userId, customData: customData)
        default:
            throw .providerUnavailable("the migrate-user function failed: expected {\"status\": \"migrated\" | \"unknown\" | \"wrong_password\"}")
        }
    }

    private static func status(_ answer: [String: JSONValue], function: String) throws(AuthError) -> FunctionStatus {
        guard case .string(let text)? = answer["status"], let status = FunctionStatus(rawValue: text) else {
            throw .providerUnavailable("the \(function) function failed: expected {\"status\": \"success\" | \"pending\" | \"fail\"}")
        }
        return status
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
