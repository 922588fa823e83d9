import NIOConcurrencyHelpers

/// Holds whoever waits on it until it opens, and tells when someone arrived: the one way the SDK's tests hold an answer
/// back (a refresh in flight, a request racing a sign-out) for as long as the test needs.
public final class Gate: Sendable {
    private struct State {
        var open = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var arrivals = 0
        var arrivalWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    public init() {}

    /// Waits until the gate opens (at once if it is open).
    public func wait() async {
        await withCheckedContinuation { continuation in
            let resume = state.withLockedValue { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resume { continuation.resume() }
        }
    }

    /// Opens the gate: everyone waiting goes on, and later waiters do not wait.
    public func open() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Says that something reached the gate (before it waits there).
    public func arrived() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.arrivals += 1
            defer { state.arrivalWaiters = [] }
            return state.arrivalWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once something has reached the gate.
    public func waitForArrival() async {
        await withCheckedContinuation { continuation in
            let resume = state.withLockedValue { state -> Bool in
                if state.arrivals > 0 { return true }
                state.arrivalWaiters.append(continuation)
                return false
            }
            if resume { continuation.resume() }
        }
    }
}
