import Foundation
@testable import Gatehouse
import Testing

/// realm-swift's ways of making an app's configuration, and what they mean here.
@Suite struct RealmConfigurationTests {
    @Test func realmInitializersFillInTheDefaults() {
        let timed = AppConfiguration(baseURL: nil, transport: nil, defaultRequestTimeoutMS: 5_000)
        #expect(timed.baseURL == AppConfiguration.defaultBaseURL)
        #expect(timed.requestTimeout == 5)
        var configuration = AppConfiguration(baseURL: "https://auth.example.com/", transport: nil)
        #expect(configuration.baseURL == "https://auth.example.com")
        #expect(configuration.defaultRequestTimeoutMS == 60_000)
        configuration.defaultRequestTimeoutMS = 1_500
        #expect(configuration.requestTimeout == 1.5)
        #expect(AppConfiguration().baseURL == AppConfiguration.defaultBaseURL)
    }

    /// `/location` may move the app to another origin (as App Services moved apps to a region's host), never down to
    /// plain http after https, and never to a URL whose credentials, path, query or fragment would bend where the
    /// API's paths go.
    @Test(arguments: [
        ("https://eu.auth.example.com", true), ("https://auth.example.com:8443/", true), ("http://127.0.0.1:9090", false),
        ("https://user:pw@evil.example", false), ("https://auth.example.com#", false), ("https://auth.example.com/x?", false),
        ("https://auth.example.com/prefix", false), ("https://auth.example.com?", false), ("ftp://auth.example.com", false),
        ("https://", false),
    ])
    func theLocationAnswerIsAnOrigin(_ target: String, _ accepted: Bool) {
        if accepted {
            #expect(throws: Never.self) { try AppCore.checkLocation(target, from: "https://auth.example.com") }
        } else {
            let error = #expect(throws: ClientError.self) { try AppCore.checkLocation(target, from: "https://auth.example.com") }
            #expect(error.map { ClientError.insecureLocation("") ~= $0 } == true)
        }
    }

    @Test func theAuthClientsKnowTheirApp() {
        let app = App(id: "realm-app", configuration: AppConfiguration(baseURL: "https://auth.example.com", userStore: InMemoryUserStore()))
        #expect(app.emailPasswordAuth.app.appId == "realm-app")
        #expect(app.appId == app.id)
        let defaulted = App(id: "other", configuration: nil)
        #expect(defaulted.configuration.baseURL == AppConfiguration.defaultBaseURL)
    }
}
