import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// Bad input gets the right 4xx in the Client API envelope, with `Content-Type: application/json` exactly.
@Suite struct ClientAPIErrorTests {
    /// Asserts the envelope shape and returns its body.
    @discardableResult
    func expectEnvelope(
        _ reply: Reply, _ status: HTTPResponse.Status, _ code: ClientAPIErrorCode, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ClientAPIErrorBody {
        #expect(reply.status == status, "\(reply.text)", sourceLocation: sourceLocation)
        #expect(reply.contentType == "application/json", sourceLocation: sourceLocation)
        let object = try #require(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any], sourceLocation: sourceLocation)
        #expect(Set(object.keys) == ["error", "error_code", "link"], sourceLocation: sourceLocation)
        let body = try #require(reply.error, sourceLocation: sourceLocation)
        #expect(body.errorCode == code, sourceLocation: sourceLocation)
        #expect(!body.error.isEmpty, sourceLocation: sourceLocation)
        return body
    }

    @Test func malformedJSONIsBadRequest() async throws {
        try await withGatehouse { _, client in
            for body in [#"{"email":"a@b.co","password":"#, "not json", "", "[1,2]", "\"text\""] {
                let reply = try await client.call(Path.local("register"), body: body)
                try expectEnvelope(reply, .badRequest, .badRequest)
            }
        }
    }

    @Test func missingFieldsAreMissingParameter() async throws {
        try await withGatehouse { _, client in
            let cases: [(String, String, String)] = [
                (Path.local("register"), #"{"email":"a@b.co"}"#, "password"),
                (Path.local("register"), #"{"password":"correct horse"}"#, "email"),
                (Path.local("confirm"), #"{"token":"aa"}"#, "tokenId"),
                (Path.local("confirm/send"), "{}", "email"),
                (Path.local("reset/send"), "{}", "email"),
                (Path.local("reset"), #"{"token":"a","tokenId":"b"}"#, "password"),
                (Path.local("login"), #"{"username":"a@b.co"}"#, "password"),
            ]
            for (path, body, field) in cases {
                let error = try expectEnvelope(try await client.call(path, body: body), .badRequest, .missingParameter)
                #expect(error.error.contains(field), "\(path): \(error.error)")
            }
        }
    }

    @Test func wrongTypesAreInvalidParameter() async throws {
        try await withGatehouse { _, client in
            let cases: [(String, String)] = [
                (Path.local("register"), #"{"email":42,"password":"correct horse"}"#),
                (Path.local("register"), #"{"email":"a@b.co","password":null}"#),
                (Path.local("confirm"), #"{"token":["x"],"tokenId":"b"}"#),
                (Path.local("login"), #"{"username":"a@b.co","password":true}"#),
                (Path.local("login"), #"{"username":"a@b.co","password":"x","options":"device"}"#),
            ]
            for (path, body) in cases {
                try expectEnvelope(try await client.call(path, body: body), .badRequest, .invalidParameter)
            }
        }
    }

    @Test func oversizedBodyIs413AndWritesNothing() async throws {
        try await withGatehouse { gatehouse, client in
            let padding = String(repeating: "x", count: 70 * 1024)
            let body = #"{"email":"big@example.com","password":"correct horse","pad":"\#(padding)"}"#
            try expectEnvelope(try await client.call(Path.local("register"), body: body), .contentTooLarge, .readSizeLimitExceeded)
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "big@example.com") == nil)
            // Just under the limit is fine.
            let small = #"{"email":"big@example.com","password":"correct horse","pad":"\#(String(repeating: "x", count: 60 * 1024))"}"#
            #expect(try await client.call(Path.local("register"), body: small).status == .created)
        }
    }

    @Test func unknownAppIs404() async throws {
        try await withGatehouse { _, client in
            try expectEnvelope(try await client.call(Path.app("nope") + "/location", .get), .notFound, .appNotFound)
            try expectEnvelope(try await client.register("a@example.com", app: "nope"), .notFound, .appNotFound)
            try expectEnvelope(try await client.login("a@example.com", app: "nope"), .notFound, .appNotFound)
        }
    }

    @Test func unknownRouteIs404Envelope() async throws {
        try await withGatehouse { _, client in
            try expectEnvelope(try await client.call("/nowhere", .get), .notFound, .notFound)
            try expectEnvelope(try await client.call("/api/client/v2.0/auth/unknown", .get), .notFound, .notFound)
            try expectEnvelope(try await client.call(Path.local("unknown")), .notFound, .notFound)
        }
    }

    @Test func unsupportedProviderIsAuthProviderNotFound() async throws {
        try await withGatehouse { _, client in
            let reply = try await client.call(Path.app() + "/auth/providers/oauth2-unknown/login", body: "{}")
            try expectEnvelope(reply, .notFound, .authProviderNotFound)
        }
    }

    @Test func disabledLocalUserpassIsAuthProviderNotFound() async throws {
        try await withGatehouse(testConfiguration(localUserpass: nil)) { _, client in
            try expectEnvelope(try await client.register("a@example.com"), .notFound, .authProviderNotFound)
            try expectEnvelope(try await client.login("a@example.com"), .notFound, .authProviderNotFound)
        }
    }

    @Test func missingOrMalformedBearerIs401() async throws {
        try await withGatehouse { _, client in
            try expectEnvelope(try await client.call(Path.profile, .get), .unauthorized, .invalidSession)
            try expectEnvelope(try await client.call(Path.session, bearer: "not-a-jwt"), .unauthorized, .invalidSession)
            try expectEnvelope(try await client.call(Path.session, bearer: "a.b.c"), .unauthorized, .invalidSession)
            try expectEnvelope(try await client.call(Path.delete, .delete, bearer: "e30.e30.e30"), .unauthorized, .invalidSession)
        }
    }

    @Test func successBodiesAreExactJSONToo() async throws {
        try await withGatehouse { _, client in
            let reply = try await client.call(Path.app() + "/location", .get)
            #expect(reply.status == .ok)
            #expect(reply.contentType == "application/json")
        }
    }
}
