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

    @Test func theAuthClientsKnowTheirApp() {
        let app = App(id: "realm-app", configuration: AppConfiguration(baseURL: "https://auth.example.com", userStore: InMemoryUserStore()))
        #expect(app.emailPasswordAuth.app.appId == "realm-app")
        #expect(app.appId == app.id)
        let defaulted = App(id: "other", configuration: nil)
        #expect(defaulted.configuration.baseURL == AppConfiguration.defaultBaseURL)
    }
}
