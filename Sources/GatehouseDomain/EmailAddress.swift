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
        switch Self.readPlainASCII(raw) {
        case .address(let display, let normalized):
            self.display = display
            self.normalized = normalized
        case .invalid:
            return nil
        case .notPlainASCII:
            guard let address = Self.readingUnicode(raw) else { return nil }
            self = address
        }
    }

    private init(display: String, normalized: String) {
        self.display = display
        self.normalized = normalized
    }

    private enum ASCIIReading {
        case address(display: String, normalized: String)
        case invalid
        /// Not ASCII, or an ACE domain label (`xn--…`) to decode: the general reading decides.
        case notPlainASCII
    }

    /// The reading of an address that is all ASCII (almost every address, and every login's), on its bytes: the
    /// same answer as ``readingUnicode(_:)`` (`HostileInputTests` compares the two over random strings), which on
    /// ASCII text does work that cannot change anything — Foundation's trimming, canonical and compatibility
    /// normalization, a Unicode property lookup per character — about 150,000 instructions a login
    /// (`Benchmarks/PROFILING.md`). ASCII is its own NFC and NFKC; its only whitespace is tab to carriage return
    /// and space, its only forbidden characters the controls, space and DEL.
    private static func readPlainASCII(_ raw: String) -> ASCIIReading {
        let reading = raw.utf8.withContiguousStorageIfAvailable { all -> ASCIIReading in
            guard !all.contains(where: { $0 >= 0x80 }) else { return .notPlainASCII }
            let isSpace = { (byte: UInt8) in byte == 0x20 || (0x09...0x0D).contains(byte) }
            guard let first = all.firstIndex(where: { !isSpace($0) }), let last = all.lastIndex(where: { !isSpace($0) }) else {
                return .invalid
            }
            let text = UnsafeBufferPointer(rebasing: all[first...last])
            guard text.count <= 254, let at = text.lastIndex(of: UInt8(ascii: "@")) else { return .invalid }
            let local = UnsafeBufferPointer(rebasing: text[..<at])
            let domain = UnsafeBufferPointer(rebasing: text[(at + 1)...])
            guard !local.isEmpty, local.count <= 64, !domain.isEmpty else { return .invalid }
            guard !text.contains(where: { $0 < 0x21 || $0 == 0x7F }) else { return .invalid }
            let dot = UInt8(ascii: ".")
            guard !local.contains(where: Self.isExcludedFromLocal),
                local.first != dot, local.last != dot, !zip(local, local.dropFirst()).contains(where: { $0 == dot && $1 == dot })
            else { return .invalid }
            let labels = domain.split(separator: dot, omittingEmptySubsequences: false)
            guard labels.count >= 2 else { return .invalid }
            for label in labels {
                if label.count > 4, label.prefix(4).map({ $0 | 0x20 }) == Array("xn--".utf8) { return .notPlainASCII }
                let hyphen = UInt8(ascii: "-")
                guard label.count <= 63, !label.isEmpty, label.first != hyphen, label.last != hyphen,
                    label.allSatisfy({ $0 == hyphen || (0x30...0x39).contains($0) || (0x61...0x7A).contains($0 | 0x20) })
                else { return .invalid }
            }
            let display = String(decoding: text, as: UTF8.self)
            let normalized = String(decoding: text.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
            return .address(display: display, normalized: normalized)
        }
        return reading ?? .notPlainASCII
    }

    /// The bytes a local part may not hold (quotes, comments, separators, a second `@`): `"()\\,;:<>[]@`.
    private static func isExcludedFromLocal(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "\\"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: ":"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "@"):
            return true
        default:
            return false
        }
    }

    /// The general reading: any Unicode text.
    package static func readingUnicode(_ raw: String) -> EmailAddress? {
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
        return EmailAddress(display: trimmed, normalized: local.lowercased() + "@" + unicodeLabels.joined(separator: ".").lowercased())
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
