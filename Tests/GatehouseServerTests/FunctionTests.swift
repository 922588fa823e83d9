import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import Hummingbird
import HummingbirdTesting
import Testing

/// `Tests/Tools/webhook_receiver.py`, run on a loopback port: it verifies every call's Standard Webhooks signature
/// with the official Python library and answers as the call asks (see the script).
final class WebhookReceiver: Sendable {
    let child: ChildProcess
    let directory: URL
    let port: Int

    var url: String { "http://127.0.0.1:\(port)/hook" }
    var log: URL { directory.appendingPathComponent("calls.jsonl") }
    /// The file whose creation lets the receiver's held calls (a `held…` username) answer `success`.
    var releaseFile: URL { directory.appendingPathComponent("release") }

    /// Lets every held call answer, now and from now on.
    func release() throws {
        try Data().write(to: releaseFile)
    }

    struct Call: Decodable {
        var verified: Bool
        var headers: [String: String]
        var body: [String: JSONValue]?
    }

    /// Every call received so far, in order.
    var calls: [Call] {
        get throws {
            guard let text = try? String(contentsOf: log, encoding: .utf8) else { return [] }
            return try text.split(separator: "\n").map { try JSONDecoder().decode(Call.self, from: Data($0.utf8)) }
        }
    }

    private init(child: ChildProcess, directory: URL, port: Int) {
        (self.child, self.directory, self.port) = (child, directory, port)
    }

    static func start(secret: String) async throws -> WebhookReceiver {
        let directory = try temporaryDirectory()
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Tools/webhook_receiver.py")
        do {
            let (child, port) = try await startListeningTool(script.path, [
                "--secret", secret, "--log", directory.appendingPathComponent("calls.jsonl").path, "--slow", "8",
                "--release", directory.appendingPathComponent("release").path,
            ])
            return WebhookReceiver(child: child, directory: directory, port: port)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Kills it, waits for it (suspending, not blocking a thread), and removes its folder.
    func stop() async {
        await child.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` with a fresh receiver, stopped afterwards whatever happens.
    static func with<T>(secret: String, _ body: (WebhookReceiver) async throws -> T) async throws -> T {
        let receiver = try await start(secret: secret)
        do {
            let result = try await body(receiver)
            await receiver.stop()
            return result
        } catch {
            await receiver.stop()
            throw error
        }
    }
}

// Outbound calls have deadlines; the limit turns anything that still hangs into a named failure.
@Suite(.timeLimit(.minutes(3))) struct FunctionTests {
    static let secret = "whsec_" + Data("a webhook secret of 32 bytes!!!!".utf8).base64EncodedString()

    /// test-app with confirmation and reset functions and the custom-function provider, all on `receiver`. With
    /// `reveal` (the default here) the functions run inside the request, as App Services runs them.
    static func configuration(
        _ receiver: WebhookReceiver, secret: String = secret, timeout: TimeInterval = 5, confirmation: LocalUserpassConfiguration.Confirmation = .function,
        reveal: Bool = true
    ) -> GatehouseConfiguration {
        var config = testConfiguration(reveal: reveal)
        let hook = WebhookSettings(url: receiver.url, secret: secret, timeout: timeout)
        config.apps[0].localUserpass?.confirmation = confirmation
        config.apps[0].localUserpass?.confirmationFunction = hook
        config.apps[0].localUserpass?.reset = .function
        config.apps[0].localUserpass?.resetFunction = hook
        config.apps[0].customFunction = .some(hook)
        return config
    }

    func withReceiver(
        timeout: TimeInterval = 5, gatehouseSecret: String = secret, confirmation: LocalUserpassConfiguration.Confirmation = .function,
        reveal: Bool = true, _ body: @escaping @Sendable (WebhookReceiver, AuthServer, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await WebhookReceiver.with(secret: Self.secret) { receiver in
            // Receivers refuse calls whose webhook-timestamp is more than five minutes off their clock: start at now.
            try await withGatehouse(Self.configuration(receiver, secret: gatehouseSecret, timeout: timeout, confirmation: confirmation, reveal: reveal), clock: ManualClock(Date())) { gatehouse, client in
                try await body(receiver, gatehouse, client)
            }
        }
    }

    @Test func theConfirmationFunctionDecidesAtRegistration() async throws {
        try await withReceiver { receiver, gatehouse, client in
            #expect(try await client.register("success@example.com").status == .created)
            #expect(try await client.login("success@example.com").status == .ok)

            #expect(try await client.register("pending@example.com").status == .created)
            #expect(try await client.login("pending@example.com").error?.error == "confirmation required")
            // The function got the token; confirming with it (as the app's backend would) confirms the account.
            let call = try #require(try receiver.calls.last?.body)
            #expect(call["type"] == "confirmation")
            #expect(call["username"] == "pending@example.com")
            #expect(call["password"] == nil)
            let confirm = try await client.call(
                Path.local("confirm"), json: ConfirmRequest(token: try #require(call["token"]?.stringValue), tokenId: try #require(call["tokenId"]?.stringValue))
            )
            #expect(confirm.status == .ok)
            #expect(try await client.login("pending@example.com").status == .ok)

            let failed = try await client.register("fail@example.com")
            #expect(failed.status == .badRequest)
            #expect(failed.error?.error == "failed to confirm user \"fail@example.com\"")
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "fail@example.com") == nil)
            // No email is sent for function confirmation.
            #expect(try await client.mailbox("pending@example.com").isEmpty)
            // Every call was signed, and the library of another implementation verified it.
            let calls = try receiver.calls
            #expect(calls.count == 3)
            #expect(calls.allSatisfy { $0.verified && $0.headers["webhook-signature"]?.hasPrefix("v1,") == true })
            #expect(Set(calls.map { $0.headers["webhook-id"] ?? "" }).count == 3)
        }
    }

    /// A confirmation function's `success` vouches for the registrant; it proves nothing about the mailbox (a function
    /// may answer on the domain alone, as this receiver does). So a squatter it confirmed keeps nothing once the
    /// owner proves the mailbox: the owner's first reset discards the squatter's API key and sessions, whether the
    /// function ran inside the request or after the answer.
    @Test(arguments: [true, false]) func aConfirmationFunctionsSuccessProvesNoMailbox(reveal: Bool) async throws {
        try await WebhookReceiver.with(secret: Self.secret) { receiver in
            var config = Self.configuration(receiver, reveal: reveal)
            config.apps[0].localUserpass?.reset = .email
            try await withGatehouse(config, clock: ManualClock(Date())) { gatehouse, client in
                #expect(try await client.register("success-owner@example.com", "the squatter's password").status == .created)
                await gatehouse.env.background.drain()
                let confirmed = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "success-owner@example.com"))
                #expect(confirmed.confirmedAt != nil && confirmed.mailboxProvenAt == nil)
                let squatter = try await client.login("success-owner@example.com", "the squatter's password").decode(LoginResponse.self)
                let key = try await client.createKey("backdoor", refreshToken: squatter.refreshToken)

                #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: "success-owner@example.com")).status == .ok)
                let link = try await client.latestLink("success-owner@example.com")
                let reset = ResetPasswordRequest(password: "the owner's password", token: link.token, tokenId: link.tokenId)
                #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
                #expect(try await client.loginWithKey(try #require(key.key)).status == .unauthorized)
                #expect(try await client.call(Path.session, bearer: squatter.refreshToken).status == .unauthorized)
                #expect(try await client.login("success-owner@example.com", "the owner's password").decode(LoginResponse.self).userId == squatter.userId)
            }
        }
    }

    /// Two registrations name one address of an app that hides existence, and the confirmation function says `success`
    /// for each after both were answered: the registration is contested (the second replaced the first), so nobody
    /// can tell whose password is the owner's, and the function's `success` confirms neither. The owner's reset still
    /// works.
    @Test func aConfirmationFunctionsSuccessConfirmsNoPasswordOfAContestedRegistration() async throws {
        try await WebhookReceiver.with(secret: Self.secret) { receiver in
            // The receiver holds both calls until released: the longest timeout, or a busy machine's slow
            // registrations can outlast the first call's, and an unanswered function discards the registration.
            var config = Self.configuration(receiver, timeout: 60, reveal: false)
            config.apps[0].localUserpass?.reset = .email
            try await withGatehouse(config, clock: ManualClock(Date())) { gatehouse, client in
                let address = "held-owner@example.com"
                #expect(try await client.register(address, "the owner's password").status == .created)
                #expect(try await client.register(address, "the squatter's password").status == .created)
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: address)?.contestedAt != nil)
                try receiver.release()
                await gatehouse.env.background.drain()
                #expect(try receiver.calls.filter { $0.body?["type"] == "confirmation" }.count == 2)

                let account = try #require(try await gatehouse.env.store.emailAccount(appId: "test-app", email: address))
                #expect(account.confirmedAt != nil && account.mailboxProvenAt == nil && account.passwordHash.isEmpty)
                for password in ["the owner's password", "the squatter's password"] {
                    #expect(try await client.login(address, password).status == .unauthorized, "\(password)")
                }
                #expect(try await client.call(Path.local("reset/send"), json: EmailRequest(email: address)).status == .ok)
                let link = try await client.latestLink(address)
                let reset = ResetPasswordRequest(password: "the owner's new password", token: link.token, tokenId: link.tokenId)
                #expect(try await client.call(Path.local("reset"), json: reset).status == .ok)
                #expect(try await client.login(address, "the owner's new password").status == .ok)
            }
        }
    }

    @Test func anUnreachableSlowOrMalformedFunctionCreatesNothing() async throws {
        try await withReceiver(timeout: 4) { receiver, gatehouse, client in
            for email in ["slow@example.com", "garbage@example.com", "error@example.com"] {
                let reply = try await client.register(email)
                #expect(reply.status == .badGateway, "\(email): \(reply.text)")
                #expect(reply.error?.errorCode == .httpError)
                #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: email) == nil)
            }
            #expect(try receiver.calls.count == 3)
        }
    }

    @Test func aWrongSecretIsRefusedByTheReceiver() async throws {
        let other = "whsec_" + Data("another secret, also 32 bytes!!!".utf8).base64EncodedString()
        try await withReceiver(gatehouseSecret: other) { receiver, gatehouse, client in
            let reply = try await client.register("success@example.com")
            #expect(reply.status == .badGateway)
            #expect(try receiver.calls.map(\.verified) == [false])
            #expect(try await gatehouse.env.store.emailAccount(appId: "test-app", email: "success@example.com") == nil)
        }
    }

    @Test func retryingCustomConfirmation() async throws {
        try await withReceiver { receiver, _, client in
            #expect(try await client.register("pending-then@example.com").status == .created)
            let first = try #require(try receiver.calls.last?.body?["tokenId"]?.stringValue)
            let retry = try await client.call(Path.local("confirm/call"), json: EmailRequest(email: "pending-then@example.com"))
            #expect(retry.status == .ok)
            let second = try #require(try receiver.calls.last?.body)
            #expect(second["tokenId"]?.stringValue != first)
            // The first token was superseded by the second.
            #expect(try await client.call(Path.local("confirm"), json: ConfirmRequest(token: "00", tokenId: first)).status == .badRequest)
            let confirm = try await client.call(
                Path.local("confirm"), json: ConfirmRequest(token: try #require(second["token"]?.stringValue), tokenId: try #require(second["tokenId"]?.stringValue))
            )
            #expect(confirm.status == .ok)
        }
    }

    @Test func theResetFunctionNeverSeesThePasswordAndDecides() async throws {
        try await withReceiver(confirmation: .auto) { receiver, _, client in
            for email in ["success@example.com", "pending@example.com", "fail@example.com"] {
                #expect(try await client.register(email, "old password").status == .created)
            }
            func reset(_ email: String, _ password: String = "new password") async throws -> Reply {
                try await client.call(Path.local("reset/call"), json: CallResetFunctionRequest(email: email, password: password, arguments: ["because", 42]))
            }
            let login = try await client.login("success@example.com", "old password").decode(LoginResponse.self)
            #expect(try await reset("success@example.com").status == .ok)
            #expect(try await client.login("success@example.com", "new password").status == .ok)
            #expect(try await client.login("success@example.com", "old password").status == .unauthorized)
            // A reset ends the old sessions.
            #expect(try await client.call(Path.session, bearer: login.refreshToken).status == .unauthorized)

            #expect(try await reset("pending@example.com").status == .ok)
            #expect(try await client.login("pending@example.com", "new password").status == .unauthorized)
            let pending = try #require(try receiver.calls.last?.body)
            #expect(pending["arguments"] == ["because", 42])
            let finish = try await client.call(
                Path.local("reset"),
                json: ResetPasswordRequest(password: "chosen later", token: try #require(pending["token"]?.stringValue), tokenId: try #require(pending["tokenId"]?.stringValue))
            )
            #expect(finish.status == .ok)
            #expect(try await client.login("pending@example.com", "chosen later").status == .ok)

            let failed = try await reset("fail@example.com")
            #expect(failed.status == .badRequest)
            #expect(failed.error?.error == "failed to reset password for user \"fail@example.com\"")
            #expect(try await client.login("fail@example.com", "old password").status == .ok)
            // The token the function said no to is dead: it cannot set a password later.
            let refusedCall = try #require(try receiver.calls.last?.body)
            let late = try await client.call(
                Path.local("reset"),
                json: ResetPasswordRequest(password: "sneaky one", token: try #require(refusedCall["token"]?.stringValue), tokenId: try #require(refusedCall["tokenId"]?.stringValue))
            )
            #expect(late.status == .badRequest)
            #expect(try await client.login("fail@example.com", "old password").status == .ok)
            // This app reveals user existence: an unknown address is UserNotFound, without a call.
            let calls = try receiver.calls.count
            let unknown = try await reset("nobody@example.com")
            #expect(unknown.status == .notFound)
            #expect(unknown.error?.errorCode == .userNotFound)
            #expect(try receiver.calls.count == calls)
            #expect(try receiver.calls.allSatisfy { call in call.body?["password"] == nil && !(call.body.map { "\($0)" } ?? "").contains("new password") })
        }
    }

    /// An app that hides user existence answers `confirm/call` and `reset/call` with 200 for every address, before
    /// the function runs: its verdict and its latency would tell a known address from an unknown one. The function
    /// then runs for a known address, and its verdict takes effect.
    @Test func withoutRevealTheFunctionsRunAfterTheAnswer() async throws {
        try await withReceiver(reveal: false) { receiver, gatehouse, client throws in
            // Registration: every address gets 201; the function decides after the answer.
            for email in ["pending-later@example.com", "fail-later@example.com", "success-later@example.com"] {
                #expect(try await client.register(email).status == .created)
            }
            await gatehouse.env.background.drain()
            #expect(try receiver.calls.count == 3)
            let store = gatehouse.env.store
            #expect(try await store.emailAccount(appId: "test-app", email: "fail-later@example.com") == nil)
            #expect(try await store.emailAccount(appId: "test-app", email: "pending-later@example.com")?.confirmedAt == nil)
            #expect(try await store.emailAccount(appId: "test-app", email: "success-later@example.com")?.confirmedAt != nil)
            #expect(try await client.login("success-later@example.com").status == .ok)

            // confirm/call: the same 200 for a pending and an unknown address; only the pending one is called.
            for email in ["pending-later@example.com", "nobody@example.com"] {
                #expect(try await client.call(Path.local("confirm/call"), json: EmailRequest(email: email)).status == .ok)
            }
            await gatehouse.env.background.drain()
            #expect(try receiver.calls.count == 4)
            #expect(try receiver.calls.last?.body?["username"] == "pending-later@example.com")
        }
        try await withReceiver(confirmation: .auto, reveal: false) { receiver, gatehouse, client in
            for email in ["success@example.com", "fail@example.com"] {
                #expect(try await client.register(email, "old password").status == .created)
            }
            func reset(_ email: String) async throws -> Reply {
                try await client.call(Path.local("reset/call"), json: CallResetFunctionRequest(email: email, password: "new password", arguments: []))
            }
            for email in ["success@example.com", "fail@example.com", "nobody@example.com"] {
                let reply = try await reset(email)
                #expect(reply.status == .ok, "\(email): \(reply.text)")
                #expect(reply.text == "{}")
            }
            await gatehouse.env.background.drain()
            #expect(try receiver.calls.compactMap { $0.body?["username"]?.stringValue }.sorted() == ["fail@example.com", "success@example.com"])
            #expect(try await client.login("success@example.com", "new password").status == .ok)
            #expect(try await client.login("fail@example.com", "old password").status == .ok)
            #expect(try await client.login("fail@example.com", "new password").status == .unauthorized)
        }
    }

    @Test func customFunctionLogin() async throws {
        try await withReceiver(timeout: 4) { receiver, gatehouse, client in
            let path = Path.app() + "/auth/providers/custom-function/login"
            let first = try await client.call(path, body: #"{"answer":"user","externalId":"crm-7","name":"Seven","options":{"device":{"platform":"iOS"}}}"#)
            #expect(first.status == .ok, "\(first.text)")
            let user = try first.decode(LoginResponse.self)
            let again = try await client.call(path, body: #"{"answer":"user","externalId":"crm-7"}"#)
            #expect(try again.decode(LoginResponse.self).userId == user.userId)
            let profile = try await client.call(Path.profile, .get, bearer: user.accessToken).decode(ProfileResponse.self)
            #expect(profile.identities.map(\.providerType) == ["custom-function"])
            #expect(profile.identities.map(\.id) == ["crm-7"])
            // The payload reached the function without Gatehouse's options.
            #expect(try receiver.calls.first?.body?["payload"] == ["answer": "user", "externalId": "crm-7", "name": "Seven"])

            // Malformed options are the caller's mistake: 400, and the function is not called.
            let callsBefore = try receiver.calls.count
            let badOptions = try await client.call(path, body: #"{"answer":"user","externalId":"crm-7","options":"iOS"}"#)
            #expect(badOptions.status == .badRequest)
            #expect(badOptions.error?.errorCode == .invalidParameter)
            #expect(try receiver.calls.count == callsBefore)

            let refused = try await client.call(path, body: #"{"answer":"refuse"}"#)
            #expect(refused.status == .unauthorized)
            #expect(refused.error?.error == "custom function refused the login: not on the guest list")
            // An answer with an id and an error is a refusal: the error wins, and no user is made for the id.
            let both = try await client.call(path, body: #"{"answer":"both","externalId":"crm-8"}"#)
            #expect(both.status == .unauthorized)
            #expect(both.error?.error == "custom function refused the login: suspended")
            #expect(try await gatehouse.env.store.identity(appId: "test-app", providerType: "custom-function", externalId: "crm-8") == nil)
            for answer in ["slow", "garbage", "error"] {
                #expect(try await client.call(path, body: "{\"answer\":\"\(answer)\"}").status == .badGateway)
            }
        }
    }

    @Test func closuresStandInForWebhooksWhenEmbedded() async throws {
        // An app that reveals user existence, so that the functions' verdicts are the answers.
        var config = testConfiguration(reveal: true)
        config.apps[0].localUserpass?.confirmation = .function
        config.apps[0].localUserpass?.reset = .function
        config.apps[0].customFunction = .some(nil)
        let functions = FunctionHandlers(
            confirmation: { call in call.username.hasPrefix("ok") ? .success : .fail },
            reset: { _ in .fail },
            customLogin: { appId, payload in
                guard case .string(let id)? = payload["employee"] else { return .refused("who are you?") }
                return .user(id: "\(appId)/\(id)", name: nil)
            }
        )
        let gatehouse = try await AuthServer.open(configuration: config, logger: quietLogger, functions: functions)
        do {
            try await gatehouse.makeApplication().test(.router) { client in
                #expect(try await client.register("ok@example.com").status == .created)
                #expect(try await client.login("ok@example.com").status == .ok)
                #expect(try await client.register("no@example.com").status == .badRequest)
                let login = try await client.call(Path.app() + "/auth/providers/custom-function/login", body: #"{"employee":"e-1"}"#)
                #expect(login.status == .ok)
                #expect(try await client.call(Path.app() + "/auth/providers/custom-function/login", body: "{}").status == .unauthorized)
            }
            try await gatehouse.close()
        } catch {
            try? await gatehouse.close()
            throw error
        }
        // Without a webhook or a closure the configuration is refused before anything opens.
        await #expect(throws: ConfigurationError.self) { _ = try await AuthServer.open(configuration: config, logger: quietLogger) }
    }
}
