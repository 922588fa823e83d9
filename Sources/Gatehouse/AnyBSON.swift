import Foundation
internal import GatehouseWire

/// A BSON document: the type of function payloads and custom user data, as in the Realm SDK.
public typealias Document = [String: AnyBSON?]

/// A string that is not an ObjectId.
public struct ObjectIdError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was given.
    public let string: String
    public var description: String { "not an ObjectId (24 hex digits): \(string)" }
}

/// A 12-byte BSON ObjectId, written as 24 hex digits.
public struct ObjectId: Hashable, Sendable, Codable, CustomStringConvertible {
    /// 24 lowercase hex digits.
    public let stringValue: String

    /// Parses 24 hex digits, as the Realm SDK's `try ObjectId(string:)`.
    ///
    /// - Throws: ``ObjectIdError`` for anything else.
    public init(string: String) throws(ObjectIdError) {
        guard ObjectIDText.isValid(string) else { throw ObjectIdError(string: string) }
        stringValue = string.lowercased()
    }

    /// An ObjectId literal, as the Realm SDK's `ObjectId("5f1b2c3d4e5f6a7b8c9d0e1f")`; traps on a literal that is not
    /// 24 hex digits (a programming error, as in the Realm SDK).
    public init(_ literal: StaticString) {
        do {
            try self.init(string: "\(literal)")
        } catch {
            preconditionFailure("\(error)")
        }
    }

    /// A new ObjectId (the Realm SDK's `ObjectId()`): see ``generate()``.
    public init() { self = Self.generate() }

    /// When the id was made: its first 4 bytes, seconds since 1970.
    public var timestamp: Date {
        Date(timeIntervalSince1970: TimeInterval(UInt32(stringValue.prefix(8), radix: 16) ?? 0))
    }

    /// A new ObjectId: 4 bytes of seconds since 1970 and 8 random bytes.
    public static func generate() -> ObjectId {
        let seconds = UInt32(truncatingIfNeeded: Int64(Date().timeIntervalSince1970))
        var hex = String(format: "%08x", seconds)
        for _ in 0..<8 { hex += String(format: "%02x", UInt8.random(in: .min ... .max)) }
        return try! ObjectId(string: hex)
    }

    public var description: String { stringValue }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = try? ObjectId(string: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an ObjectId: \(text)"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(stringValue)
    }
}

/// A BSON value, as the Realm SDK's `AnyBSON`. On the wire it travels as canonical Extended JSON
/// (`{"$numberInt":"1"}`, `{"$oid":"…"}`, …), the form App Services clients send.
public enum AnyBSON: Hashable, Sendable {
    /// A UTF-8 string.
    case string(String)
    /// A 32-bit integer (`{"$numberInt":"…"}`).
    case int32(Int32)
    /// A 64-bit integer (`{"$numberLong":"…"}`).
    case int64(Int64)
    /// A double (`{"$numberDouble":"…"}`).
    case double(Double)
    /// A boolean.
    case bool(Bool)
    /// A date, to the millisecond (`{"$date":{"$numberLong":"…"}}`).
    case datetime(Date)
    /// An ObjectId (`{"$oid":"…"}`).
    case objectId(ObjectId)
    /// Binary data (`{"$binary":{"base64":"…","subType":"00"}}`).
    case binary(Data)
    /// A document: values by key.
    case document(Document)
    /// An array.
    case array([AnyBSON?])
    /// BSON null.
    case null

    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The document, if this is one.
    public var documentValue: Document? { if case .document(let d) = self { d } else { nil } }
    /// The array, if this is one.
    public var arrayValue: [AnyBSON?]? { if case .array(let a) = self { a } else { nil } }
    /// The boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// Any integer or double as a `Double`.
    public var doubleValue: Double? {
        switch self {
        case .double(let d): d
        case .int32(let i): Double(i)
        case .int64(let i): Double(i)
        default: nil
        }
    }
    /// Any 32- or 64-bit integer as an `Int`.
    public var intValue: Int? {
        switch self {
        case .int32(let i): Int(i)
        case .int64(let i): Int(i)
        default: nil
        }
    }
}

extension AnyBSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int64(Int64(value)) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: AnyBSON?...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, AnyBSON?)...) {
        self = .document(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: Extended JSON

extension AnyBSON {
    /// Canonical Extended JSON.
    public var extendedJSON: JSONValue {
        switch self {
        case .string(let s): .string(s)
        case .int32(let i): .object(["$numberInt": .string(String(i))])
        case .int64(let i): .object(["$numberLong": .string(String(i))])
        case .double(let d): .object(["$numberDouble": .string(Self.format(d))])
        case .bool(let b): .bool(b)
        case .datetime(let date):
            .object(["$date": .object(["$numberLong": .string(String(Self.milliseconds(date)))])])
        case .objectId(let id): .object(["$oid": .string(id.stringValue)])
        case .binary(let data): .object(["$binary": .object(["base64": .string(data.base64EncodedString()), "subType": "00"])])
        case .document(let document): Self.extendedJSON(document)
        case .array(let array): .array(array.map { $0?.extendedJSON ?? .null })
        case .null: .null
        }
    }

    /// A document as canonical Extended JSON.
    public static func extendedJSON(_ document: Document) -> JSONValue {
        .object(document.mapValues { $0?.extendedJSON ?? .null })
    }

    /// A date's milliseconds since 1970 as BSON stores them, held to `Int64`'s range: a date read from the server
    /// (`{"$numberLong":"9223372036854775807"}` is a valid one) or made by the app may lie beyond what a `Double`
    /// converts back, and converting it must not trap.
    static func milliseconds(_ date: Date) -> Int64 {
        let ms = (date.timeIntervalSince1970 * 1000).rounded(.down)
        if ms.isNaN { return 0 }
        if ms >= 0x1p63 { return .max }
        if ms < -0x1p63 { return .min }
        return Int64(ms)
    }

    private static func format(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        if d == d.rounded(), abs(d) < 1e15 { return String(format: "%.1f", d) }
        return "\(d)"
    }

    /// Reads Extended JSON (canonical or relaxed) or plain JSON. Plain integers become `int32` when they fit,
    /// else `int64`.
    public init(extendedJSON value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .int(let i): self = Int32(exactly: i).map(AnyBSON.int32) ?? .int64(i)
        case .double(let d): self = .double(d)
        case .string(let s): self = .string(s)
        case .array(let a): self = .array(a.map { AnyBSON(extendedJSON: $0) })
        case .object(let o):
            if o.count == 1, let (key, inner) = o.first, let wrapped = Self.wrapper(key, inner) {
                self = wrapped
            } else {
                self = .document(o.mapValues { AnyBSON(extendedJSON: $0) })
            }
        }
    }

    private static func wrapper(_ key: String, _ inner: JSONValue) -> AnyBSON? {
        switch (key, inner) {
        case ("$numberInt", .string(let s)): Int32(s).map(AnyBSON.int32)
        case ("$numberLong", .string(let s)): Int64(s).map(AnyBSON.int64)
        case ("$numberDouble", .string(let s)):
            switch s {
            case "NaN": .double(.nan)
            case "Infinity": .double(.infinity)
            case "-Infinity": .double(-.infinity)
            default: Double(s).map(AnyBSON.double)
            }
        case ("$oid", .string(let s)): (try? ObjectId(string: s)).map(AnyBSON.objectId)
        case ("$date", .object(let date)):
            if case .string(let ms)? = date["$numberLong"], let value = Int64(ms) {
                .datetime(Date(timeIntervalSince1970: TimeInterval(value) / 1000))
            } else {
                nil
            }
        case ("$date", .int(let ms)): .datetime(Date(timeIntervalSince1970: TimeInterval(ms) / 1000))
        case ("$binary", .object(let binary)):
            if case .string(let b64)? = binary["base64"], let data = Data(base64Encoded: b64) { .binary(data) } else { nil }
        default: nil
        }
    }
}

extension AnyBSON: CustomStringConvertible {
    public var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? String(decoding: encoder.encode(extendedJSON), as: UTF8.self)) ?? "AnyBSON"
    }
}
