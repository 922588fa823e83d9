import Foundation
@testable import Gatehouse
import Testing

/// Every credential is encoded exactly as the App Services clients encode it (spec §3.2).
@Suite struct CredentialsTests {
    @Test(arguments: [
        (Credentials.anonymous, "anon-user", #"{"provider":"anon-user"}"#),
        (.emailPassword(email: "a@b.co", password: "pw"), "local-userpass", #"{"password":"pw","provider":"local-userpass","username":"a@b.co"}"#),
        (.userAPIKey("k1"), "api-key", #"{"key":"k1","provider":"api-key"}"#),
        (.serverAPIKey("k2"), "api-key", #"{"key":"k2","provider":"api-key"}"#),
        (.jwt(token: "t"), "custom-token", #"{"provider":"custom-token","token":"t"}"#),
        (.facebook(accessToken: "fb"), "oauth2-facebook", #"{"accessToken":"fb","provider":"oauth2-facebook"}"#),
        (.google(serverAuthCode: "code"), "oauth2-google", #"{"authCode":"code","provider":"oauth2-google"}"#),
        (.googleId(token: "gid"), "oauth2-google", #"{"id_token":"gid","provider":"oauth2-google"}"#),
        (.apple(idToken: "aid"), "oauth2-apple", #"{"id_token":"aid","provider":"oauth2-apple"}"#),
    ])
    func credentialBodies(_ credentials: Credentials, provider: String, json: String) throws {
        #expect(credentials.provider == provider)
        #expect(try canonical(.object(credentials.body)) == json)
    }

    @Test func functionPayloadIsTheDocumentItselfAsExtendedJSON() throws {
        let payload: Document = ["username": "bob", "age": .int32(42), "score": 1.5, "id": .objectId(ObjectId("5f1b2c3d4e5f6a7b8c9d0e1f"))]
        let credentials = Credentials.function(payload: payload)
        #expect(credentials.provider == "custom-function")
        #expect(credentials.body["provider"] == nil)
        #expect(
            try canonical(.object(credentials.body))
                == #"{"age":{"$numberInt":"42"},"id":{"$oid":"5f1b2c3d4e5f6a7b8c9d0e1f"},"score":{"$numberDouble":"1.5"},"username":"bob"}"#
        )
    }
}

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
