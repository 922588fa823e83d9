import NIOCore
import NIOPosix

/// Runs the server's tasks on NIO's event loops instead of Swift concurrency's global thread pool: a job made
/// runnable on an event loop's thread (a request read, a database answer) runs on that thread, in the same loop
/// tick's task queue, instead of waking a pool thread; a job made runnable anywhere else (the SQLite writer's thread,
/// a hashing thread, a timer) goes to the group's next loop.
///
/// Why: without it every request crosses threads twice — the loop reads it and wakes a pool thread to handle it, and
/// the handler's answer wakes the loop again to write it — and a thread wake-up costs more than whole steps of a
/// request on some processors. With it a request is read, handled and answered on its connection's loop.
///
/// What may run here: everything a request does is short or suspends — hashing runs on its own threads
/// (`PasswordHashLanes`), SQLite writes on the writer's thread, reads on the calling thread take microseconds and
/// never wait for the writer (a WAL reader), PostgreSQL statements suspend. Code that would block a thread for
/// long must not run in these tasks: it would hold every connection of its loop.
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
