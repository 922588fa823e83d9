import Foundation
@testable import Gatehouse
import Testing

@Suite struct ExtendedJSONTests {
    @Test func valuesEncodeCanonically() throws {
        let cases: [(AnyBSON, String)] = [
            (.int32(1), #"{"$numberInt":"1"}"#),
            (.int64(1), #"{"$numberLong":"1"}"#),
            (7, #"{"$numberLong":"7"}"#),
            (.double(2), #"{"$numberDouble":"2.0"}"#),
            (.datetime(Date(timeIntervalSince1970: 1.5)), #"{"$date":{"$numberLong":"1500"}}"#),
            (.binary(Data([1, 2])), #"{"$binary":{"base64":"AQI=","subType":"00"}}"#),
            (["a", nil, true], #"["a",null,true]"#),
            (.null, "null"),
        ]
        for (value, json) in cases {
            #expect(try canonical(value.extendedJSON) == json)
        }
    }

    /// A date at the ends of BSON's range — sent in a user's custom data by a server, or made by the app — writes
    /// and prints without trapping, held to what a BSON date can say.
    @Test(arguments: [
        ("9223372036854775807", "9223372036854775807"), ("-9223372036854775808", "-9223372036854775808"),
    ])
    func datesAtTheEndsOfTheRangeDoNotTrap(_ sent: String, _ written: String) throws {
        let value = AnyBSON(extendedJSON: .object(["$date": .object(["$numberLong": .string(sent)])]))
        guard case .datetime = value else { Issue.record("not a date: \(value)"); return }
        #expect(try canonical(value.extendedJSON) == #"{"$date":{"$numberLong":""# + written + #""}}"#)
        #expect(value.description.contains(written))
        // Dates an app makes beyond BSON's range are written at its ends (a date that is no number, as 0).
        for (far, milliseconds) in [(1e300, "9223372036854775807"), (-1e300, "-9223372036854775808"), (.nan, "0")] as [(Double, String)] {
            let value = AnyBSON.datetime(Date(timeIntervalSince1970: far))
            #expect(try canonical(value.extendedJSON) == #"{"$date":{"$numberLong":""# + milliseconds + #""}}"#)
        }
    }

    /// An ObjectId is 24 ASCII hex digits; fullwidth digits (which `Character.isHexDigit` takes, 3 bytes each) are not.
    @Test func anObjectIdIsASCIIHex() throws {
        #expect(throws: ObjectIdError.self) { try ObjectId(string: "ＡＡＡＡＡＡＡＡ") }
        #expect(throws: ObjectIdError.self) { try ObjectId(string: "00000000000000000000000g") }
        #expect(try ObjectId(string: "5F1B2C3D4E5F6A7B8C9D0E1F").stringValue == "5f1b2c3d4e5f6a7b8c9d0e1f")
    }

    @Test func extendedJSONRoundTrips() {
        let document: Document = [
            "i": .int32(-3), "l": .int64(1 << 40), "d": .double(0.25), "s": "x", "b": false, "n": .null,
            "o": .objectId(ObjectId("000000000000000000000001")), "t": .datetime(Date(timeIntervalSince1970: 12)),
            "nested": ["arr": [1, "two"]],
        ]
        let decoded = AnyBSON(extendedJSON: AnyBSON.extendedJSON(document))
        #expect(decoded == .document(document))
    }

    @Test func plainJSONNumbersBecomeIntegersOrDoubles() {
        #expect(AnyBSON(extendedJSON: .int(5)) == .int32(5))
        #expect(AnyBSON(extendedJSON: .int(5_000_000_000)) == .int64(5_000_000_000))
        #expect(AnyBSON(extendedJSON: .double(0.5)) == .double(0.5))
    }
}

func canonical(_ value: JSONValue) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}
