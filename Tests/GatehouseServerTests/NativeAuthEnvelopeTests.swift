import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The native auth envelope and every error row of the spec's tables the server produces.
@Suite struct NativeAuthEnvelopeTests {
    @Test func appAndClientProblemsGetTheirErrors() async throws {
        var config = nativeConfiguration()
        config.apps[1].nativeAuth = nil  // auto-app: native auth off
        try await withGatehouse(config) { _, client in
            let start = ["username": "a@example.com", "challenge_type": allChallengeTypes]
            expectNativeError(try await client.native(.signUpStart, app: "no-such-app", start), .invalidRequest, code: NativeAuthErrorCode.appNotFound)
            let disabled = try await client.native(.signUpStart, app: "auto-app", start)
            expectNativeError(disabled, .invalidClient, code: NativeAuthErrorCode.nativeAuthDisabled, suberror: .nativeAuthAPIDisabled)

            var noClient = start
            noClient["client_id"] = ""
            let missing = try await client.native(.signUpStart, noClient)
            expectNativeError(missing, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
            #expect(missing.nativeError?.errorDescription.contains("client_id parameter is empty or not valid") == true)

            var otherClient = start
            otherClient["client_id"] = "android-app"
            expectNativeError(try await client.native(.signInInitiate, otherClient), .unauthorizedClient, code: NativeAuthErrorCode.unknownClient)

            for endpoint in [NativeAuthEndpoint.signUpStart, .signInInitiate, .resetPasswordStart] {
                let badName = try await client.native(endpoint, ["username": "not an email", "challenge_type": allChallengeTypes])
                expectNativeError(badName, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
                #expect(badName.nativeError?.errorDescription.contains("username parameter is empty or not valid") == true)
                let noRedirect = try await client.native(endpoint, ["username": "a@example.com", "challenge_type": "oob password"])
                expectNativeError(noRedirect, .unsupportedChallengeType, code: NativeAuthErrorCode.missingRedirectChallenge)
            }
        }
    }

    @Test func malformedRequestsAreInvalidRequestAndChangeNothing() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            func post(_ body: String, contentType: String = "application/x-www-form-urlencoded", path: String = NativeAuthEndpoint.signUpStart.path(appId: "test-app")) async throws -> Reply {
                try await client.execute(uri: path, method: .post, headers: [.contentType: contentType], body: ByteBuffer(string: body)) { response in
                    Reply(status: response.status, contentType: response.headers[.contentType], body: Data(response.body.readableBytesView), headers: response.headers)
                }
            }
            let json = try await post(#"{"client_id":"ios-app","username":"a@example.com"}"#, contentType: "application/json")
            expectNativeError(json, .invalidRequest)
            expectNativeError(try await post("client_id=ios-app&username=%E0%A4%A"), .invalidRequest)
            expectNativeError(try await post(""), .invalidRequest)
            expectNativeError(
                try await post("client_id=ios-app&username=a%40example.com&challenge_type=oob+redirect&attributes=%5B1%5D"), .invalidRequest
            )
            // A parameter of the protocol given twice is refused whichever copy comes first (a proxy that reads the
            // first and a server that read the last would disagree on the client); a field the protocol does not
            // have may repeat, since it is ignored.
            let start = "username=a%40example.com&challenge_type=oob+password+redirect"
            for repeated in ["client_id=ios-app&client_id=android-app", "client_id=android-app&client_id=ios-app", "client_id=ios-app&client_id=ios-app"] {
                let reply = try await post(repeated + "&" + start)
                expectNativeError(reply, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
                #expect(reply.nativeError?.errorDescription.contains("client_id parameter is given more than once") == true)
            }
            let twiceUsername = try await post("client_id=ios-app&username=b%40example.com&" + start)
            expectNativeError(twiceUsername, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
            #expect(twiceUsername.nativeError?.errorDescription.contains("username parameter is given more than once") == true)
            let extra = try await post("client_id=ios-app&x=1&x=2&" + start)
            #expect(extra.status == .ok, "\(extra.status) \(String(decoding: extra.body, as: UTF8.self))")
            let huge = try await post("client_id=ios-app&username=" + String(repeating: "a", count: 70_000))
            expectNativeError(huge, .invalidRequest, status: .contentTooLarge)
            let unknown = try await post("client_id=ios-app", path: "/native/test-app/signup/v1.0/finish")
            expectNativeError(unknown, .invalidRequest, status: .notFound)
            let grant = try await client.native(.token, ["grant_type": "client_credentials", "client_info": "true"])
            expectNativeError(grant, .unsupportedGrantType, code: NativeAuthErrorCode.unsupportedGrantType)
            let noToken = try await client.native(.signUpChallenge, ["challenge_type": allChallengeTypes])
            expectNativeError(noToken, .invalidRequest, code: NativeAuthErrorCode.invalidRequestParameter)
            // The one well-formed start above mailed nothing either (sign-up mails its code at the challenge).
            #expect(try await gatehouse.env.store.mailbox(recipient: nil, limit: 10).isEmpty)
        }
    }

    @Test func theCorrelationIdComesBack() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let id = "7f3c6a9e-3b7a-4c61-9a55-1b2f5d2b8e11"
            let header = HTTPField.Name("client-request-id")!
            let ok = try await client.native(.signUpStart, headers: [header: id], ["username": "c@example.com", "challenge_type": allChallengeTypes])
            #expect(ok.headers[header] == id)
            let failed = try await client.native(.signUpStart, headers: [header: id], ["username": "nope", "challenge_type": allChallengeTypes])
            #expect(failed.headers[header] == id)
            #expect(failed.nativeError?.correlationId == id)
        }
    }
}
