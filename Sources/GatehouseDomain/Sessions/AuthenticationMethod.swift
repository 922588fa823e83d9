/// How a session was proven, as RFC 8176 `amr` values: stored with the session (``SessionRecord/methods``) and
/// carried in its access and ID tokens, so that a backend verifying tokens with the JWKS can tell how the user signed
/// in.
package enum AuthenticationMethod: String, Sendable, Hashable, CaseIterable, Codable {
    /// A password the user held (`pwd`).
    case password = "pwd"
    /// A one-time code emailed to the account's address (`otp`): a native code sign-in, or the code of a sign-up or
    /// reset that a sign-in after it follows.
    case oneTimeCode = "otp"
    /// An identity provider or the app's own backend vouched for the user (`fed`): Google, Apple, Facebook, a custom
    /// JWT, the custom function.
    case federated = "fed"
    /// A user or server API key (`apikey`; not an RFC 8176 value, which has none for a bearer key).
    case apiKey = "apikey"
}

extension AuthenticationMethod {
    /// Methods as stored: their values, space-separated, in order.
    package static func text(_ methods: [AuthenticationMethod]) -> String { methods.map(\.rawValue).joined(separator: " ") }

    /// Stored methods read back; a value this version does not know is left out.
    package static func list(_ text: String) -> [AuthenticationMethod] {
        text.split(separator: " ").compactMap { AuthenticationMethod(rawValue: String($0)) }
    }
}
