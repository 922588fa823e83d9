import Dispatch
import Foundation
import GatehouseDomain
import Hummingbird
import Testing

@testable import GatehouseServer

/// The byte-level helpers every request goes through: base64url for tokens, `$n` → `?n` for SQLite statements.
@Suite("Token and statement encoding")
struct TokenEncodingTests {
    /// base64url as RFC 4648 §5 defines it, from Foundation's base64.
    static func reference(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test("base64url encodes as RFC 4648 §5 without padding and decodes back, every length and byte")
    func roundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for length in 0...70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let encoded = Base64URL.encode(bytes)
            #expect(encoded == Self.reference(bytes))
            #expect(try #require(Base64URL.decode(encoded)) == Data(bytes))
        }
        let every = (0...255).map(UInt8.init)
        #expect(Base64URL.encode(every) == Self.reference(every))
        // Appended after what a buffer holds (a token's header and dot), from an array, a Data, a slice, and bytes in
        // two regions.
        for length in [0, 1, 2, 3, 64, 200] {
            let bytes = Array(every.prefix(length))
            var split = DispatchData.empty
            bytes.prefix(length / 2).withUnsafeBytes { split.append($0) }
            bytes.dropFirst(length / 2).withUnsafeBytes { split.append($0) }
            if length >= 2 { #expect(split.regions.count == 2, "the two-region path is the one tested") }
            let expected = Array("h.".utf8) + Array(Self.reference(bytes).utf8)
            var fromArray = Array("h.".utf8), fromData = fromArray, fromSlice = fromArray, fromRegions = fromArray
            Base64URL.append(bytes, to: &fromArray)
            Base64URL.append(Data(bytes), to: &fromData)
            Base64URL.append(bytes[...], to: &fromSlice)
            Base64URL.append(split, to: &fromRegions)
            #expect([fromArray, fromData, fromSlice, fromRegions] == Array(repeating: expected, count: 4), "\(length)")
        }
        #expect(Base64URL.decode(Base64URL.encode(every)[...]) == Data(every))
    }

    @Test("base64url refuses padding, the standard alphabet's + and /, other characters and impossible lengths")
    func refusals() {
        for text in ["QQ==", "a+b/", "ab/c", "ab c", "ab\u{0}c", "abcdé", "abcde", "a", "Zm9v\n"] {
            #expect(Base64URL.decode(text) == nil, "\(text.debugDescription)")
        }
        #expect(Base64URL.decode("") == Data())
        #expect(Base64URL.decode("Zm9v") == Data("foo".utf8))
        #expect(Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
    }

    @Test("base64url decodes only the canonical form: a last character with unused bits set is refused")
    func canonicalOnly() throws {
        // One byte leaves 4 unused bits in its second character, two bytes leave 2 in their third.
        #expect(Base64URL.decode("QQ") == Data("A".utf8))
        #expect(Base64URL.decode("QUI") == Data("AB".utf8))
        for text in ["QR", "QX", "QUJ", "QUL"] {
            #expect(Base64URL.decode(text) == nil, "\(text)")
        }
        // For every length with a short last group, each other value of the last character's unused bits is refused.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for length in [1, 2, 4, 5, 31, 32] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255) }
            let encoded = Array(Base64URL.encode(bytes))
            let lastCharacter = try #require(encoded.last)
            let last = try #require(alphabet.firstIndex(of: lastCharacter))
            let unusedBits = length % 3 == 1 ? 4 : 2
            for low in 1..<(1 << unusedBits) {
                let altered = String(encoded.dropLast()) + String(alphabet[last & ~((1 << unusedBits) - 1) | low])
                #expect(Base64URL.decode(altered) == nil, "\(altered)")
            }
        }
    }

    @Test("random bytes: the length asked for, every byte filled across the 256-byte calls, objectIDs of 24 hex digits")
    func randomBytesFillEveryByte() {
        for count in [0, 1, 7, 8, 9, 255, 256, 257, 513, 8192] { #expect(Secrets.randomBytes(count).count == count) }
        let draws = (0..<2_000).map { _ in Secrets.randomBytes(300) }
        #expect(Set(draws).count == draws.count)
        // Each position, before and after the first call's 256 bytes, takes (almost) every byte value over 2,000
        // draws: none is left unfilled or repeated from another.
        for position in [0, 1, 7, 8, 128, 254, 255, 256, 257, 299] {
            #expect(Set(draws.map { $0[position] }).count > 200, "position \(position)")
        }
        #expect(draws.allSatisfy { $0[0..<44] != $0[256..<300] })
        let ids = (0..<500).map { _ in Secrets.objectID() }
        #expect(Set(ids).count == ids.count && ids.allSatisfy(Secrets.isObjectID))
    }

    @Test("bearer tokens lose the spaces and tabs at either end, nothing else")
    func trimming() {
        #expect(BearerToken.parse("Bearer \t abc.def \t") == "abc.def")
        #expect(BearerToken.parse("Bearer a b\tc") == "a b\tc")
        #expect(BearerToken.parse("Bearer \nabc\r") == "\nabc\r")
        #expect(BearerToken.parse("Bearer \t ") == nil)
        let token = "x\(String(repeating: "y", count: 600))z"
        #expect(BearerToken.parse("Bearer  \(token)\t") == token)
    }

    @Test("SQLite statements: $n becomes ?n, a $ before anything else stays")
    func translate() {
        #expect(SQLiteHandle.translate("SELECT 1") == "SELECT 1")
        #expect(SQLiteHandle.translate("UPDATE t SET a = $2 WHERE b = $1 AND c = $12") == "UPDATE t SET a = ?2 WHERE b = ?1 AND c = ?12")
        #expect(SQLiteHandle.translate("SELECT '$x', '€$3', $") == "SELECT '$x', '€?3', $")
    }
}
