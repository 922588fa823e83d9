import Crypto
import Foundation
import GatehouseWire

/// Random identifiers and secrets, and how they are stored and compared.
package enum Secrets {
    /// A 24-hex id in the shape of a BSON ObjectId (4 bytes of seconds, 8 random bytes), as Realm clients expect
    /// for `user_id`, `device_id` and API key ids.
    package static func objectID(at date: Date = Date()) -> String {
        var bytes = [UInt8](repeating: 0, count: 12)
        let seconds = UInt32(truncatingIfNeeded: Int64(date.timeIntervalSince1970))
        bytes[0] = UInt8(seconds >> 24)
        bytes[1] = UInt8(truncatingIfNeeded: seconds >> 16)
        bytes[2] = UInt8(truncatingIfNeeded: seconds >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: seconds)
        bytes.replaceSubrange(4..<12, with: randomBytes(8))
        return hex(bytes)
    }

    /// `count` bytes from the system CSPRNG (the source `SystemRandomNumberGenerator` draws from), up to 256 in one
    /// system call (`getentropy`, `getrandom` underneath on Linux). The standard generator gives eight bytes a call:
    /// drawn a byte at a time, the secrets of one login took fifty system calls, and a readiness probe's pad 8,192.
    /// Traps if the system cannot give random bytes, as the standard generator does: a secret is never made weaker.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            #if canImport(Glibc) || canImport(Musl) || canImport(Darwin)
            var start = 0
            while start < count {
                let length = min(256, count - start)
                guard getentropy(buffer.baseAddress! + start, length) == 0 else { fatalError("the system's random source failed") }
                start += length
            }
            #else
            var rng = SystemRandomNumberGenerator()
            for index in 0..<count { buffer[index] = UInt8.random(in: .min ... .max, using: &rng) }
            #endif
            initialized = count
        }
    }

    /// A 256-bit secret as 64 hex digits: one-time tokens travel in URLs, where hex needs no escaping.
    package static func token() -> String { hex(randomBytes(32)) }

    /// What is stored instead of a secret. Hashed from the string's own UTF-8 (no `Data` copy: every refresh and
    /// rate-limit check hashes one).
    package static func sha256(_ secret: String) -> [UInt8] {
        var hasher = SHA256()
        update(&hasher, with: secret)
        return Array(hasher.finalize())
    }

    /// Feeds `text`'s UTF-8 to `hasher` without copying it out of the string when it is stored contiguously.
    package static func update(_ hasher: inout SHA256, with text: String) {
        var text = text
        text.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
    }

    /// Compares two byte strings in time that depends only on their lengths.
    package static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in constantTimeEquals(x, y) } }
    }

    /// Whether two byte strings are equal, in a time that depends on their length only.
    package static func constantTimeEquals(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    package static func hex(_ bytes: [UInt8]) -> String { bytes.withUnsafeBytes { hex($0) } }

    /// Lowercase hex, written straight into the string's storage.
    package static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var index = 0
            for b in bytes {
                out[index] = hexDigit(b >> 4)
                out[index + 1] = hexDigit(b & 0xF)
                index += 2
            }
            return index
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// True for exactly 24 lowercase or uppercase hex digits (``ObjectIDText``).
    package static func isObjectID(_ text: String) -> Bool { ObjectIDText.isValid(text) }
}
