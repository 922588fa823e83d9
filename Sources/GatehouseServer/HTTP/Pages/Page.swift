import Crypto
import Foundation
import GatehouseDomain
import HTTPTypes
import Hummingbird
import NIOCore

/// A server-rendered HTML page: no scripts, no external assets, one inline stylesheet allowed by its hash.
struct Page {
    var status: HTTPResponse.Status = .ok
    var title: String
    /// Already-escaped HTML for inside `<main>`.
    var body: String

    /// The stylesheet of every page; the Content-Security-Policy allows exactly this text by its SHA-256.
    static let css = """
        :root{color-scheme:light dark;--accent:#1f5fbf;--error:#b3261e}
        *{box-sizing:border-box}
        body{margin:0;font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:17px;line-height:1.5;background:#f4f5f7;color:#1d1d1f}
        main{max-width:28rem;margin:2rem auto;padding:2rem 1.5rem;background:#fff;border-radius:12px;box-shadow:0 1px 3px rgba(0,0,0,.08)}
        h1{font-size:1.4rem;margin:0 0 1rem}
        p{margin:0 0 1rem}
        .hint{color:#555;font-size:.95rem}
        label{display:block;font-weight:600;margin:0 0 .3rem}
        input[type=password],input[type=email]{width:100%;font-size:1rem;padding:.7rem;border:1px solid #888;border-radius:8px;margin:0 0 .3rem}
        input[aria-invalid=true]{border-color:var(--error);border-width:2px}
        .field{margin:0 0 1rem}
        .error{color:var(--error);font-size:.95rem;margin:0 0 .5rem}
        button{width:100%;font-size:1.05rem;font-weight:600;padding:.8rem;border:0;border-radius:8px;background:var(--accent);color:#fff;cursor:pointer}
        button:focus-visible,input:focus-visible{outline:3px solid #ffbf47;outline-offset:2px}
        .ok{color:#1e7b34}
        @media (prefers-color-scheme:dark){body{background:#111;color:#eee}main{background:#1c1c1e}.hint{color:#bbb}input{background:#2c2c2e;color:#eee}}
        """

    static let cssHash = Data(SHA256.hash(data: Data(css.utf8))).base64EncodedString()

    /// Headers every page carries: a strict CSP, no framing, no referrer (the URL holds a token), no caching.
    static var securityHeaders: HTTPFields {
        [
            .contentType: "text/html; charset=utf-8",
            .contentSecurityPolicy:
                "default-src 'none'; style-src 'sha256-\(cssHash)'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            HTTPField.Name("X-Frame-Options")!: "DENY",
            HTTPField.Name("Referrer-Policy")!: "no-referrer",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            .cacheControl: "no-store",
        ]
    }

    func response(headers extra: HTTPFields = [:]) -> Response {
        let html = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
            <meta name="robots" content="noindex"><title>\(htmlEscape(title))</title><style>\(Self.css)</style></head>
            <body><main>
            <h1>\(htmlEscape(title))</h1>
            \(body)
            </main></body></html>
            """
        var headers = Self.securityHeaders
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
