import Crypto
import Foundation
import GatehouseDomain

/// The hosted pages' CSRF token: a double submit of a server-made value. A page's GET puts the browser's value in
/// its form (a fresh one, set as its cookie, unless the browser holds one to reuse); a POST passes only when it
/// carries that value in both, byte for byte.
/// What protects a form is what a cross-site page cannot do:
/// - read this origin's cookie or the page holding the form, so it cannot put this browser's value in the field
///   (the cookie is also `HttpOnly`: no script reads it);
/// - make this browser send the cookie with its POST: the cookie is `SameSite=Strict`;
/// - set the cookie: behind an `https` public URL it is `__Host-gh_csrf-<app>` (`Secure`, `Path=/`, no `Domain`),
///   which no other host, sibling subdomains included, and no plain-HTTP page can set or overwrite.
///
/// A browser keeps one value per app (behind https the cookie's name carries the app, ``cookieName(appId:)``; on
/// plain HTTP its path does) and a page reuses the value the browser holds while it has at least half of
/// ``maxAge`` left (``token(reusing:appId:now:)``): a page of another app, or a second page of this one in another
/// tab, leaves the forms already open working.
///
/// The value is also `kid.issued.nonce.mac`, the MAC keyed by a secret derived from signing key `kid`
/// (``SigningKeys/macKey(kid:purpose:)``) over the app and the time: a value passes only for the app it was made for,
/// within ``maxAge`` of being made, while its key is kept. That refuses values this server never made; it does not
/// refuse a genuine value, so someone who can set cookies in a victim's browser defeats the check by fetching a page
/// and planting its value in the cookie and their form. Only the `__Host-` prefix rules that out, and only behind
/// https: on plain HTTP (local development) browsers refuse `__Host-` cookies, so the cookie is `gh_csrf`, scoped to
/// the app's pages, and an active attacker on the network or on a host that shares the cookie's domain can plant one.
///
/// The value is bound to a browser only by being that browser's cookie (a value from one browser fails with
/// another's cookie). It is bound to no account or session, because these forms have none: each acts only on what
/// it carries (an emailed link's token and a new password, or a typed address), so a forged POST could do nothing
/// its author could not do from their own browser, except borrow the victim's network address, which rate limits
/// and the audit log key on.
struct PageCSRF {
    let keys: SigningKeys
    let secure: Bool
    static let maxAge: TimeInterval = 3600
    private static let purpose = "hosted-page-csrf"

    /// The cookie of `appId`'s pages: `gh_csrf` on plain HTTP (scoped by its path); behind https, where `__Host-`
    /// cookies must have `Path=/`, `__Host-gh_csrf-` and the first 16 hex digits of the app id's SHA-256 (app ids may
    /// hold characters a cookie name cannot).
    func cookieName(appId: String) -> String {
        secure ? "__Host-gh_csrf-" + Secrets.hex(Array(Secrets.sha256(appId).prefix(8))) : "gh_csrf"
    }

    /// The value for a page of `appId`: `held` (the browser's cookie) while it is a value made here for the app with
    /// at least half of ``maxAge`` left, so that every open form of the browser keeps passing; else a fresh one.
    func token(reusing held: String?, appId: String, now: Date) -> String {
        if let held, accepts(cookie: held, field: held, appId: appId, now: now.addingTimeInterval(Self.maxAge / 2)) { return held }
        return make(appId: appId, now: now)
    }

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
            ? "\(cookieName(appId: appId))=\(token); Path=/; Secure; HttpOnly; SameSite=Strict; \(maxAge)"
            : "\(cookieName(appId: appId))=\(token); Path=/app/\(appId); HttpOnly; SameSite=Strict; \(maxAge)"
    }

    /// True when the cookie and the form field hold the same token, made here for `appId` within ``maxAge``. An
    /// empty or missing cookie, or a field that differs from it in any byte, is refused before the token is read.
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
