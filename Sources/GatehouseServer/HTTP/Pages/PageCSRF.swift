import Crypto
import Foundation
import GatehouseDomain

/// The hosted pages' CSRF token: a signed double submit. A page's GET sets it as a cookie and puts it in its form;
/// a POST must carry the same value in both, and the value must be one this server made, for this app, within the
/// last hour: `kid.issued.nonce.mac`, the MAC keyed by a secret derived from signing key `kid`
/// (``SigningKeys/macKey(kid:purpose:)``). An attacker who manages to plant a cookie (a sibling subdomain, a
/// man in the middle on plain HTTP) cannot make a value that passes.
///
/// Behind an `https` public URL the cookie is `__Host-gh_csrf` (`Secure`, `Path=/`, no `Domain`): no other host or
/// plain-HTTP page can set or overwrite it. On plain HTTP (local development) browsers refuse `__Host-` cookies, so it
/// is `gh_csrf`, scoped to the app's pages.
struct PageCSRF {
    let keys: SigningKeys
    let secure: Bool
    static let maxAge: TimeInterval = 3600
    private static let purpose = "hosted-page-csrf"

    var cookieName: String { secure ? "__Host-gh_csrf" : "gh_csrf" }

    /// A fresh token for a page of `appId`.
    func make(appId: String, now: Date) -> String {
        let kid = keys.current.kid
        let issued = String(Int64(now.timeIntervalSince1970))
        let nonce = Secrets.hex(Secrets.randomBytes(16))
        return [kid, issued, nonce, mac(kid: kid, appId: appId, issued: issued, nonce: nonce) ?? ""].joined(separator: ".")
    }

    /// The `Set-Cookie` value carrying `token`.
    func cookie(_ token: String, appId: String) -> String {
        let maxAge = "Max-Age=\(Int(Self.maxAge))"
        return secure
            ? "\(cookieName)=\(token); Path=/; Secure; HttpOnly; SameSite=Strict; \(maxAge)"
            : "\(cookieName)=\(token); Path=/app/\(appId); HttpOnly; SameSite=Strict; \(maxAge)"
    }

    /// True when the cookie and the form field hold the same token, made here for `appId` within ``maxAge``.
    func accepts(cookie: String, field: String, appId: String, now: Date) -> Bool {
        guard !cookie.isEmpty, Secrets.constantTimeEquals(Array(cookie.utf8), Array(field.utf8)) else { return false }
        let parts = cookie.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, let issued = Int64(parts[1]), let key = keys.macKey(kid: parts[0], purpose: Self.purpose) else { return false }
        let age = now.timeIntervalSince1970 - TimeInterval(issued)
        guard age >= -60, age <= Self.maxAge else { return false }
        guard let presented = Self.unhex(parts[3]) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(presented, authenticating: Self.signed(appId: appId, issued: parts[1], nonce: parts[2]), using: key)
    }

    private func mac(kid: String, appId: String, issued: String, nonce: String) -> String? {
        guard let key = keys.macKey(kid: kid, purpose: Self.purpose) else { return nil }
        return Secrets.hex(Array(HMAC<SHA256>.authenticationCode(for: Self.signed(appId: appId, issued: issued, nonce: nonce), using: key)))
    }

    private static func signed(appId: String, issued: String, nonce: String) -> Data { Data("\(appId)|\(issued)|\(nonce)".utf8) }

    private static func unhex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var bytes: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[i...i + 1], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}
