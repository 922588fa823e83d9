import Foundation

/// Text as a dictionary key that hashes in constant time and is equal only to the same bytes: a kept statement's SQL
/// (SQLite's kept statements, PostgreSQL's remembered answers). A secret (a verified token) is keyed by
/// ``SecretText``, which hashes the same way and compares in constant time.
///
/// Its hash reads the length and three 32-byte samples of the UTF-8 (start, middle, end), where `String`'s own hash
/// reads every byte — about 13,000 instructions for the session read's 1.5 KB of SQL, at every lookup
/// (`Benchmarks/PROFILING.md`). Equality compares the bytes, not `String`'s canonical equivalence: "K" and the Kelvin
/// sign (U+212A) are two keys, so a token presented with one character swapped for an equivalent one is another
/// token. The same string compares in constant time; texts that share their samples only cost a full comparison.
package struct ExactText: Hashable, Sendable {
    package let text: String

    package init(_ text: String) { self.text = text }

    package static func == (a: ExactText, b: ExactText) -> Bool {
        a.text.utf8.count == b.text.utf8.count && a.withBytes { x in
            b.withBytes { y in
                guard let xs = x.baseAddress, let ys = y.baseAddress, xs != ys else { return true }
                return memcmp(xs, ys, x.count) == 0
            }
        }
    }

    package func hash(into hasher: inout Hasher) {
        withBytes { bytes in
            hasher.combine(bytes.count)
            let sample = 32
            if bytes.count <= 3 * sample {
                hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            } else {
                let middle = (bytes.count - sample) / 2
                func combine(from start: Int) {
                    hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[start..<(start + sample)])))
                }
                combine(from: 0)
                combine(from: middle)
                combine(from: bytes.count - sample)
            }
        }
    }

    fileprivate func withBytes<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }
}

/// A secret as a dictionary key (``VerifiedTokens``: a bearer token presented by a client, looked up among the tokens
/// of other users): ``ExactText``'s hash, and equality by bytes in a time that depends on the length only
/// (`Secrets.constantTimeEquals`), so that how far a presented token matches
/// another one never shows in how long its lookup takes. The hash reads samples, but with the process's random seed.
package struct SecretText: Hashable, Sendable {
    private let exact: ExactText

    package init(_ secret: String) { exact = ExactText(secret) }

    package static func == (a: SecretText, b: SecretText) -> Bool {
        a.exact.withBytes { x in b.exact.withBytes { y in Secrets.constantTimeEquals(x, y) } }
    }

    package func hash(into hasher: inout Hasher) { exact.hash(into: &hasher) }
}
