import CoreMetrics
import GatehouseDomain

/// A metrics factory that makes each handler once and hands the same one out again for the same name and labels.
///
/// swift-metrics' `Counter(label:dimensions:factory:)` asks the factory at every use, and Gatehouse names its
/// per-request metrics at each request (the route, the method and the status are known only then). Prometheus's
/// factory validates the name, sorts and joins the labels and looks the metric up in its registry under a lock each
/// time: a cost every request paid two or three times (`Benchmarks/PROFILING.md`). Here the first use of a
/// name and labels makes the handler and later uses find it in one dictionary. The handlers are as many as the
/// registry holds anyway (the labels' values are bounded: route templates, statuses, configured apps), and they are
/// never destroyed (Gatehouse destroys none).
final class CachingMetricsFactory: MetricsFactory, Sendable {
    private let base: any MetricsFactory
    private struct Key: Hashable {
        var kind: UInt8
        var label: String
        var dimensions: [String]

        init(_ kind: UInt8, _ label: String, _ dimensions: [(String, String)]) {
            self.kind = kind
            self.label = label
            var flat: [String] = []
            flat.reserveCapacity(dimensions.count * 2)
            for (name, value) in dimensions {
                flat.append(name)
                flat.append(value)
            }
            self.dimensions = flat
        }
    }
    private let handlers = LockedValue<[Key: any Sendable]>([:])

    init(_ base: any MetricsFactory) {
        self.base = base
    }

    private func handler<H: Sendable>(_ key: Key, _ make: () -> H) -> H {
        // Each key's kind names the handler type it holds, so the cast holds; were it not to, a handler made anew
        // (the registry under `base` keeps one metric per name and labels) still counts in the same place.
        (handlers.value(for: key) { make() } as? H) ?? make()
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        handler(Key(0, label, dimensions)) { base.makeCounter(label: label, dimensions: dimensions) }
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        handler(Key(1, label, dimensions)) { base.makeFloatingPointCounter(label: label, dimensions: dimensions) }
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        handler(Key(2, label, dimensions)) { base.makeMeter(label: label, dimensions: dimensions) }
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        handler(Key(aggregate ? 3 : 4, label, dimensions)) { base.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate) }
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        handler(Key(5, label, dimensions)) { base.makeTimer(label: label, dimensions: dimensions) }
    }

    // Handlers are shared between uses, so one use must not destroy them for the others.
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}
