import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Every route of `openapi.yaml`, and every hostile body of the list below: never a 5xx, always the envelope of the
/// API that was called.
@Suite struct HostileInputTests {
    /// Every operation the API description lists, with its path parameters filled in.
    static let routes: [(method: HTTPRequest.Method, path: String)] = {
        let spec = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/GatehouseServer/Resources/openapi.yaml")
        let text = (try? String(contentsOf: spec, encoding: .utf8)) ?? ""
        var routes: [(HTTPRequest.Method, String)] = []
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if let match = line.wholeMatch(of: #/ {2}(/[^:]*):\s*/#) {
                path = String(match.output.1)
            } else if let match = line.wholeMatch(of: #/ {4}(get|post|put|delete):.*/#), let current = path {
                let filled = current.replacingOccurrences(of: "{appId}", with: "test-app")
                    .replacingOccurrences(of: "{provider}", with: "local-userpass")
                    .replacingOccurrences(of: "{keyId}", with: "0123456789abcdef01234567")
                routes.append((HTTPRequest.Method(rawValue: match.output.1.uppercased())!, filled))
            } else if !line.hasPrefix(" ") && !line.isEmpty {
                path = nil
            }
        }
        return routes
    }()

    /// Bodies an attacker or a broken client sends.
    static let hostileBodies: [(name: String, bytes: [UInt8])] = [
        ("empty", []),
        ("JSON null", Array("null".utf8)),
        ("a JSON array", Array("[1,2,3]".utf8)),
        ("a bare string", Array("\"hello\"".utf8)),
        ("a huge number", Array("1e999999".utf8)),
        ("huge numbers in fields", Array(#"{"email":1e999999,"password":-1e999999,"token":123456789012345678901234567890}"#.utf8)),
        ("deep nesting", Array(String(repeating: "[", count: 20_000).utf8) + Array(String(repeating: "]", count: 20_000).utf8)),
        ("deep objects", Array((String(repeating: #"{"a":"#, count: 40) + "1" + String(repeating: "}", count: 40)).utf8)),
        ("invalid UTF-8", Array(#"{"email":""#.utf8) + [0xFF, 0xFE, 0xC0, 0x80] + Array(#"@example.com","password":"x"}"#.utf8)),
        ("a raw NUL", Array(#"{"email":"a"#.utf8) + [0] + Array(#"@example.com","password":"long enough"}"#.utf8)),
        ("an escaped NUL", Array(#"{"email":"nul@example.com","password":"long\u0000enough","username":"nul@example.com"}"#.utf8)),
        ("a lone surrogate", Array(#"{"email":"\ud800@example.com","password":"long enough"}"#.utf8)),
        ("wrong types", Array(#"{"email":{"$gt":""},"password":["a"],"token":true,"tokenId":null,"options":"x","name":7}"#.utf8)),
        ("SQL in fields", Array(#"{"email":"' OR 1=1; DROP TABLE users; --@example.com","password":"') OR ('1'='1","username":"x' --"}"#.utf8)),
        ("bidi override email", Array(#"{"email":"admin\u202e@example.com","password":"long enough pass","username":"admin\u202e@example.com"}"#.utf8)),
        ("a long field", Array(#"{"email":""#.utf8) + Array(repeating: UInt8(ascii: "a"), count: 60_000) + Array(#"@example.com"}"#.utf8)),
        ("too large", Array(repeating: UInt8(ascii: " "), count: 70_000)),
        ("form with NUL", Array("username=a%00b%40example.com&client_id=ios-app&challenge_type=oob%20password%20redirect&password=x%00y".utf8)),
        ("form with bad percent", Array("username=%FF%FE%zz&client_id=%&grant_type=password&continuation_token=%E2%28".utf8)),
        ("form with a thousand fields", Array((0..<1000).map { "f\($0)=\($0)" }.joined(separator: "&").utf8)),
    ]

    @Test func theRouteListCoversTheAPI() {
        #expect(Self.routes.count >= 40)
        #expect(Self.routes.contains { $0.method == .post && $0.path.hasSuffix("/oauth2/v2.0/token") })
        #expect(Self.routes.contains { $0.method == .delete && $0.path == "/api/client/v2.0/auth/sessions" })
    }

    @Test(arguments: ["application/json", "application/x-www-form-urlencoded", "text/plain"])
    func everyRouteAnswersEveryHostileBodyWithoutA5xx(_ contentType: String) async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            for route in Self.routes {
                for body in Self.hostileBodies {
                    let headers: HTTPFields = [.contentType: contentType, .authorization: "Bearer \(body.name)", .accept: "*/*"]
                    let reply = try await client.execute(
                        uri: route.path, method: route.method, headers: headers, body: ByteBuffer(bytes: body.bytes)
                    ) { response in
                        Reply(
                            status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView),
                            headers: response.headers
                        )
                    }
                    let label = "\(route.method) \(route.path) with \(body.name) as \(contentType)"
                    #expect(reply.status.code < 500, "\(label): \(reply.status) \(reply.text.prefix(300))")
                    Self.expectEnvelope(reply, path: route.path, label: label)
                }
            }
        }
    }

    /// Path parameters are input too: absurd app ids, key ids and providers are 4xx in the right envelope.
    @Test func hostilePathParametersAreRefused() async throws {
        let ids = [String(repeating: "a", count: 2000), "..%2F..%2Fetc%2Fpasswd", "%00", "%FF%FE", "test-app%20OR%201%3D1", "%E2%80%AE"]
        try await withGatehouse(nativeConfiguration()) { _, client in
            for id in ids {
                for path in [
                    "/api/client/v2.0/app/\(id)/auth/providers/local-userpass/login", "/api/client/v2.0/app/test-app/auth/providers/\(id)/login",
                    "/native/\(id)/oauth2/v2.0/initiate", "/api/client/v2.0/auth/api_keys/\(id)", "/app/\(id)/confirm",
                ] {
                    let reply = try await client.execute(uri: path, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}")) {
                        Reply(status: $0.status, contentType: $0.headers[.contentType], body: Data($0.body.readableBytesView), headers: $0.headers)
                    }
                    #expect((400..<500).contains(reply.status.code), "\(path): \(reply.status)")
                    Self.expectEnvelope(reply, path: path, label: path)
                }
            }
        }
    }

    @Test func bodyGuardFindsDepthAndNULsOutsideAndInsideStrings() {
        #expect(BodyGuard.jsonProblem(Array(#"{"a":[[[1]]],"b":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}"#.utf8)) == nil)
        #expect(BodyGuard.jsonProblem(Array((String(repeating: "[", count: 33) + String(repeating: "]", count: 33)).utf8)) != nil)
        #expect(BodyGuard.jsonProblem(Array(#"{"a":"x\u0000"}"#.utf8)) != nil)
        #expect(BodyGuard.jsonProblem(Array(#"{"a":"x\\u0000"}"#.utf8)) == nil)  // an escaped backslash, then text
        #expect(BodyGuard.jsonProblem(Array(#"{"a":"\u00e9\"\u0041"}"#.utf8)) == nil)
        #expect(BodyGuard.jsonProblem([0x7B, 0x00, 0x7D]) != nil)
    }

    @Test func oddUnicodeInEmailsIsNormalisedOrRefused() {
        #expect(EmailAddress("e\u{301}lise@example.com")?.normalized == EmailAddress("\u{e9}lise@EXAMPLE.com")?.normalized)
        #expect(EmailAddress("jürgen@bücher.de")?.normalized == "jürgen@bücher.de")
        // An internationalized domain typed in Punycode is the same mailbox as in Unicode: one key.
        #expect(EmailAddress("Jürgen@XN--BCHER-KVA.de")?.normalized == "jürgen@bücher.de")
        #expect(EmailAddress("jürgen@xn--bcher-kva.de")?.display == "jürgen@xn--bcher-kva.de")
        // Punycode that does not decode, or decodes to what could not be typed (a right-to-left override), is refused.
        for refused in ["admin\u{202E}@example.com", "a\u{200B}b@example.com", "a@exa_mple.com", "a@exam ple.com", "a\u{E000}@example.com", "a@example.c\u{0}m",
            "a@xn--ab-g4t.example", "a@xn--9999999999a.example", "a@xn--.example"] {
            #expect(EmailAddress(refused) == nil, "\(refused.unicodeScalars.map { String($0.value, radix: 16) })")
        }
    }

    /// The byte reading of an all-ASCII address gives the general reading's answer, valid or not, for random strings
    /// made of what addresses hold and what they must not (controls, spaces, quotes, dots, hyphens, `xn--` labels),
    /// and for the edges named here.
    @Test func asciiAddressesReadAsTheGeneralReadingReadsThem() {
        let pieces = ["a", "Z", "k", "0", "9", "-", ".", "..", "@", "@", "+", "_", "\"", "(", ")", ",", ";", ":", "<", "[", "\\",
            " ", "\t", "\n", "\r", "\u{0B}", "\u{0C}", "\u{1F}", "\u{7F}", "\u{0}", "xn--", "XN--", "xn--bcher-kva", "example", ".com",
            "-x", "x-", "~", "!", "#", "$", "%", "&", "'", "*", "/", "=", "?", "^", "`", "{", "|", "}"]
        var generator = SystemRandomNumberGenerator()
        var compared = 0, valid = 0
        func compare(_ text: String) {
            let fast = EmailAddress(text)
            let general = EmailAddress.readingUnicode(text)
            #expect(fast?.display == general?.display, "\(Array(text.utf8))")
            #expect(fast?.normalized == general?.normalized, "\(Array(text.utf8))")
            compared += 1
            if general != nil { valid += 1 }
        }
        for edge in ["kim@example.com", "  Kim.Lee+tag@Example.COM\t", "a@b", "a@b.", "a@.b", ".a@b.c", "a.@b.c", "a..b@c.d", "a@b..c", "a@-b.c",
            "a@b-.c", "a@xn--.c", "a@xn--bcher-kva.de", "a@XN--BCHER-KVA.de", "a@xn--a.de", "\"a\"@b.c", "a b@c.d", "@b.c", "a@", "",
            "   ", String(repeating: "a", count: 64) + "@b.c", String(repeating: "a", count: 65) + "@b.c",
            "a@" + String(repeating: "b", count: 63) + ".c", "a@" + String(repeating: "b", count: 64) + ".c",
            String(repeating: "a", count: 60) + "@" + String(repeating: "b.", count: 96) + "c"] {
            compare(edge)
        }
        for _ in 0..<20_000 {
            let count = Int.random(in: 1...12, using: &generator)
            compare((0..<count).map { _ in pieces.randomElement(using: &generator)! }.joined())
            // Mostly well-formed: a local part, an @ and a domain of a few labels, each piece sometimes odd.
            let local = (0..<Int.random(in: 1...3, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let labels = (0..<Int.random(in: 1...3, using: &generator)).map { _ in
                ["example", "b", "xn--bcher-kva", "a-b", pieces.randomElement(using: &generator)!].randomElement(using: &generator)!
            }
            compare(local + "@" + labels.joined(separator: "."))
        }
        #expect(compared > 40_000)
        #expect(valid > 1_000, "the strings tried include valid addresses")
    }

    /// RFC 3492's sample (A), Arabic (Egyptian), and a label every IDN guide uses.
    @Test func punycodeDecodesTheRFCSamples() {
        let arabic = "\u{0644}\u{064A}\u{0647}\u{0645}\u{0627}\u{0628}\u{062A}\u{0643}\u{0644}\u{0645}\u{0648}\u{0634}\u{0639}\u{0631}\u{0628}\u{064A}\u{061F}"
        #expect(Punycode.decode("egbpdaj6bu4bxfgehfvwxn") == arabic)
        #expect(Punycode.unicodeLabel("xn--bcher-kva") == "bücher")
        #expect(Punycode.unicodeLabel("example") == "example")
        #expect(Punycode.decode("bcher-kv\u{e9}") == nil)
        #expect(Punycode.decode("99999999999999999999999") == nil)
        // Whatever ASCII arrives (addresses are at most 254 bytes), decoding answers and never traps.
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789-")
        var decoded = 0
        for _ in 0..<5000 {
            let label = String((0..<Int.random(in: 1...60, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            if Punycode.decode(Substring(label)) != nil { decoded += 1 }
        }
        #expect(decoded > 0)
    }

    /// Answers under `/api/` carry the Client API envelope, under `/native/` native auth's, pages are HTML.
    static func expectEnvelope(_ reply: Reply, path: String, label: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard reply.status.code >= 400 else { return }
        if path.hasPrefix("/api/") {
            #expect(reply.contentType == "application/json", "\(label)", sourceLocation: sourceLocation)
            #expect(reply.error != nil, "\(label): \(reply.text.prefix(200))", sourceLocation: sourceLocation)
        } else if path.hasPrefix("/native/") {
            #expect(reply.nativeError != nil, "\(label): \(reply.text.prefix(200))", sourceLocation: sourceLocation)
        } else if path.hasPrefix("/app/") {
            #expect(reply.contentType?.hasPrefix("text/html") == true, "\(label)", sourceLocation: sourceLocation)
        }
    }
}
