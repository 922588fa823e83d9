import Foundation

/// An email address as accounts are keyed by it: trimmed, in Unicode canonical form (NFC), matched
/// case-insensitively, its domain in Unicode whether it was typed so or in Punycode (`bücher.example` and
/// `xn--bcher-kva.example` are one mailbox, so they are one account).
package struct EmailAddress: Hashable, Sendable {
    /// Trimmed and NFC-normalized, as the user typed it otherwise; shown in the profile and used as the recipient.
    package let display: String
    /// ``display`` lowercased, Punycode domain labels decoded; the account key. `é` typed precomposed or as `e` +
    /// accent is one account, and so is a domain typed in Unicode or as `xn--…`.
    package let normalized: String

    /// Parses and checks an address. Permissive about the local part's letters (RFC 5321 and 6531 allow a lot),
    /// strict about what would break mail or lookups or fool a reader, or give one mailbox a second spelling: one `@`,
    /// no spaces, control or invisible formatting characters (bidirectional overrides, zero-width joiners), no
    /// private-use or unassigned code points; no quoted local part or comment (`"ann"@…`, `ann(x)@…`: the same
    /// mailbox as `ann@…` to a mail server, another account here); nothing that compatibility normalization (NFKC)
    /// changes (fullwidth `ｅｘａｍｐｌｅ`, `ℯ`, superscripts: IDNA maps them to plain letters, so a mail server may
    /// deliver them to the plain address); a dotted domain of letters, digits and hyphens (international letters
    /// included), sane lengths.
    package init?(_ raw: String) {
        let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping
        guard trimmed.utf8.count <= 254, let at = trimmed.lastIndex(of: "@") else { return nil }
        let local = trimmed[..<at]
        let domain = trimmed[trimmed.index(after: at)...]
        guard !local.isEmpty, local.utf8.count <= 64, !domain.isEmpty else { return nil }
        guard !trimmed.unicodeScalars.contains(where: Self.isForbidden) else { return nil }
        guard Self.isCompatibilityStable(trimmed) else { return nil }
        guard !local.unicodeScalars.contains(where: { "\"()\\,;:<>[]".unicodeScalars.contains($0) }),
            !local.hasPrefix("."), !local.hasSuffix("."), !local.contains("..")
        else { return nil }
        guard !local.contains("@"), !domain.contains("@") else { return nil }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return nil }
        // Each label as typed is at most 63 bytes; its canonical form (an ACE label, `xn--…`, decoded to Unicode) must
        // be what may be typed: letters, digits and inner hyphens, never an invisible or bidirectional character.
        var unicodeLabels: [String] = []
        for label in labels {
            guard label.utf8.count <= 63, let decoded = Punycode.unicodeLabel(label)?.precomposedStringWithCanonicalMapping,
                Self.isCompatibilityStable(decoded),
                !decoded.isEmpty, !decoded.hasPrefix("-"), !decoded.hasSuffix("-"),
                !decoded.unicodeScalars.contains(where: Self.isForbidden), decoded.unicodeScalars.allSatisfy(Self.isDomainCharacter)
            else { return nil }
            unicodeLabels.append(decoded)
        }
        display = trimmed
        normalized = local.lowercased() + "@" + unicodeLabels.joined(separator: ".").lowercased()
    }

    /// Whether NFKC leaves `text` as it is (scalars compared: String's == treats canonically equivalent text as equal).
    private static func isCompatibilityStable(_ text: String) -> Bool {
        text.unicodeScalars.elementsEqual(text.precomposedStringWithCompatibilityMapping.unicodeScalars)
    }

    /// Characters no address may hold: whitespace, controls, invisible formatting, private-use, unassigned.
    private static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.properties.isWhitespace { return true }
        switch scalar.properties.generalCategory {
        case .control, .format, .privateUse, .unassigned, .surrogate, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// Letters, digits and `-` (ASCII or international: an IDN domain in Unicode form).
    private static func isDomainCharacter(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" }
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter, .nonspacingMark, .spacingMark,
            .decimalNumber:
            return true
        default: return false
        }
    }
}
