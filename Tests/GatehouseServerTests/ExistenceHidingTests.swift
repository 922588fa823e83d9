import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

/// With `revealUserExistence: false`, a known and an unknown address get the same answers.
@Suite struct ExistenceHidingTests {
    /// The parts of an answer that do not vary from call to call (nor with the address: the masked address an
    /// answer names is the caller's own).
    static func shape(_ reply: Reply) throws -> String {
        guard var object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any] else { return reply.text }
        for volatile in ["continuation_token", "trace_id", "correlation_id", "timestamp", "challenge_target_label"] where object[volatile] != nil { object[volatile] = "…" }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return "\(reply.status.code) " + String(decoding: data, as: UTF8.self)
    }

    /// The sign-in challenge depends on the app and the client, never on the account: unknown, pending, code-only
    /// and password accounts all get the same answer.
    @Test func theSignInChallengeIsTheSameForEveryAddress() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            #expect(try await client.register("pending@example.com").status == .created)
            _ = try await client.nativeSignUp("codes@example.com")
            _ = try await client.signUp("password@example.com")
            for types in [allChallengeTypes, "oob redirect", "password redirect"] {
                var shapes: [String: String] = [:]
                for email in ["nobody@example.com", "pending@example.com", "codes@example.com", "password@example.com"] {
                    let ct = try #require(try await client.nativeStep(.signInInitiate, ["username": email, "challenge_type": types]).continuationToken)
                    shapes[email] = try Self.shape(try await client.native(.signInChallenge, ["continuation_token": ct, "challenge_type": types]))
                }
                #expect(Set(shapes.values).count == 1, "\(types): \(shapes)")
            }
        }
    }

    /// A native sign-up for a taken address looks like any other to the caller; the owner gets a notice, never a
    /// code, and the flow can never complete.
    @Test func aNativeSignUpForATakenAddressTellsTheOwnerNotTheCaller() async throws {
        try await withGatehouse(nativeConfiguration()) { gatehouse, client in
            _ = try await client.signUp("taken@example.com", "owner password")
            var shapes: [String] = []
            var tokens: [String] = []
            for email in ["taken@example.com", "fresh@example.com"] {
                let start = try await client.native(.signUpStart, ["username": email, "challenge_type": allChallengeTypes, "password": "a new password"])
                let ct = try #require(start.step?.continuationToken)
                let challenge = try await client.native(.signUpChallenge, ["continuation_token": ct, "challenge_type": allChallengeTypes])
                shapes.append(try Self.shape(start) + " " + Self.shape(challenge))
                tokens.append(try #require(challenge.step?.continuationToken))
            }
            #expect(shapes[0] == shapes[1])
            let notice = try #require(try await client.mailbox("taken@example.com").first)
            #expect(notice.subject.contains("tried to create"))
            #expect(notice.text.firstMatch(of: /\d{8}/) == nil)
            // No code works for the taken address's flow.
            let guess = try await client.native(.signUpContinue, ["continuation_token": tokens[0], "grant_type": "oob", "oob": "12345678"])
            expectNativeError(guess, .invalidGrant, suberror: .invalidOOBValue)
            #expect(try await client.login("taken@example.com", "owner password").status == .ok)
            let events = try await gatehouse.env.store.auditEvents(appId: "test-app", userId: nil, afterSeq: nil, limit: 100)
            #expect(events.contains { $0.kind == AuditKind.registrationRefused.rawValue })
        }
    }

    /// `confirm/call` and `reset/call` answer 200 for any address (the functions run after the answer), and count
    /// the same per-address limit for each: the 429 comes at the same request for an unknown, a pending and a
    /// confirmed address.
    @Test func functionRoutesAnswerAndCountAlikeForEveryAddress() async throws {
        var config = testConfiguration()
        config.apps[0].localUserpass?.confirmation = .function
        config.apps[0].localUserpass?.reset = .function
        // Nothing listens there: the calls made for known addresses after the answer fail, which the caller never sees.
        let nowhere = WebhookSettings(url: "http://127.0.0.1:9/unreachable", secret: FunctionTests.secret, timeout: 2)
        config.apps[0].localUserpass?.confirmationFunction = nowhere
        config.apps[0].localUserpass?.resetFunction = nowhere
        let clock = ManualClock()
        let limit = config.apps[0].emailLimit
        try await withGatehouse(config, clock: clock) { gatehouse, client in
            for (email, confirmed) in [("confirmed@example.com", true), ("pending@example.com", false)] {
                let now = clock.now
                let user = UserRecord(id: Secrets.objectID(at: now), appId: "test-app", createdAt: now, disabled: false, customData: [:])
                let identity = IdentityRecord(
                    id: Secrets.objectID(at: now), userId: user.id, appId: "test-app", providerType: "local-userpass", externalId: email,
                    data: [:], createdAt: now
                )
                let account = EmailAccountRecord(
                    appId: "test-app", email: email, userId: user.id, passwordHash: "", confirmedAt: confirmed ? now : nil,
                    mailboxProvenAt: confirmed ? now : nil
                )
                try await gatehouse.env.store.createEmailUser(user: user, identity: identity, account: account, token: nil, mail: nil, recording: nil)
            }
            for (route, body) in [("confirm/call", #"{"email":"EMAIL"}"#), ("reset/call", #"{"email":"EMAIL","password":"a long password","arguments":[]}"#)] {
                var answers: [String: [String]] = [:]
                for email in ["nobody@example.com", "pending@example.com", "confirmed@example.com"] {
                    for _ in 0...limit {
                        let reply = try await client.call(Path.local(route), .post, body: body.replacingOccurrences(of: "EMAIL", with: email))
                        answers[email, default: []].append("\(reply.status.code) \(reply.status == .tooManyRequests ? "" : reply.text)")
                    }
                }
                #expect(Set(answers.values).count == 1, "\(route): \(answers)")
                #expect(answers["nobody@example.com"] == Array(repeating: "200 {}", count: limit) + ["429 "], "\(route)")
            }
            await gatehouse.env.background.drain()
        }
    }
}
