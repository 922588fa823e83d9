import Foundation

/// Email/password accounts: registration, confirmation, password reset and undoing an email change
/// (`app.emailPasswordAuth`).
public struct EmailPasswordAuth: Sendable {
    let core: AppCore

    private func post(_ route: String, _ body: [String: JSONValue]) async throws {
        _ = try await core.request("POST", "/api/client/v2.0/app/\(core.appId)/auth/providers/local-userpass/\(route)", body: .object(body))
    }

    /// Registers a new account. Depending on the app it is confirmed at once or pending an emailed link.
    public func registerUser(email: String, password: String) async throws {
        try await post("register", ["email": .string(email), "password": .string(password)])
    }

    /// Completion form of ``registerUser(email:password:)``.
    public func registerUser(email: String, password: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.registerUser(email: email, password: password) }
    }

    /// Confirms an account with the `token` and `tokenId` of its confirmation link.
    public func confirmUser(_ token: String, tokenId: String) async throws {
        try await post("confirm", ["token": .string(token), "tokenId": .string(tokenId)])
    }

    /// Completion form of ``confirmUser(_:tokenId:)``.
    public func confirmUser(_ token: String, tokenId: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.confirmUser(token, tokenId: tokenId) }
    }

    /// Sends a new confirmation email; older links stop working.
    public func resendConfirmationEmail(_ email: String) async throws {
        try await post("confirm/send", ["email": .string(email)])
    }

    /// Completion form of ``resendConfirmationEmail(_:)``.
    public func resendConfirmationEmail(_ email: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.resendConfirmationEmail(email) }
    }

    /// Runs the app's confirmation function again for a pending account.
    public func retryCustomConfirmation(_ email: String) async throws {
        try await post("confirm/call", ["email": .string(email)])
    }

    /// Completion form of ``retryCustomConfirmation(_:)``.
    public func retryCustomConfirmation(_ email: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.retryCustomConfirmation(email) }
    }

    /// Emails a password reset link.
    public func sendResetPasswordEmail(_ email: String) async throws {
        try await post("reset/send", ["email": .string(email)])
    }

    /// Completion form of ``sendResetPasswordEmail(_:)``.
    public func sendResetPasswordEmail(_ email: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.sendResetPasswordEmail(email) }
    }

    /// Sets a new password with the `token` and `tokenId` of a reset link. Every session of the user ends.
    public func resetPassword(to password: String, token: String, tokenId: String) async throws {
        try await post("reset", ["password": .string(password), "token": .string(token), "tokenId": .string(tokenId)])
    }

    /// Completion form of ``resetPassword(to:token:tokenId:)``.
    public func resetPassword(to password: String, token: String, tokenId: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.resetPassword(to: password, token: token, tokenId: tokenId) }
    }

    /// Undoes a change of a user's email address with the `token` and `tokenId` of the link the old address was
    /// mailed (``User/confirmEmailChange(code:)``; the link works for 7 days, even after later changes). For the
    /// owner of the old address who did not make the change: the old address comes back, and everything whoever
    /// made it could have added goes. Every session of the user ends (each device's ``User`` is logged out at its
    /// next call), and so do its API keys, its other identities and addresses, and its password: sign in again
    /// after a reset (``sendResetPasswordEmail(_:)`` to the old address).
    ///
    /// - Throws: ``AppError`` `badRequest` ("invalid token data") for a link that is wrong, expired or used.
    public func undoEmailChange(token: String, tokenId: String) async throws {
        try await post("email/undo", ["token": .string(token), "tokenId": .string(tokenId)])
    }

    /// Completion form of ``undoEmailChange(token:tokenId:)``.
    public func undoEmailChange(token: String, tokenId: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        core.complete(completion) { try await self.undoEmailChange(token: token, tokenId: tokenId) }
    }

    /// Asks the app's reset function to set a new password; `args` are passed to it as Extended JSON.
    public func callResetPasswordFunction(email: String, password: String, args: [AnyBSON]) async throws {
        try await post("reset/call", ["email": .string(email), "password": .string(password), "arguments": .array(args.map(\.extendedJSON))])
    }

    /// Completion form of ``callResetPasswordFunction(email:password:args:)``.
    public func callResetPasswordFunction(
        email: String,
        password: String,
        args: [AnyBSON],
        _ completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
        core.complete(completion) { try await self.callResetPasswordFunction(email: email, password: password, args: args) }
    }
}
