import CoreMetrics

/// The domain's metrics, through swift-metrics' API with the factory the server gives ``AuthEnvironment/metrics``
/// (a no-op one by default): the domain never knows where they go.
///
/// `gatehouse_auth_events_total{app, kind, provider}` counts every audit event as it is recorded, plus the rate-limit
/// refusals the audit log records only once per window. Its labels are bounded: `app` is a configured app id (`*`
/// for server-wide events, `unknown` otherwise), `kind` an ``AuditKind``, `provider` a provider type Gatehouse knows,
/// `native` for native auth flows, or `none`.
extension AuthEnvironment {
    package static let authEventsMetric = "gatehouse_auth_events_total"

    /// The provider types that may appear as a `provider` label.
    package static let metricProviders: Set<String> = [
        EmailPasswordService.providerType, AnonymousService.providerType, APIKeyService.providerType,
        CustomTokenProvider.providerType, GoogleProvider.providerType, AppleProvider.providerType,
        FacebookProvider.providerType, FunctionRunner.providerType,
    ]

    /// Adds one to `gatehouse_auth_events_total` for `kind` (``audit(_:app:user:detail:)`` calls it for each event).
    package func countAuthEvent(_ kind: AuditKind, app: String, detail: [String: String] = [:]) {
        let appLabel = app == Self.serverWideApp || configuration.app(id: app) != nil ? app : "unknown"
        let provider: String
        if let given = detail["provider"], Self.metricProviders.contains(given) {
            provider = given
        } else if detail["via"]?.hasPrefix("native auth") == true {
            provider = "native"
        } else {
            provider = "none"
        }
        Counter(
            label: Self.authEventsMetric, dimensions: [("app", appLabel), ("kind", kind.rawValue), ("provider", provider)],
            factory: metrics
        ).increment()
    }
}
