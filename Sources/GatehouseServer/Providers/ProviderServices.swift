/// The login providers of an environment, wired to its outbound HTTP client, key cache and clock.
struct ProviderServices: Sendable {
    let env: AuthEnvironment

    func customToken(_ settings: CustomTokenSettings, app: AppSettings) -> CustomTokenProvider {
        CustomTokenProvider(settings: settings, keys: env.customTokenKeys[app.id] ?? [], jwks: env.jwks, clock: env.clock)
    }

    func google(_ settings: GoogleSettings) -> GoogleProvider {
        GoogleProvider(settings: settings, jwks: env.jwks, http: env.outbound, clock: env.clock)
    }

    func apple(_ settings: AppleSettings) -> AppleProvider {
        AppleProvider(settings: settings, jwks: env.jwks, clock: env.clock)
    }

    func facebook(_ settings: FacebookSettings) -> FacebookProvider {
        FacebookProvider(settings: settings, http: env.outbound)
    }
}
