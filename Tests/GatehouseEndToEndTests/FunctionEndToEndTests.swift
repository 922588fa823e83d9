import Foundation
import Gatehouse
import GatehouseDomain
import GatehouseServer
import GatehouseWire
import NIOConcurrencyHelpers
import Testing

/// The SDK's `retryCustomConfirmation`, `callResetPasswordFunction` and `Credentials.function` against a live
/// server whose functions are Swift closures (Gatehouse embedded as a library).
// Outbound calls have deadlines; the limit turns anything that still hangs into a named failure.
@Suite(.timeLimit(.minutes(3))) struct FunctionEndToEndTests {
    /// What the closures were called with.
    final class Calls: Sendable {
        let confirmations = NIOLockedValueBox<[ConfirmationCall]>([])
        let resets = NIOLockedValueBox<[ResetCall]>([])
    }

    static func handlers(_ calls: Calls) -> FunctionHandlers {
        FunctionHandlers(
            confirmation: { call in
                calls.confirmations.withLockedValue { $0.append(call) }
                // Pending at registration, confirmed when retried.
                return calls.confirmations.withLockedValue { $0.count } > 1 ? .success : .pending
            },
            reset: { call in
                calls.resets.withLockedValue { $0.append(call) }
                return call.arguments == [.string("let me in")] ? .success : .fail
            },
            customLogin: { _, payload in
                guard case .string(let badge)? = payload["badge"] else { return .refused("no badge") }
                return .user(id: badge, name: "Badge \(badge)")
            }
        )
    }

    @Test func confirmationAndResetFunctionsAndFunctionLoginThroughTheSDK() async throws {
        let calls = Calls()
        // An app that reveals user existence runs the functions inside the request, as App Services does, so the SDK
        // sees their verdicts.
        try await withLiveServer(reveal: true, functions: Self.handlers(calls)) { server in
            let app = server.app()
            let auth = app.emailPasswordAuth
            try await auth.registerUser(email: "fn@example.com", password: "first password")
            await #expect(throws: AppError.self) { try await app.login(credentials: .emailPassword(email: "fn@example.com", password: "first password")) }
            try await auth.retryCustomConfirmation("fn@example.com")
            #expect(calls.confirmations.withLockedValue { $0.count } == 2)
            let user = try await app.login(credentials: .emailPassword(email: "fn@example.com", password: "first password"))

            try await auth.callResetPasswordFunction(email: "fn@example.com", password: "second password", args: ["let me in"])
            #expect(calls.resets.withLockedValue { $0.first?.username } == "fn@example.com")
            // The reset ended the session; the new password works.
            _ = try await app.login(credentials: .emailPassword(email: "fn@example.com", password: "second password"))
            let refused = await #expect(throws: AppError.self) {
                try await auth.callResetPasswordFunction(email: "fn@example.com", password: "third password", args: ["please"])
            }
            #expect(refused?.message == "failed to reset password for user \"fn@example.com\"")
            #expect(user.id.count == 24)

            let badge = try await app.login(credentials: .function(payload: ["badge": "b-12"]))
            #expect(badge.identities.map(\.providerType) == ["custom-function"])
            #expect(badge.profile.name == "Badge b-12")
            let again = try await app.login(credentials: .function(payload: ["badge": "b-12"]))
            #expect(again.id == badge.id)
            let noBadge = await #expect(throws: AppError.self) { try await app.login(credentials: .function(payload: [:])) }
            #expect(noBadge?.code == .invalidPassword)
        }
    }
}
