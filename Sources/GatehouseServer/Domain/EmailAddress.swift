import Foundation

/// An email address as accounts are keyed by it: trimmed, and matched case-insensitively.
struct EmailAddress: Hashable, Sendable {
    /// Trimmed, as the user typed it; shown in the profile and used as the recipient.
    let display: String
    /// Trimmed and lowercased; the account key.
    let normalized: String

    /// Parses and checks an address. Deliberately permissive about the local part (RFC 5321 allows a lot), strict
    /// about what would break mail or lookups: one `@`, no spaces or control characters, a dotted domain, sane lengths.
    init?(_ raw: String) {
        let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.utf8.count <= 254, let at = trimmed.lastIndex(of: "@") else { return nil }
        let local = trimmed[..<at]
        let domain = trimmed[trimmed.index(after: at)...]
        guard !local.isEmpty, local.utf8.count <= 64, !domain.isEmpty else { return nil }
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) else {
            return nil
        }
        guard !local.contains("@"), !domain.contains("@") else { return nil }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 63 && !$0.hasPrefix("-") && !$0.hasSuffix("-") })
        else { return nil }
        display = trimmed
        normalized = trimmed.lowercased()
    }
}
