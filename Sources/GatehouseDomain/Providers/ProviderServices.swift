/// The login providers of an environment, wired to its outbound HTTP client, key cache and clock.
package struct ProviderServices: Sendable {
    package let env: AuthEnvironment

    package func customToken(_ settings: CustomTokenSettings, app: AppSettings) -> CustomTokenProvider {
        CustomTokenProvider(settings: settings, keys: env.customTokenKeys[app.id] ?? [], jwks: env.jwks, clock: env.clock)
    }

    package func google(_ settings: GoogleSettings) -> GoogleProvider {
        GoogleProvider(settings: settings, jwks: env.jwks, http: env.outbound, clock: env.clock)
    }

    package func apple(_ settings: AppleSettings) -> AppleProvider {
        AppleProvider(settings: settings, jwks: env.jwks, clock: env.clock)
    }

    package func facebook(_ settings: FacebookSettings) -> FacebookProvider {
        FacebookProvider(settings: settings, http: env.outbound)
    }

    package init(env: AuthEnvironment) {
        self.env = env
    }
}
