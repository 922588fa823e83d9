import NIOCore
import NIOPosix

/// Runs the server's tasks on NIO's event loops instead of Swift concurrency's global thread pool: a job made
/// runnable on an event loop's thread (a request read, a database answer) runs on that thread, in the same loop
/// tick's task queue, instead of waking a pool thread; a job made runnable anywhere else (a timer, another group's
/// thread, the lane of imported hashes) goes to the group's next loop. Work handed to the SQLite writer's thread or
/// the hashing pool comes back to the loop that asked for it (``NIOThreadPool/run(inactive:_:)``), not to the next one.
///
/// Why: without it every request crosses threads twice — the loop reads it and wakes a pool thread to handle it, and
/// the handler's answer wakes the loop again to write it — and a thread wake-up costs more than whole steps of a
/// request on some processors. With it a request is read, handled and answered on its connection's loop.
///
/// What may run here: everything a request does is short or suspends — hashing runs on its own threads (NIO's
/// blocking pool, ``ImportedHashLane``), SQLite writes on the writer's thread, reads on the calling thread take
/// microseconds and never wait for the writer (a WAL reader), PostgreSQL statements suspend. Code that would block a
/// thread for long must not run in these tasks: it would hold every connection of its loop.
///
/// It is installed as the task executor preference around the whole service group
/// (``AuthServer/onEventLoops(group:_:)``), which every child task inherits (SE-0417); the default actors such a task
/// calls run their work here too. NIO's own `EventLoop.executor` is a serial executor (an actor's), not a task
/// executor, and replacing the global executor through NIO's hook cannot work in a statically linked binary.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
final class EventLoopTaskExecutor: TaskExecutor, Sendable {
    /// On the event loops HTTP serving and the PostgreSQL connections use.
    static let shared = EventLoopTaskExecutor()

    private let group: MultiThreadedEventLoopGroup

    init(group: MultiThreadedEventLoopGroup = .singleton) {
        self.group = group
    }

    /// ``shared`` on an event loop's thread, else nil (no preference): for an unstructured task, which does not
    /// inherit its creator's preference, to run where its creator runs.
    static var ofCurrentThread: EventLoopTaskExecutor? {
        MultiThreadedEventLoopGroup.currentEventLoop == nil ? nil : shared
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let loop = MultiThreadedEventLoopGroup.currentEventLoop ?? group.next()
        loop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }
}

extension NIOThreadPool {
    /// Runs `body` on one of the pool's threads and resumes the caller with its result on the event loop it asked from
    /// (when it asked from one), or fails with `inactive()` when the pool no longer runs work.
    ///
    /// Why not `runIfActive`: it resumes the caller from the pool's thread, which ``EventLoopTaskExecutor`` can only
    /// send to the group's next loop — half the time not the loop that holds the request's connection, so that the
    /// request's answer then crosses to its loop once more. Resuming from the asking loop costs the same one wake-up
    /// and keeps the request where its connection is. The asking loop must outlive the work, as it must for
    /// ``EventLoopTaskExecutor`` to run the caller's task at all.
    func run<T: Sendable>(
        inactive: @escaping @Sendable () -> any Error = { CancellationError() },
        _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let home = MultiThreadedEventLoopGroup.currentEventLoop
        return try await withCheckedThrowingContinuation { continuation in
            submit { state in
                let result: Result<T, any Error>
                if case .active = state { result = Result(catching: body) } else { result = .failure(inactive()) }
                guard let home else { return continuation.resume(with: result) }
                home.execute { continuation.resume(with: result) }
            }
        }
    }
}
