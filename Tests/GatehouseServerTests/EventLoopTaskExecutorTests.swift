import NIOCore
import NIOPosix
import Testing

@testable import GatehouseServer

/// Where the server's tasks run (``EventLoopTaskExecutor``): on the event loops, staying on the loop that made them
/// runnable, so that a request read, handled and answered on one loop wakes no other thread.
struct EventLoopTaskExecutorTests {
    @Test func tasksRunOnTheLoopsAndStayOnTheLoopThatResumedThem() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loops = Array(group.makeIterator())
        let outcome = try await AuthServer.onEventLoops(group: group) {
            var outcome: [String] = []
            outcome.append(Self.where(loops))
            // Resumed by each loop in turn (as a socket's read resumes the request's task): it continues there.
            for (index, loop) in loops.enumerated() {
                await withCheckedContinuation { continuation in
                    // Resumed once the task has suspended: a resume that came first (the other loop quicker than
                    // this thread, on a busy machine) would let the task go on where it is, without being enqueued.
                    // This thread's loop runs what it is given after the job that runs the task, which ends when the
                    // task suspends.
                    let here = MultiThreadedEventLoopGroup.currentEventLoop ?? loop
                    here.execute { loop.execute { continuation.resume() } }
                }
                outcome.append(MultiThreadedEventLoopGroup.currentEventLoop === loop ? "loop \(index)" : Self.where(loops))
            }
            // Resumed by a thread that is not a loop (SQLite's writer, a hashing thread): it goes to a loop.
            let pool = NIOThreadPool(numberOfThreads: 1)
            pool.start()
            try await pool.runIfActive {}
            outcome.append(Self.where(loops))
            try await pool.shutdownGracefully()
            // Child tasks inherit it.
            outcome.append(await withTaskGroup(of: String.self) { children in
                children.addTask { Self.where(loops) }
                return await children.next() ?? "none"
            })
            return outcome
        }
        #expect(outcome == ["a loop", "loop 0", "loop 1", "a loop", "a loop"])
        // Without it, the same code runs on Swift's own threads.
        #expect(Self.where(loops) == "elsewhere")
        try await group.shutdownGracefully()
    }

    /// Work handed to a thread of the server's own (SQLite's writer, a hashing thread) resumes its caller on the loop
    /// that asked, every time: the request's connection is there. (`runIfActive` resumes it on the group's next loop:
    /// half the time the other one.)
    @Test func workOnAPoolThreadResumesItsCallerOnTheLoopThatAskedForIt() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let (stayed, control) = try await AuthServer.onEventLoops(group: group) {
            var stayed = 0
            var control = 0
            for _ in 0..<8 {
                // Each piece of work first waits for its caller to suspend (the asking loop runs what it is given
                // after the job that runs the task), so that it resumes a suspended task, as a hash does.
                var asking = MultiThreadedEventLoopGroup.currentEventLoop
                let ranOnPool = try await pool.run { [asking] in
                    try? asking?.submit {}.wait()
                    return MultiThreadedEventLoopGroup.currentEventLoop == nil
                }
                if ranOnPool, asking != nil, MultiThreadedEventLoopGroup.currentEventLoop === asking { stayed += 1 }
                asking = MultiThreadedEventLoopGroup.currentEventLoop
                try await pool.runIfActive { [asking] in try? asking?.submit {}.wait() }
                if MultiThreadedEventLoopGroup.currentEventLoop === asking { control += 1 }
            }
            return (stayed, control)
        }
        #expect(stayed == 8)
        // The control: `runIfActive` came back elsewhere at least once (the next loop alternates).
        #expect(control < 8)
        // A pool that no longer runs work answers with the caller's error.
        try await pool.shutdownGracefully()
        struct Closed: Error {}
        await #expect(throws: Closed.self) { try await pool.run(inactive: { Closed() }) {} }
        try await group.shutdownGracefully()
    }

    private static func `where`(_ loops: [any EventLoop]) -> String {
        guard let current = MultiThreadedEventLoopGroup.currentEventLoop else { return "elsewhere" }
        return loops.contains { $0 === current } ? "a loop" : "another group's loop"
    }
}
