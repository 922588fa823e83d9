import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import Testing

/// Sign-up attributes are read after JSON decoding, so an escape (`\u0000`, `\u202e`) is the character it names:
/// control characters, bidirectional formatting characters and a name given twice are refused with
/// `attribute_validation_failed` at both steps that take attributes, and leave nothing behind.
@Suite struct NativeSignUpAttributeInputTests {
    /// One hostile `attributes` text and the name the refusal must give.
    struct Hostile: Sendable, CustomTestStringConvertible {
        let label: String
        let json: String
        let name: String
        var testDescription: String { label }
    }

    static let hostile: [Hostile] = [
        Hostile(label: "NUL through a JSON escape", json: #"{"displayName":"a\u0000b"}"#, name: "displayName"),
        Hostile(label: "a C1 control (CSI) through a JSON escape", json: #"{"displayName":"a\u009bb"}"#, name: "displayName"),
        Hostile(label: "a bidi override through a JSON escape", json: #"{"displayName":"Eve\u202Egnp.exe"}"#, name: "displayName"),
        Hostile(label: "a bidi isolate, sent raw", json: "{\"displayName\":\"Eve\u{2067}x\"}", name: "displayName"),
        Hostile(label: "a right-to-left mark", json: #"{"displayName":"Eve\u200F"}"#, name: "displayName"),
        Hostile(label: "a tab", json: #"{"displayName":"Eve\tX"}"#, name: "displayName"),
        Hostile(label: "a control in an optional attribute", json: #"{"displayName":"Eve","city":"Paris\u0007"}"#, name: "city"),
        Hostile(label: "a duplicate name", json: #"{"displayName":"Eve","displayName":"Mallory"}"#, name: "displayName"),
        Hostile(label: "a duplicate optional name", json: #"{"displayName":"Eve","city":"A","city":"B"}"#, name: "city"),
        Hostile(label: "a zero-width space", json: #"{"displayName":"Ev\u200Be"}"#, name: "displayName"),
        Hostile(label: "a byte-order mark", json: #"{"displayName":"\uFEFFEve"}"#, name: "displayName"),
        Hostile(label: "a hidden tag character", json: #"{"displayName":"Eve\uDB40\uDC41"}"#, name: "displayName"),
        Hostile(label: "a noncharacter", json: #"{"displayName":"Eve\uFFFF"}"#, name: "displayName"),
        Hostile(label: "a private-use character", json: #"{"displayName":"Eve\uE000"}"#, name: "displayName"),
        Hostile(
            label: "one emoji joining thousands of scalars",
            json: "{\"displayName\":\"" + Array(repeating: "\u{1F469}", count: 600).joined(separator: "\u{200D}") + "\"}", name: "displayName"
        ),
    ]

    /// A text nested deeper than an object of arrays is not read at all.
    @Test func deepNestingIsRefusedBeforeItIsRead() async throws {
        try await withGatehouse(Self.configuration()) { gatehouse, client in
            let deep = #"{"displayName":"Eve","x":"# + String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + "}"
            let reply = try await client.native(.signUpStart, ["username": "eve@example.com", "challenge_type": allChallengeTypes, "attributes": deep])
            expectNativeError(reply, .invalidRequest)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "eve@example.com") == nil)
            #expect(NativeAuthService.nestingDepth(Data(#"{"a":["[{","b"],"c":"]]]"}"#.utf8)) == 2)
        }
    }

    /// What Foundation's decoder accepts and JSON does not (a trailing comma, an empty element) is not read one way
    /// by Gatehouse and another by the app: the request is refused, and nothing is written.
    @Test(arguments: [#"{"displayName":"Eve",}"#, #"{"displayName":"Eve",,"city":"A"}"#])
    func textThatIsNotJSONIsRefused(_ attributes: String) async throws {
        try await withGatehouse(Self.configuration()) { gatehouse, client in
            let reply = try await client.native(.signUpStart, ["username": "eve@example.com", "challenge_type": allChallengeTypes, "attributes": attributes])
            expectNativeError(reply, .invalidRequest)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "eve@example.com") == nil)
        }
    }

    static func configuration() -> GatehouseConfiguration {
        nativeConfiguration(attributes: [.init(name: "displayName", required: true), .init(name: "city", required: false)])
    }

    @Test(arguments: hostile)
    func refusedAtStartWithNoFlowAndNoAccount(_ input: Hostile) async throws {
        try await withGatehouse(Self.configuration()) { gatehouse, client in
            let reply = try await client.native(
                .signUpStart, ["username": "eve@example.com", "challenge_type": allChallengeTypes, "attributes": input.json]
            )
            expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.attributeValidationFailed, suberror: .attributeValidationFailed)
            #expect(reply.nativeError?.invalidAttributes == [NativeAuthAttributeName(name: input.name)])
            #expect(reply.nativeError?.continuationToken == nil)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "eve@example.com") == nil)
            #expect(try await client.mailbox("eve@example.com").isEmpty)
        }
    }

    @Test(arguments: hostile)
    func refusedWhenSubmittedAfterTheCodeAndTheFlowKeepsNoneOfIt(_ input: Hostile) async throws {
        try await withGatehouse(Self.configuration()) { gatehouse, client in
            let ct1 = try #require(
                try await client.nativeStep(.signUpStart, ["username": "eve@example.com", "challenge_type": allChallengeTypes]).continuationToken
            )
            let ct2 = try #require(
                try await client.nativeStep(.signUpChallenge, ["continuation_token": ct1, "challenge_type": allChallengeTypes]).continuationToken
            )
            let afterCode = try await client.native(
                .signUpContinue, ["continuation_token": ct2, "grant_type": "oob", "oob": try await client.latestCode("eve@example.com")]
            )
            expectNativeError(afterCode, .attributesRequired, code: NativeAuthErrorCode.attributesRequired)
            let ct3 = try #require(afterCode.nativeError?.continuationToken)

            let reply = try await client.native(.signUpContinue, ["continuation_token": ct3, "grant_type": "attributes", "attributes": input.json])
            expectNativeError(reply, .invalidGrant, code: NativeAuthErrorCode.attributeValidationFailed, suberror: .attributeValidationFailed)
            #expect(reply.nativeError?.invalidAttributes == [NativeAuthAttributeName(name: input.name)])
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "eve@example.com") == nil)

            // The refusal kept the token (as for any invalid attribute) and nothing of the refused text: the next
            // good submission makes an account with only what it gave.
            let done = try await client.nativeStep(
                .signUpContinue, ["continuation_token": ct3, "grant_type": "attributes", "attributes": #"{"displayName":"Eve"}"#]
            )
            let tokens = try await client.nativeTokens(try #require(done.continuationToken), username: "eve@example.com")
            #expect(try jwtPayload(try #require(tokens.idToken))["name"] as? String == "Eve")
            let profile = try await client.call(Path.profile, .get, bearer: tokens.accessToken).decode(ProfileResponse.self)
            #expect(profile.data["displayName"] == .string("Eve"))
            #expect(profile.data["city"] == nil)
        }
    }

    @Test func lettersBeyondASCIIRightToLeftScriptAndEmojiAreKeptAsGiven() async throws {
        // Accents, Greek, Arabic (right-to-left, no formatting characters), an emoji with a skin tone joined by
        // U+200D, a flag; the city arrives through JSON escapes.
        let name = "Zoë Ῥόδος مريم 👩🏽‍💻 🇫🇷"
        let city = "São Paulo 🌆"
        let json = try String(decoding: JSONEncoder().encode(["displayName": name]), as: UTF8.self)
            .replacingOccurrences(of: "}", with: #","city":"S\u00e3o Paulo \ud83c\udf06"}"#)
        try await withGatehouse(Self.configuration()) { gatehouse, client in
            let ct = try await client.nativeSignUp("zoe@example.com", attributes: json)
            let tokens = try await client.nativeTokens(ct, username: "zoe@example.com")
            #expect(try jwtPayload(try #require(tokens.idToken))["name"] as? String == name)
            let profile = try await client.call(Path.profile, .get, bearer: tokens.accessToken).decode(ProfileResponse.self)
            #expect(profile.data["displayName"] == .string(name))
            #expect(profile.data["city"] == .string(city))
        }
    }

    /// Controls, every invisible format character but the zero-width joiner, private-use and unassigned code points.
    @Test func theRefusedCharactersAreControlsFormatCharactersAndUnassignedOnes() {
        let refused: [UInt32] = [
            0x00, 0x09, 0x1F, 0x7F, 0x80, 0x85, 0x9F, 0x061C, 0x200E, 0x200F, 0x202A, 0x202E, 0x2066, 0x2069,
            0x00AD, 0x200B, 0x2061, 0x2065, 0x206A, 0xFEFF, 0xFFF9, 0xFFFF, 0xE000, 0xE0041, 0x10FFFF,
        ]
        let allowed: [UInt32] = [0x20, 0x7E, 0xA0, 0xE9, 0x0627, 0x200D, 0x202F, 0xFE0F, 0x1F600, 0x1F3FD]
        for value in refused { #expect(NativeAuthService.isRefusedInAttribute(Unicode.Scalar(value)!), "U+\(String(value, radix: 16))") }
        for value in allowed { #expect(!NativeAuthService.isRefusedInAttribute(Unicode.Scalar(value)!), "U+\(String(value, radix: 16))") }
    }
}
