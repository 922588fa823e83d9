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
        guard metrics.enabled else { return }
        let appLabel = app == Self.serverWideApp || configuration.app(id: app) != nil ? app : "unknown"
        let provider: String
        if let given = detail["provider"], Self.metricProviders.contains(given) {
            provider = given
        } else if detail["via"]?.hasPrefix("native auth") == true {
            provider = "native"
        } else {
            provider = "none"
        }
        metrics.counter(app: appLabel, kind: kind, provider: provider).increment()
    }
}

/// The handles of `gatehouse_auth_events_total` (``AuthEnvironment/countAuthEvent(_:app:detail:)``), made once per
/// label set and kept: swift-metrics' `Counter(label:dimensions:factory:)` asks the factory again at every use, and
/// every refresh counts an event. The label sets are bounded (see the metric), so the handles are too.
package final class AuthEventCounters: Sendable {
    private let factory: any MetricsFactory
    /// False for swift-metrics' no-op factory: nothing is counted, and no label is worked out.
    package let enabled: Bool
    private struct Labels: Hashable {
        var app: String
        var kind: AuditKind
        var provider: String
    }
    private let counters = LockedValue<[Labels: Counter]>([:])

    package init(_ factory: any MetricsFactory) {
        self.factory = factory
        enabled = !(factory is NOOPMetricsHandler)
    }

    /// Counts nothing.
    package static let none = AuthEventCounters(NOOPMetricsHandler.instance)

    fileprivate func counter(app: String, kind: AuditKind, provider: String) -> Counter {
        counters.value(for: Labels(app: app, kind: kind, provider: provider)) {
            Counter(label: AuthEnvironment.authEventsMetric, dimensions: [("app", app), ("kind", kind.rawValue), ("provider", provider)], factory: factory)
        }
    }
}
