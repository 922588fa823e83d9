import Foundation

// What `dump`, a debugger or a crash reporter shows of the SDK's objects: never a token or a password. A state's
// continuation token (after a verified code it may set the account's password or sign in), an account's tokens, a
// parameter object's password and the cache behind an app or a client are written as `<redacted>` or left out;
// `print` of these classes shows their type name only.

/// What the SDK's descriptions and mirrors show in place of a secret.
let redacted = "<redacted>"

/// An optional secret as descriptions show it: `nil`, or ``redacted``.
func redacted(_ secret: String?) -> String { secret == nil ? "nil" : redacted }

/// The mirror of a native-auth state: its flow's username and correlation id, its continuation token redacted.
private func stateMirror(_ subject: Any, _ context: FlowContext) -> Mirror {
    Mirror(subject, children: ["username": context.username, "correlationId": context.correlationId, "continuationToken": redacted])
}

extension SignUpCodeRequiredState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension SignUpPasswordRequiredState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension SignUpAttributesRequiredState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension SignInAfterSignUpState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension SignInCodeRequiredState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension SignInPasswordRequiredState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension ResetPasswordCodeRequiredState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension ResetPasswordRequiredState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }
extension SignInAfterResetPasswordState: CustomReflectable { public var customMirror: Mirror { stateMirror(self, context) } }

extension NativeAuthUserAccountResult: CustomReflectable {
    public var customMirror: Mirror { Mirror(self, children: ["account": account, "idToken": redacted(idToken)]) }
}

extension NativeAuthEngine: CustomReflectable {
    var customMirror: Mirror { Mirror(self, children: ["appId": configuration.appId, "clientId": configuration.clientId]) }
}

extension AppCore: CustomReflectable {
    var customMirror: Mirror { Mirror(self, children: ["appId": appId, "storeKey": storeKey]) }
}

extension StoredUser: CustomReflectable {
    var customMirror: Mirror {
        Mirror(self, children: [
            "id": id, "loggedIn": loggedIn, "accessToken": redacted(accessToken), "refreshToken": redacted(refreshToken),
            "identities": identities, "lastLogin": lastLogin,
        ])
    }
}

extension SignUpParameters: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: ["username": username, "password": redacted(password), "correlationId": correlationId as Any])
    }
}

extension SignInParameters: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(self, children: ["username": username, "password": redacted(password), "scopes": scopes as Any])
    }
}
