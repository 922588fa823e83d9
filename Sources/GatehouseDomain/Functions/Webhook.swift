import Crypto
import Foundation
import GatehouseWire

/// Calls an app's webhook, signed by the Standard Webhooks scheme (https://www.standardwebhooks.com):
/// `webhook-id` (unique per call), `webhook-timestamp` (Unix seconds) and `webhook-signature: v1,<base64 of
/// HMAC-SHA256(secret, "id.timestamp.body")>`, where the secret is the base64 after `whsec_`. Receivers verify the
/// signature and refuse old timestamps, so a call cannot be forged or replayed.
package struct WebhookCaller: Sendable {
    package let http: any OutboundHTTP
    package let clock: GatehouseClock

    /// POSTs `body` (JSON) to the webhook and returns its JSON answer. Anything but a 2xx JSON object within the
    /// timeout is ``AuthError/providerUnavailable(_:)``, naming the function, never a secret.
    package func call(_ settings: WebhookSettings, function: String, body: [String: JSONValue]) async throws(AuthError) -> [String: JSONValue] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let payload = try? encoder.encode(body), let key = settings.secretKey else {
            throw .providerUnavailable("the \(function) function is misconfigured")
        }
        let id = "msg_" + Secrets.objectID(at: clock.now)
        let timestamp = String(Int64(clock.now.timeIntervalSince1970))
        let headers = Self.signatureHeaders(id: id, timestamp: timestamp, body: payload, key: key) + [
            ("Content-Type", "application/json"), ("Accept", "application/json"), ("User-Agent", "Gatehouse-Webhooks/1"),
        ]
        let response: OutboundResponse
        do {
            response = try await http.send(OutboundRequest(method: "POST", url: settings.url, headers: headers, body: payload, timeout: settings.timeout))
        } catch {
            throw .providerUnavailable("the \(function) function failed: \(error)")
        }
        guard (200..<300).contains(response.status) else {
            throw .providerUnavailable("the \(function) function failed: it answered HTTP \(response.status)")
        }
        guard let answer = response.jsonObject else {
            throw .providerUnavailable("the \(function) function failed: its answer is not a JSON object")
        }
        return answer
    }

    /// The three Standard Webhooks headers for one call.
    package static func signatureHeaders(id: String, timestamp: String, body: Data, key: SymmetricKey) -> [(String, String)] {
        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(body)
        let signature = Data(HMAC<SHA256>.authenticationCode(for: signed, using: key)).base64EncodedString()
        return [("webhook-id", id), ("webhook-timestamp", timestamp), ("webhook-signature", "v1,\(signature)")]
    }

    package init(http: any OutboundHTTP, clock: GatehouseClock) {
        self.http = http
        self.clock = clock
    }
}

extension WebhookSettings {
    /// The HMAC key: the base64 after `whsec_`.
    package var secretKey: SymmetricKey? {
        guard secret.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(secret.dropFirst(6))), bytes.count >= 24 else { return nil }
        return SymmetricKey(data: bytes)
    }
}
