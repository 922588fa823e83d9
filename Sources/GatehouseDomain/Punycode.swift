import Foundation

/// Punycode (RFC 3492): an internationalized domain label written in ASCII (`xn--bcher-kva`) back to Unicode
/// (`bücher`), so that an address typed either way is one account (``EmailAddress``), and the other way, to check that
/// an ACE label is the one spelling of its Unicode form.
package enum Punycode {
    private static let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700, initialBias = 72, initialN = 128

    /// The Unicode form of `label` if it is an ACE label (`xn--…`, any case), the label itself otherwise; nil for
    /// an ACE label that does not decode, or that is not the one ACE spelling of what it decodes to (IDNA's round
    /// trip, RFC 5891 section 5.4): its Unicode form must hold a non-ASCII character, be in NFC and lowercase, and
    /// encode back to the label. Otherwise `xn--com-` (which decodes to `com`) or a label spelling `Bücher` would be
    /// one more way to write an address that mail servers may deliver elsewhere.
    package static func unicodeLabel(_ label: Substring) -> String? {
        guard label.count > 4, label.prefix(4).lowercased() == "xn--" else { return String(label) }
        let ace = label.dropFirst(4).lowercased()
        guard let decoded = decode(Substring(ace)), !decoded.unicodeScalars.allSatisfy(\.isASCII),
            // Scalars compared, not Strings (whose == is canonical equivalence).
            decoded.unicodeScalars.elementsEqual(decoded.precomposedStringWithCanonicalMapping.unicodeScalars),
            decoded.unicodeScalars.elementsEqual(decoded.lowercased().unicodeScalars),
            encode(decoded) == ace
        else { return nil }
        return decoded
    }

    /// The Punycode of `text` (without `xn--`); nil when it does not fit in an `Int`'s arithmetic.
    package static func encode(_ text: String) -> String? {
        let input = Array(text.unicodeScalars)
        var output = String(String.UnicodeScalarView(input.filter(\.isASCII)))
        let basic = output.unicodeScalars.count
        var handled = basic
        if basic > 0 { output.append("-") }
        var n = initialN, delta = 0, bias = initialBias
        while handled < input.count {
            guard let m = input.map({ Int($0.value) }).filter({ $0 >= n }).min() else { return nil }
            let (step, stepOverflow) = (m - n).multipliedReportingOverflow(by: handled + 1)
            guard !stepOverflow, delta <= Int.max - step else { return nil }
            delta += step
            n = m
            for scalar in input {
                let value = Int(scalar.value)
                if value < n { delta += 1 }
                guard value == n else { continue }
                var q = delta
                var k = base
                while true {
                    let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                    if q < t { break }
                    output.unicodeScalars.append(digit(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.unicodeScalars.append(digit(q))
                bias = adapt(delta, points: handled + 1, first: handled == basic)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return output
    }

    private static func digit(_ value: Int) -> Unicode.Scalar {
        Unicode.Scalar(UInt8(value < 26 ? 0x61 + value : 0x30 + value - 26))
    }

    /// Decodes the part after `xn--`; nil when it is not valid Punycode.
    package static func decode(_ encoded: Substring) -> String? {
        let input = Array(encoded.unicodeScalars)
        guard input.allSatisfy(\.isASCII) else { return nil }
        var output: [Unicode.Scalar] = []
        var position = 0
        if let delimiter = input.lastIndex(of: "-") {
            output = Array(input[..<delimiter])
            position = delimiter + 1
        }
        var n = initialN, i = 0, bias = initialBias
        while position < input.count {
            let oldI = i
            var weight = 1
            var k = base
            while true {
                guard position < input.count, let digit = digitValue(input[position]) else { return nil }
                position += 1
                let (product, productOverflow) = digit.multipliedReportingOverflow(by: weight)
                let (added, overflow) = product.addingReportingOverflow(i)
                guard !productOverflow, !overflow else { return nil }
                i = added
                let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                if digit < t { break }
                let (nextWeight, weightOverflow) = weight.multipliedReportingOverflow(by: base - t)
                guard !weightOverflow else { return nil }
                weight = nextWeight
                k += base
            }
            bias = adapt(i - oldI, points: output.count + 1, first: oldI == 0)
            let (nextN, nOverflow) = n.addingReportingOverflow(i / (output.count + 1))
            guard !nOverflow else { return nil }
            n = nextN
            i %= output.count + 1
            guard n >= initialN, let scalar = Unicode.Scalar(UInt32(clamping: n)) else { return nil }
            output.insert(scalar, at: i)
            i += 1
        }
        var text = ""
        text.unicodeScalars.append(contentsOf: output)
        return text
    }

    private static func digitValue(_ scalar: Unicode.Scalar) -> Int? {
        switch scalar.value {
        case 0x30...0x39: Int(scalar.value) - 0x30 + 26
        case 0x41...0x5A: Int(scalar.value) - 0x41
        case 0x61...0x7A: Int(scalar.value) - 0x61
        default: nil
        }
    }

    private static func adapt(_ delta: Int, points: Int, first: Bool) -> Int {
        var delta = first ? delta / damp : delta / 2
        delta += delta / points
        var k = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (base - tMin + 1) * delta / (delta + skew)
    }
}
