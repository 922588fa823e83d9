/// The text of a BSON ObjectId as both protocols carry it (user, key and token ids): exactly 24 ASCII hex digits,
/// either case. Read on its bytes: `Character.isHexDigit` also takes fullwidth digits (`Ａ`, three bytes each).
package enum ObjectIDText {
    package static func isValid(_ text: String) -> Bool {
        text.utf8.count == 24 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0) }
    }
}
