// A terminal walk through the Gatehouse SDK against a running `gatehouse serve` (with its dev mailbox):
// sign up, confirm with the emailed token, sign in, show the profile, sign out.
//
//     swift run gatehouse-example [BASE_URL] [APP_ID]
//
// Defaults: http://127.0.0.1:9090 and gatehouse-dev.
import Foundation
import Gatehouse

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = CommandLine.arguments.dropFirst()
let baseURL = arguments.first ?? "http://127.0.0.1:9090"
let appID = arguments.dropFirst().first ?? "gatehouse-dev"
let email = "example-\(Int(Date().timeIntervalSince1970))@example.com"
let password = "correct horse battery"

/// The example keeps its users in a folder of its own, so it does not touch a real app's store.
let store = FileUserStore(directory: FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-example"))
let app = App(id: appID, configuration: AppConfiguration(baseURL: baseURL, userStore: store))

/// Reads the confirmation link of the newest email to `address` from the server's dev mailbox.
func confirmationLink(to address: String) async throws -> (token: String, tokenId: String) {
    let url = URL(string: "\(baseURL)/_dev/mailbox?to=\(address.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")!
    let (data, _) = try await URLSession.shared.data(from: url)
    guard let messages = try JSONSerialization.jsonObject(with: data) as? [[String: Any]],
        let text = messages.first?["text"] as? String,
        let token = text.firstMatch(of: /[?&]token=([0-9a-f]+)/)?.output.1,
        let tokenId = text.firstMatch(of: /[?&]tokenId=([0-9a-f]+)/)?.output.1
    else { throw ClientError.malformedResponse("no confirmation email for \(address) in the dev mailbox") }
    return (String(token), String(tokenId))
}

do {
    let auth = app.emailPasswordAuth
    try await auth.registerUser(email: email, password: password)
    print("registered \(email)")

    let link = try await confirmationLink(to: email)
    try await auth.confirmUser(link.token, tokenId: link.tokenId)
    print("confirmed with token \(link.token.prefix(8))… (tokenId \(link.tokenId))")

    let user = try await app.login(credentials: .emailPassword(email: email, password: password))
    print("signed in as \(user.id)")
    print("profile: email \(user.profile.email ?? "?"), identities \(user.identities.map(\.providerType))")

    try await user.logOut()
    print("signed out: state \(user.state.rawValue)")
} catch let error as AppError {
    print("the server refused: \(error.code.rawValue): \(error.message)")
    exit(1)
} catch {
    print("failed: \(error.localizedDescription)")
    exit(1)
}
