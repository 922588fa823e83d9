// A terminal walk through the SDK's native auth client against a running `gatehouse serve` (with its dev
// mailbox): sign up with an emailed code, sign in after sign-up, reset the password with another code, sign in
// after the reset, sign out.
//
//     swift run gatehouse-native-example [BASE_URL] [APP_ID] [CLIENT_ID]
//
// Defaults: http://127.0.0.1:9090, gatehouse-dev and dev-client. In an app the user types the codes; here they are
// read from the dev mailbox.
import Foundation
import Gatehouse

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
let baseURL = arguments.count > 0 ? arguments[0] : "http://127.0.0.1:9090"
let appID = arguments.count > 1 ? arguments[1] : "gatehouse-dev"
let clientID = arguments.count > 2 ? arguments[2] : "dev-client"
let email = "native-\(Int(Date().timeIntervalSince1970))@example.com"

/// The example keeps its account in a folder of its own, so it does not touch a real app's store.
let store = FileUserStore(directory: FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-native-example"))
let client = NativeAuthClient(
    configuration: NativeAuthConfiguration(
        baseURL: baseURL, appId: appID, clientId: clientID, challengeTypes: [.oob, .password], accountStore: store
    )
)

/// The one-time code in the newest email to `address`, from the server's dev mailbox.
func emailedCode(to address: String) async throws -> String {
    let url = URL(string: "\(baseURL)/_dev/mailbox?to=\(address.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")!
    let (data, _) = try await URLSession.shared.data(from: url)
    guard let messages = try JSONSerialization.jsonObject(with: data) as? [[String: Any]],
        let text = messages.first?["text"] as? String,
        let code = text.firstMatch(of: /(?m)^\s+(\d{4,10})\s*$/)?.output.1
    else { throw ClientError.malformedResponse("no code for \(address) in the dev mailbox") }
    return String(code)
}

do {
    // Sign up with a code only (add `password:` to give the account a password at once).
    guard case .codeRequired(let codeState, let sentTo, _, let length) = try await client.signUp(
        username: email, attributes: ["displayName": "Native Example"]
    ) else { fatalError("the server refused the attributes") }
    print("sign-up: a \(length)-digit code went to \(sentTo)")

    guard case .completed(let afterSignUp) = try await codeState.submitCode(try await emailedCode(to: email)) else {
        fatalError("the app asks for more (a password or attributes); see docs/swift-sdk.md")
    }
    let account = try await afterSignUp.signIn()
    print("signed up and in as \(account.account.username) (\(account.account.claims?.name ?? "?")), user \(account.account.userId)")
    let token = try await account.getAccessToken()
    print("access token \(token.accessToken.prefix(16))…, expires \(token.expiresOn.map { "\($0)" } ?? "?")")

    // Reset the password: a code, then the new password, then sign in with the reset's token.
    let sent = try await client.resetPassword(username: email)
    print("reset: a code went to \(sent.sentTo)")
    let passwordState = try await sent.newState.submitCode(try await emailedCode(to: email))
    let afterReset = try await passwordState.submitPassword("new battery staple")
    let again = try await afterReset.signIn()
    print("password reset; signed in again as \(again.account.username)")

    // The new password signs in directly.
    if case .completed(let signedIn) = try await client.signIn(username: email, password: "new battery staple") {
        print("signed in with the new password: user \(signedIn.account.userId)")
        signedIn.signOut()
    }
    print("signed out: cached account \(client.getNativeAuthUserAccount() == nil ? "none" : "still there")")
} catch let error as any NativeAuthError {
    print("the server refused: \(error)")
    exit(1)
} catch {
    print("failed: \(error.localizedDescription)")
    exit(1)
}
