/// Punycode (RFC 3492), decoding only: an internationalized domain label written in ASCII (`xn--bcher-kva`) back to
/// Unicode (`bücher`), so that an address typed either way is one account (``EmailAddress``).
package enum Punycode {
    private static let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700, initialBias = 72, initialN = 128

    /// The Unicode form of `label` if it is an ACE label (`xn--…`, any case), the label itself otherwise; nil for
    /// an ACE label that does not decode.
    package static func unicodeLabel(_ label: Substring) -> String? {
        guard label.count > 4, label.prefix(4).lowercased() == "xn--" else { return String(label) }
        return decode(label.dropFirst(4))
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
