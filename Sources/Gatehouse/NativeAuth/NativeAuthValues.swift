import Foundation
internal import GatehouseWire

/// Where a code was sent (MSAL's `MSALNativeAuthChannelType`): the server's `challenge_channel`.
public struct NativeAuthChannelType: Sendable, Hashable, CustomStringConvertible {
    /// The channel as the server named it, such as `email`.
    public let value: String

    /// A channel named `value`.
    public init(value: String) { self.value = value }

    /// The code went by email.
    public var isEmailType: Bool { value.lowercased() == "email" }
    /// The code went by SMS.
    public var isSMSType: Bool { value.lowercased() == "sms" }
    /// MSAL 1.x's name for ``isSMSType``.
    @available(*, deprecated, renamed: "isSMSType")
    public var isPhoneType: Bool { isSMSType || value.lowercased() == "phone" }
    /// The channel's name.
    public var description: String { value }
}

/// An attribute the server still needs before it can create the account (MSAL's
/// `MSALNativeAuthRequiredAttribute`).
public struct RequiredAttribute: Sendable, Hashable {
    /// The attribute's name, the key to use in ``SignUpAttributesRequiredState/submitAttributes(_:)``.
    public let name: String
    /// Its input type (`string` on Gatehouse).
    public let type: String
    /// Whether the account cannot be created without it.
    public let required: Bool
    /// A regular expression the whole value must match, if the server has one.
    public let regex: String?

    /// An attribute with these properties.
    public init(name: String, type: String, required: Bool, regex: String? = nil) {
        self.name = name
        self.type = type
        self.required = required
        self.regex = regex
    }

    init(_ wire: NativeAuthRequiredAttribute) {
        self.init(name: wire.name, type: wire.type, required: wire.required, regex: wire.options?.regex)
    }
}

/// A code was sent and the flow waits for it: the state to submit it on, where it went, and how many characters it
/// has. What `resendCode()` returns, and what the reset password start returns.
public struct CodeSent<State: Sendable>: Sendable {
    /// The state that takes the code.
    public let newState: State
    /// The masked address the code went to, like `a***e@e******e.com`.
    public let sentTo: String
    /// The channel it went by.
    public let channelTargetType: NativeAuthChannelType
    /// The number of characters of the code.
    public let codeLength: Int
}

// MARK: - Results of the async forms

/// What ``NativeAuthClient/signUp(parameters:)`` leads to.
public enum SignUpStartResult: Sendable {
    /// A code was emailed: submit it on the state.
    case codeRequired(SignUpCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
    /// The server rejected these attributes (`attribute_validation_failed`). The flow is over: start again with
    /// corrected values.
    case attributesInvalid([String])
}

/// What ``SignUpCodeRequiredState/submitCode(_:)`` leads to.
public enum SignUpVerifyCodeResult: Sendable {
    /// The account exists: sign in with the state.
    case completed(SignInAfterSignUpState)
    /// The account needs a password: submit it on the state.
    case passwordRequired(SignUpPasswordRequiredState)
    /// The account needs these attributes: submit them on the state.
    case attributesRequired([RequiredAttribute], SignUpAttributesRequiredState)
}

/// What ``SignUpPasswordRequiredState/submitPassword(_:)`` leads to.
public enum SignUpPasswordRequiredResult: Sendable {
    /// The account exists: sign in with the state.
    case completed(SignInAfterSignUpState)
    /// The account needs these attributes: submit them on the state.
    case attributesRequired([RequiredAttribute], SignUpAttributesRequiredState)
}

/// What ``SignUpAttributesRequiredState/submitAttributes(_:)`` leads to.
public enum SignUpAttributesRequiredResult: Sendable {
    /// The account exists: sign in with the state.
    case completed(SignInAfterSignUpState)
    /// More attributes are needed: submit them on the new state.
    case attributesRequired([RequiredAttribute], SignUpAttributesRequiredState)
    /// The server rejected these attributes; submit corrected values on the state (the same one as before).
    case attributesInvalid([String], SignUpAttributesRequiredState)
}

/// What ``NativeAuthClient/signIn(parameters:)`` leads to.
public enum SignInStartResult: Sendable {
    /// A code was emailed: submit it on the state.
    case codeRequired(SignInCodeRequiredState, sentTo: String, channelTargetType: NativeAuthChannelType, codeLength: Int)
    /// The account has a password and none was given: submit it on the state.
    case passwordRequired(SignInPasswordRequiredState)
    /// Signed in.
    case completed(NativeAuthUserAccountResult)
}
