import Foundation
import GatehouseDomain
@testable import GatehouseServer
import GatehouseTestSupport
import GatehouseWire
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The bundled common-password list and the rule against using the email.
@Suite struct PasswordPolicyTests {
    @Test func theBundledListHasTheMostCommonPasswords() {
        #expect(CommonPasswords.count >= 10_000)
        for common in ["123456", "password", "qwerty", "iloveyou", "password1"] { #expect(CommonPasswords.contains(common)) }
        #expect(!CommonPasswords.contains("correct horse battery"))
    }

    @Test func rulesAreCheckedInOrderAndCanBeTurnedOff() {
        let policy = PasswordPolicy()
        #expect(policy.violation("1234567") == .tooShort)
        #expect(policy.violation("Sunshine1") == .banned)
        #expect(policy.violation("Maya.Lin@example.com", email: "maya.lin@example.com") == .isEmail)
        #expect(policy.violation("MAYA.LIN", email: "maya.lin@example.com") == .isEmail)
        #expect(policy.violation("a sturdy passphrase", email: "maya.lin@example.com") == nil)
        let lenient = PasswordPolicy(refuseCommon: false, refuseEmail: false)
        #expect(lenient.violation("Sunshine1") == nil)
        #expect(lenient.violation("maya.lin@example.com", email: "maya.lin@example.com") == nil)
    }

    @Test func nativeAuthNamesTheRuleInItsSuberror() async throws {
        try await withGatehouse(nativeConfiguration()) { _, client in
            let banned = try await client.native(.signUpStart, ["username": "cy@example.com", "password": "qwerty123", "challenge_type": allChallengeTypes])
            expectNativeError(banned, .invalidGrant, code: NativeAuthErrorCode.passwordBanned, suberror: .passwordBanned)
            let email = try await client.native(.signUpStart, ["username": "cy@example.com", "password": "CY@example.com", "challenge_type": allChallengeTypes])
            expectNativeError(email, .invalidGrant, code: NativeAuthErrorCode.passwordIsEmail, suberror: .passwordIsInvalid)
        }
    }

    @Test func aResetToACommonPasswordIsRefusedAndTheTokenStillWorks() async throws {
        try await withGatehouse { _, client in
            _ = try await client.signUp("dee@example.com")
            _ = try await client.call(Path.local("reset/send"), json: EmailRequest(email: "dee@example.com"))
            let link = try await client.latestLink("dee@example.com")
            let refused = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "letmein123", token: link.token, tokenId: link.tokenId))
            #expect(refused.status == .badRequest)
            #expect(refused.error?.error.hasPrefix("password_banned:") == true)
            let done = try await client.call(Path.local("reset"), json: ResetPasswordRequest(password: "a new long secret", token: link.token, tokenId: link.tokenId))
            #expect(done.status == .ok)
        }
    }
}
