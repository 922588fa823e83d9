import Foundation

// MSAL's names for the native auth API, so that code written for MSAL iOS's native authentication (2.x) compiles
// against Gatehouse once `import MSAL` becomes `import Gatehouse` and the client is built with the server's URL where
// MSAL takes a tenant. A name qualified with the module (`MSAL.SignUpStartError`) works as `Gatehouse.SignUpStartError`:
// the states, delegates and errors already have MSAL's names, and these are module-level typealiases.
//
// Gatehouse's own names stay the primary ones (DocC, error messages, new code): they read as Swift without a vendor
// prefix, and the types are Swift value types and Sendable classes where MSAL's are `NSObject` subclasses — an MSAL
// name as the primary one would promise an Objective-C class that is not there. Where MSAL's shape cannot be kept,
// the difference is written down in the README's "Moving from MSAL native auth".

/// MSAL's `MSALNativeAuthPublicClientApplication`: ``NativeAuthClient``.
public typealias MSALNativeAuthPublicClientApplication = NativeAuthClient
/// MSAL's `MSALNativeAuthPublicClientApplicationConfig`: ``NativeAuthConfiguration``.
public typealias MSALNativeAuthPublicClientApplicationConfig = NativeAuthConfiguration
/// MSAL's `MSALNativeAuthChallengeTypes`: ``NativeAuthChallengeTypes``.
public typealias MSALNativeAuthChallengeTypes = NativeAuthChallengeTypes
/// MSAL's `MSALNativeAuthCapabilities`: ``NativeAuthCapabilities``.
public typealias MSALNativeAuthCapabilities = NativeAuthCapabilities
/// MSAL's `MSALNativeAuthChannelType`: ``NativeAuthChannelType``.
public typealias MSALNativeAuthChannelType = NativeAuthChannelType
/// MSAL's `MSALNativeAuthRequiredAttribute`: ``RequiredAttribute``.
public typealias MSALNativeAuthRequiredAttribute = RequiredAttribute
/// MSAL's `MSALNativeAuthUserAccountResult`: ``NativeAuthUserAccountResult``.
public typealias MSALNativeAuthUserAccountResult = NativeAuthUserAccountResult
/// MSAL's `MSALNativeAuthTokenResult`: ``NativeAuthTokenResult``.
public typealias MSALNativeAuthTokenResult = NativeAuthTokenResult
/// MSAL's `MSALAccount`, as native auth hands it out (`result.account`): ``NativeAuthAccount``.
public typealias MSALAccount = NativeAuthAccount
/// MSAL's `MSALNativeAuthError`, the base of every native auth error: ``NativeAuthError``.
public typealias MSALNativeAuthError = NativeAuthError
/// MSAL's `MSALNativeAuthSignUpParameters`: ``SignUpParameters``.
public typealias MSALNativeAuthSignUpParameters = SignUpParameters
/// MSAL's `MSALNativeAuthSignInParameters`: ``SignInParameters``.
public typealias MSALNativeAuthSignInParameters = SignInParameters
/// MSAL's `MSALNativeAuthResetPasswordParameters`: ``ResetPasswordParameters``.
public typealias MSALNativeAuthResetPasswordParameters = ResetPasswordParameters
/// MSAL's `MSALNativeAuthSignInAfterSignUpParameters`: ``SignInAfterSignUpParameters``.
public typealias MSALNativeAuthSignInAfterSignUpParameters = SignInAfterSignUpParameters
/// MSAL's `MSALNativeAuthSignInAfterResetPasswordParameters`: ``SignInAfterResetPasswordParameters``.
public typealias MSALNativeAuthSignInAfterResetPasswordParameters = SignInAfterResetPasswordParameters
/// MSAL's `MSALNativeAuthGetAccessTokenParameters`: ``GetAccessTokenParameters``.
public typealias MSALNativeAuthGetAccessTokenParameters = GetAccessTokenParameters

extension NativeAuthChallengeTypes {
    /// MSAL's spelling of ``oob``: `[.OOB, .password]`.
    public static let OOB = oob
}

/// A native auth client that cannot be built from what it was given: the message says what to change.
public struct NativeAuthConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
}

extension NativeAuthConfiguration {
    /// MSAL's `init(clientId:tenantSubdomain:challengeTypes:)`, with the server's native auth URL where MSAL takes a
    /// tenant: the URL `gatehouse serve` prints for the app (`https://auth.example.com/native/my-app`), that is the
    /// server's base URL, `/native/`, and the app id.
    ///
    /// - Throws: ``NativeAuthConfigurationError`` when the URL is not `http(s)://HOST[/PATH]/native/APP_ID`, or the
    ///   client id is empty.
    public init(clientId: String, serverURL: String, challengeTypes: NativeAuthChallengeTypes) throws(NativeAuthConfigurationError) {
        let (baseURL, appId) = try Self.split(serverURL: serverURL)
        guard !clientId.isEmpty else { throw NativeAuthConfigurationError(description: "the client id is empty") }
        self.init(baseURL: baseURL, appId: appId, clientId: clientId, challengeTypes: challengeTypes)
    }

    /// `https://host/prefix/native/app` → (`https://host/prefix`, `app`).
    static func split(serverURL: String) throws(NativeAuthConfigurationError) -> (baseURL: String, appId: String) {
        let trimmed = serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL
        guard let components = URLComponents(string: trimmed), ["http", "https"].contains(components.scheme?.lowercased() ?? ""),
            components.host?.isEmpty == false, components.query == nil, components.fragment == nil
        else {
            throw NativeAuthConfigurationError(description: "expected the server's native auth URL, like https://auth.example.com/native/my-app; found \(serverURL)")
        }
        let path = components.path.split(separator: "/", omittingEmptySubsequences: false)
        guard path.count >= 3, path[path.count - 2] == "native", let appId = path.last, !appId.isEmpty else {
            throw NativeAuthConfigurationError(
                description: "the URL must end in /native/APP_ID (the address `gatehouse serve` prints for the app); found \(serverURL)"
            )
        }
        var base = components
        base.path = path.dropLast(2).joined(separator: "/")
        return (base.string ?? trimmed, String(appId))
    }
}

extension NativeAuthClient {
    /// MSAL's `init(nativeAuthConfiguration:)`. Throws when the configuration cannot reach a server (its base URL
    /// is not `http(s)`, or the app or client id is empty), as MSAL throws for an authority it cannot use.
    public convenience init(nativeAuthConfiguration: NativeAuthConfiguration) throws(NativeAuthConfigurationError) {
        guard let url = URLComponents(string: nativeAuthConfiguration.baseURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false
        else {
            throw NativeAuthConfigurationError(description: "the base URL must be http(s)://HOST[:PORT]; found \(nativeAuthConfiguration.baseURL)")
        }
        guard !nativeAuthConfiguration.appId.isEmpty, !nativeAuthConfiguration.clientId.isEmpty else {
            throw NativeAuthConfigurationError(description: "the app id and the client id must not be empty")
        }
        self.init(configuration: nativeAuthConfiguration)
    }

    /// MSAL's `init(clientId:tenantSubdomain:challengeTypes:redirectUri:)`, with the server's native auth URL where
    /// MSAL takes a tenant (see ``NativeAuthConfiguration/init(clientId:serverURL:challengeTypes:)``). `redirectUri`
    /// is accepted and unused: a client that cannot go on natively is told `isBrowserRequired`, and Gatehouse has no
    /// browser sign-in to send it to.
    public convenience init(
        clientId: String, serverURL: String, challengeTypes: NativeAuthChallengeTypes, redirectUri: String? = nil
    ) throws(NativeAuthConfigurationError) {
        try self.init(nativeAuthConfiguration: NativeAuthConfiguration(clientId: clientId, serverURL: serverURL, challengeTypes: challengeTypes))
    }
}
