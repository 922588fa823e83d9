import Foundation
import Testing

@testable import Gatehouse
import GatehouseWire

/// What every request shares: retries, statuses, the redirect fallback.
@Suite struct NativeAuthTransportTests {
    static let email = "ada@example.com"
    static func start(_ reply: Exchange.Reply) -> Exchange { Exchange(endpoint: .resetPasswordStart, fields: Form.start(email), reply: reply) }
    static let challenge = Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct1"), reply: Reply.codeSent("ct2"))

    @Test(arguments: [
        Exchange.Reply.answer(status: 500, body: "oops", headers: [:]),
        .answer(status: 503, body: "", headers: [:]),
        .unreachable,
        .lost,
    ])
    func aStartIsRetriedOnceAfterAServerErrorOrAFailedConnection(_ failure: Exchange.Reply) async throws {
        let harness = Harness([Self.start(failure), Self.start(Reply.continuation("ct1")), Self.challenge])
        _ = try await harness.client.resetPassword(username: Self.email)
        harness.verify()
    }

    /// A step that spends its continuation token (here the reset's challenge, which mails a code) is not sent again
    /// when the first try's outcome is unknown — a 5xx, or no answer after the request went out: the server may have
    /// spent the token (a second try is `invalid_grant`) or acted. The caller hears a general error.
    @Test(arguments: [
        Exchange.Reply.answer(status: 502, body: "bad gateway", headers: [:]),
        .answer(status: 503, body: "", headers: [:]),
        .lost,
    ])
    func aStepThatSpendsItsTokenIsNotSentAgainWhenItsOutcomeIsUnknown(_ failure: Exchange.Reply) async throws {
        let harness = Harness([
            Self.start(Reply.continuation("ct1")), Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct1"), reply: failure),
        ])
        let error = try #require(
            await thrown { () async throws(ResetPasswordStartError) in try await harness.client.resetPassword(username: Self.email) }
        )
        #expect(error.kind == .generalError)
        #expect(harness.transport.seen.count == 2)
        harness.verify()
    }

    /// The same step is sent again when its first try never reached the server: nothing can have been spent.
    @Test func aStepWhoseConnectionCouldNotBeMadeIsSentAgain() async throws {
        let harness = Harness([
            Self.start(Reply.continuation("ct1")),
            Exchange(endpoint: .resetPasswordChallenge, fields: Form.challenge("ct1"), reply: .unreachable),
            Self.challenge,
        ])
        _ = try await harness.client.resetPassword(username: Self.email)
        harness.verify()
    }

    @Test(arguments: [Exchange.Reply.answer(status: 502, body: "bad gateway", headers: [:]), .unreachable])
    func twoFailuresInARowAreAGeneralError(_ failure: Exchange.Reply) async throws {
        let harness = Harness([Self.start(failure), Self.start(failure)])
        let error = try #require(
            await thrown { () async throws(ResetPasswordStartError) in try await harness.client.resetPassword(username: Self.email) }
        )
        #expect(error.kind == .generalError)
        harness.verify()
    }

    @Test(arguments: [
        Exchange.Reply.answer(status: 429, body: #"{"error":"slow_down","error_description":"wait","error_codes":[],"retry_after":5}"#, headers: [:]),
        .answer(status: 404, body: "not found", headers: [:]),
        .answer(status: 400, body: "<html>proxy</html>", headers: [:]),
        .answer(status: 200, body: "not json", headers: [:]),
        .answer(status: 200, body: #"{"challenge_type":"oob"}"#, headers: [:]),
    ])
    func otherAnswersAreAGeneralErrorWithoutARetry(_ answer: Exchange.Reply) async throws {
        let harness = Harness([Self.start(answer)])
        let error = try #require(
            await thrown { () async throws(ResetPasswordStartError) in try await harness.client.resetPassword(username: Self.email) }
        )
        #expect(error.kind == .generalError)
        harness.verify()
    }

    @Test func a401BodyIsDecoded() async throws {
        let harness = Harness([Self.start(Reply.error("user_not_found", "decoded", status: 401))])
        let error = try #require(
            await thrown { () async throws(ResetPasswordStartError) in try await harness.client.resetPassword(username: Self.email) }
        )
        #expect(error.isUserNotFound)
        #expect(error.errorDescription == "decoded")
        harness.verify()
    }

    @Test func everyErrorTypeSaysWhatItIs() {
        let error = SignInStartError(kind: .userNotFound, info: .init(description: "nobody", correlationId: UUID()), keepsState: false)
        #expect(error.description == "SignInStartError.userNotFound: nobody")
        #expect(error.localizedDescription == "nobody")
    }
}
