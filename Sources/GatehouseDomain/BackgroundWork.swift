import Foundation

/// Work a request starts and does not wait for: a confirmation or reset function whose answer (and latency) must
/// not show in the answer of an app that hides user existence. The server waits for it when it closes
/// (``AuthServer/close()``); tests wait for it with ``drain()``.
package final class BackgroundWork: @unchecked Sendable {
    private let lock = NSLock()
    private var tasks: [Int: Task<Void, Never>] = [:]
    private var nextId = 0

    /// Starts `operation` now. Task-locals (the request's origin, for the audit log) carry over.
    package func run(_ operation: @escaping @Sendable () async -> Void) {
        lock.lock()
        defer { lock.unlock() }
        let id = nextId
        nextId += 1
        // Inserted under the lock before the task can remove itself (its removal takes the same lock).
        tasks[id] = Task {
            await operation()
            self.finished(id)
        }
    }

    private func finished(_ id: Int) {
        lock.lock()
        tasks[id] = nil
        lock.unlock()
    }

    /// Returns once every task started before or during the call has ended.
    package func drain() async {
        while true {
            let running = lock.withLock { Array(tasks.values) }
            if running.isEmpty { return }
            for task in running { await task.value }
        }
    }
}
