import Foundation
import GatehouseDomain
import Hummingbird
import Logging

/// `/_dev/mailbox`: the local development mailbox, only when `dev.mailbox` is true.
///
/// `GET /_dev/mailbox?to=ADDRESS` answers JSON `[{"id","to","subject","text","html","createdAt"}]`, newest first;
/// without `to` it shows an HTML list of every message.
struct DevMailboxRoutes {
    let store: any GatehouseStore

    struct Entry: Codable {
        var id: String
        var to: String
        var subject: String
        var text: String
        var html: String
        /// ISO 8601.
        var createdAt: String
    }

    func register(on router: Router<GatehouseRequestContext>) {
        router.get("_dev/mailbox", use: mailbox)
    }

    @Sendable func mailbox(_ request: Request, context: GatehouseRequestContext) async throws -> Response {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let to = request.uri.queryParameters.get("to") {
            let messages = try await store.mailbox(recipient: to.trimmingCharacters(in: .whitespaces), limit: 200)
            return try JSONResponse.make(
                messages.map {
                    Entry(id: $0.id, to: $0.recipient, subject: $0.subject, text: $0.text, html: $0.html, createdAt: formatter.string(from: $0.createdAt))
                }
            )
        }
        let messages = try await store.mailbox(recipient: nil, limit: 200)
        let rows = messages.map { m in
            """
            <article><h2>\(htmlEscape(m.subject))</h2>
            <p class="meta">To <a href="?to=\(htmlEscape(m.recipient.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))">\(htmlEscape(m.recipient))</a> · \(formatter.string(from: m.createdAt)) · \(m.status.rawValue)</p>
            <pre>\(linkify(htmlEscape(m.text)))</pre></article>
            """
        }.joined(separator: "\n")
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
            <title>Gatehouse dev mailbox</title>
            <style>body{font-family:system-ui,sans-serif;max-width:48em;margin:auto;padding:1em;line-height:1.4}
            article{border-bottom:1px solid #ccc;padding:.5em 0}h2{font-size:1.1em;margin:.2em 0}.meta{color:#555;font-size:.9em}
            pre{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:.6em}</style></head>
            <body><h1>Dev mailbox</h1><p>\(messages.count) message\(messages.count == 1 ? "" : "s"), newest first. JSON: <code>?to=ADDRESS</code>.</p>
            \(messages.isEmpty ? "<p>No messages yet.</p>" : rows)
            </body></html>
            """
        return Response(
            status: .ok,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'"],
            body: .init(byteBuffer: .init(string: html))
        )
    }

    /// Makes the (already escaped) http(s) links of a text clickable.
    private func linkify(_ escaped: String) -> String {
        escaped.replacing(/https?:\/\/[^\s<]+/) { match in
            let url = String(match.output)
            return "<a href=\"\(url)\">\(url)</a>"
        }
    }
}
