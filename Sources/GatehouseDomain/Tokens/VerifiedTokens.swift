import Crypto
import Foundation

/// Gatehouse's own tokens whose signature this process has verified, keyed by the token's exact bytes
/// (``SecretText``: a hash of samples, then a constant-time comparison of every byte): the same token presented
/// again — a Client API refresh token at every refresh, an access token at every read — skips the ECDSA verification
/// and the decoding of its claims (a fifth of a refresh's CPU time).
///
/// Only what the signature check decides is remembered; everything else is checked at every use as before: the key
/// that signed the token must still be one the server trusts (a retired key's tokens are refused at once), the
/// token's kind and expiry, and its session in the database. Only tokens that verified get in, so a forged or altered
/// token pays the whole verification every time, and a token differing by one byte is another entry (a SHA-256 of the
/// token was the key before: about 14,000 instructions for an access token at every authenticated request, where the
/// key's hash and its constant-time comparison cost a small fraction of that).
///
/// Bounded: two generations of at most `capacity / 2` entries each; when the newer is full it becomes the older and
/// the older is dropped, so the tokens in use stay and the rest age out. Only tokens of up to ``maxTokenBytes`` are
/// kept (a refresh token is about 450 bytes, an access token 600 plus its custom user data), so an entry holds at
/// most a few KiB (the token and its claims) and the whole cache, at the default 4,096 entries, about 16 MiB at worst,
/// a few MiB as tokens usually are. The capacity is `server.verifiedTokenCache` (at most 131,072); 0 turns it off.
///
/// Its reach: an access token is presented at every read of its life, a Client API refresh token once per access
/// token's life. A token is kept while fewer than half the capacity of other entries went into the newer generation
/// since its last use (tokens verified, and tokens in use moved up from the older one): all of them when the tokens
/// in use are at most half the capacity, few of them beyond it (presented in turn, 3,000 tokens in a cache of 4,096
/// are found about half the time, 4,096 never). A server whose clients present more tokens than that within an access
/// token's life verifies most of them again (45–80 µs of CPU each on an AMD EPYC; `docs/performance.md`).
package final class VerifiedTokens: Sendable {
    private struct Entry: Sendable {
        let kid: String
        let claims: TokenClaims
    }
    private struct Generations: Sendable {
        var newer: [SecretText: Entry] = [:]
        var older: [SecretText: Entry] = [:]
    }

    private let generations = LockedValue(Generations())
    /// Entries per generation; 0 when nothing is remembered.
    private let generationSize: Int

    /// Longer tokens (an access token with large custom user data) are verified at every use.
    package static let maxTokenBytes = 2048

    /// `capacity`: entries kept at most, rounded up to an even number (4,096 unless told otherwise; 0 keeps none, and
    /// every token is verified at every use).
    package init(capacity: Int = 4096) {
        generationSize = capacity <= 0 ? 0 : max(1, (capacity + 1) / 2)
    }

    /// The claims of `token` and the key that signed it, when this process verified it before.
    package func lookUp(_ token: SecretText) -> (kid: String, claims: TokenClaims)? {
        guard generationSize > 0 else { return nil }
        return generations.withLockedValue { generations in
            if let entry = generations.newer[token] { return (entry.kid, entry.claims) }
            guard let entry = generations.older[token] else { return nil }
            // In use: keep it in the newer generation, which the next turnover keeps.
            Self.insert(entry, token, into: &generations, size: generationSize)
            return (entry.kid, entry.claims)
        }
    }

    /// Remembers that `token` verified as signed by `kid`, with `claims`.
    package func remember(_ token: SecretText, kid: String, claims: TokenClaims) {
        guard generationSize > 0 else { return }
        generations.withLockedValue { Self.insert(Entry(kid: kid, claims: claims), token, into: &$0, size: generationSize) }
    }

    /// Whether it remembers anything (a capacity above 0).
    package var remembers: Bool { generationSize > 0 }

    /// Entries held (for tests).
    package var count: Int { generations.withLockedValue { $0.newer.count + $0.older.count } }

    private static func insert(_ entry: Entry, _ token: SecretText, into generations: inout Generations, size: Int) {
        if generations.newer.count >= size {
            generations.older = generations.newer
            generations.newer = [:]
        }
        generations.newer[token] = entry
    }
}

extension SigningKeys {
    /// Checks `token`'s structure, algorithm and signature against these keys and returns its claims
    /// (``JWT/verify(_:keys:)``), without verifying the signature again for a token this process verified before
    /// while the key that signed it is still one of these (``VerifiedTokens``). Expiry and kind are the caller's.
    package func verify(_ token: String) throws(TokenError) -> TokenClaims {
        guard verified.remembers, token.utf8.count <= VerifiedTokens.maxTokenBytes else { return try JWT.verify(token, keys: key(kid:)) }
        let text = SecretText(token)
        if let known = verified.lookUp(text), contains(kid: known.kid) { return known.claims }
        var signer: String?
        let claims = try JWT.verify(token) { kid in
            signer = kid
            return key(kid: kid)
        }
        if let signer { verified.remember(text, kid: signer, claims: claims) }
        return claims
    }
}
