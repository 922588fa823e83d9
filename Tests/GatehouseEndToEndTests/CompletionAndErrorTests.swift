import Foundation
import Gatehouse
import GatehouseDomain
import GatehouseServer
import Testing

/// Completion handlers give the same results as the async forms, on the configured queue, and every server error
/// reaches the caller with its code, message, link and status.
@Suite struct CompletionAndErrorTests {
    static let queueKey = DispatchSpecificKey<String>()

    /// Runs a completion-form call and returns its outcome, checking it ran on `queue`.
    func completion<T: Sendable>(on queue: DispatchQueue, _ call: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void) async -> Result<T, any Error> {
        await withCheckedContinuation { done in
            call { result in
                #expect(DispatchQueue.getSpecific(key: Self.queueKey) == queue.label)
                done.resume(returning: result)
            }
        }
    }

    func completion(on queue: DispatchQueue, _ call: (@escaping @Sendable ((any Error)?) -> Void) -> Void) async -> (any Error)? {
        await withCheckedContinuation { done in
            call { error in
                #expect(DispatchQueue.getSpecific(key: Self.queueKey) == queue.label)
                done.resume(returning: error)
            }
        }
    }

    @Test func completionFormsMatchAsyncForms() async throws {
        try await withLiveServer(reveal: true) { server in
            let queue = DispatchQueue(label: "callbacks-\(UUID().uuidString)")
            queue.setSpecific(key: Self.queueKey, value: queue.label)
            let app = server.app(queue: queue)
            let auth = app.emailPasswordAuth

            #expect(await completion(on: queue) { auth.registerUser(email: "cb@example.com", password: "correct horse", completion: $0) } == nil)
            let viaCompletion = await completion(on: queue) { auth.registerUser(email: "cb@example.com", password: "correct horse", completion: $0) }
            let viaAsync = await #expect(throws: AppError.self) { try await auth.registerUser(email: "cb@example.com", password: "correct horse") }
            #expect((viaCompletion as? AppError) == viaAsync)

            let link = try await server.latestLink("cb@example.com")
            #expect(await completion(on: queue) { auth.confirmUser(link.token, tokenId: link.tokenId, completion: $0) } == nil)
            let asyncUser = try await app.login(credentials: .emailPassword(email: "cb@example.com", password: "correct horse"))
            let completionUser = try await completion(on: queue) { app.login(credentials: .emailPassword(email: "cb@example.com", password: "correct horse"), $0) }.get()
            #expect(completionUser == asyncUser)

            let profile = try await completion(on: queue) { asyncUser.refreshProfile($0) }.get()
            #expect(profile == (try await asyncUser.refreshProfile()))
            let data = try await completion(on: queue) { asyncUser.refreshCustomData($0) }.get()
            #expect(data == (try await asyncUser.refreshCustomData()))

            let wrongLogin = await completion(on: queue) { app.login(credentials: .emailPassword(email: "cb@example.com", password: "wrong"), $0) }
            let wrongAsync = await #expect(throws: AppError.self) { try await app.login(credentials: .emailPassword(email: "cb@example.com", password: "wrong")) }
            #expect((wrongLogin.failureValue as? AppError) == wrongAsync)

            #expect(await completion(on: queue) { asyncUser.logOut($0) } == nil)
            #expect(asyncUser.state == .loggedOut)
        }
    }

    @Test func everyErrorCodeReachesTheCallerIntact() async throws {
        try await withLiveServer(reveal: true) { server in
            let app = server.app()
            let auth = app.emailPasswordAuth
            func expectCode(_ code: AppError.Code, _ status: Int, _ message: String? = nil, _ call: () async throws -> Void) async {
                let error = await #expect(throws: AppError.self) { try await call() }
                #expect(error?.code == code)
                #expect(error?.httpStatus == status)
                #expect(error?.link?.hasSuffix("/openapi.yaml") == true)
                if let message { #expect(error?.message == message) }
            }
            try await server.signUp(app, "codes@example.com")
            await expectCode(.accountNameInUse, 409, "name already in use") { try await auth.registerUser(email: "codes@example.com", password: "correct horse") }
            await expectCode(.badRequest, 400, "email invalid") { try await auth.registerUser(email: "nope", password: "correct horse") }
            await expectCode(.badRequest, 400, "invalid token data") { try await auth.confirmUser("00", tokenId: "000000000000000000000000") }
            await expectCode(.userAlreadyConfirmed, 409) { try await auth.resendConfirmationEmail("codes@example.com") }
            await expectCode(.userNotFound, 404) { try await auth.resendConfirmationEmail("nobody@example.com") }
            await expectCode(.userNotFound, 404) { try await auth.sendResetPasswordEmail("nobody@example.com") }
            await expectCode(.invalidPassword, 401, "unauthorized") { _ = try await app.login(credentials: .emailPassword(email: "codes@example.com", password: "wrong")) }
            await expectCode(.authProviderNotFound, 404) { _ = try await app.login(credentials: .facebook(accessToken: "EAA")) }
            await expectCode(.invalidPassword, 401, "invalid custom auth token: invalid number of segments") {
                _ = try await app.login(credentials: .jwt(token: "not-a-jwt"))
            }
            await expectCode(.appNotFound, 404) { _ = try await server.app(id: "no-such-app").login(credentials: .emailPassword(email: "a@b.co", password: "x")) }
        }
    }

    @Test func anUnreachableServerIsATransportError() async throws {
        // A port nothing listens on: bind one, then close it.
        let app = App(
            id: "test-app",
            configuration: AppConfiguration(baseURL: "http://127.0.0.1:1", userStore: InMemoryUserStore(), requestTimeout: 5)
        )
        let error = await #expect(throws: ClientError.self) { try await app.emailPasswordAuth.registerUser(email: "a@b.co", password: "correct horse") }
        #expect(error?.isTransport == true)
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
