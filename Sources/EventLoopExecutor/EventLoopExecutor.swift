#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix
import Synchronization

/// Makes NIO's event loops Swift Concurrency's global executor, running each job as *generic* work.
///
/// NIO's own installer (`NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`)
/// runs every job with the event loop as its *serial* executor. Code that is not isolated to an actor
/// expects the generic executor, so the runtime's `swift_task_switch` saw a different executor at almost
/// every resumption and enqueued the task again: ~200 extra jobs per sign-in (counted with a uprobe on
/// `swift_task_enqueueGlobal`), each one a trip through the event loop's task queue. Run as generic work —
/// what Swift's default global executor does — a resumption continues in place: ~4 jobs per sign-in.
/// Jobs enqueued on an event loop's own executor (NIO's `EventLoop.executor`) still run isolated to it.
///
/// The unsafe parts, and why they hold:
/// - `swift_task_enqueueGlobal_hook` is the runtime's documented-by-code hook variable (the one NIO
///   sets); its type is a thin function taking the job and the original enqueue function.
/// - The generic executor is the all-zero executor reference (`SerialExecutorRef::generic()` in the
///   runtime: no identity, no witness table); `UnownedSerialExecutor` is exactly those two words.
public enum EventLoopExecutor {
    private typealias EnqueueGlobalHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// The generic executor, as the runtime spells it: two zero words.
    static let generic: UnownedSerialExecutor = {
        precondition(MemoryLayout<UnownedSerialExecutor>.size == 2 * MemoryLayout<Int>.size,
                     "UnownedSerialExecutor is no longer two words: the generic executor cannot be spelled")
        return unsafeBitCast((Int(0), Int(0)), to: UnownedSerialExecutor.self)
    }()

    /// Installs the hook. Call once, on the main thread, before any task is created; false (nothing
    /// changed) when the runtime has no hook or another one is set already.
    @discardableResult
    public static func install() -> Bool {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else { return false }
        let hook = symbol.assumingMemoryBound(to: EnqueueGlobalHook?.self)
        guard hook.pointee == nil else { return false }
        _ = generic
        hook.pointee = { job, _ in EventLoopExecutor.enqueue(job) }
        installed.store(true, ordering: .relaxed)
        return true
    }

    private static func enqueue(_ job: UnownedJob) {
        jobsEnqueued.add(1, ordering: .relaxed)
        // `any()` is sticky: on one of the group's loops it returns that loop (no thread switch).
        MultiThreadedEventLoopGroup.singleton.any().execute {
            job.runSynchronously(on: EventLoopExecutor.generic)
        }
    }

    /// Jobs the hook has handed to the event loops since it was installed.
    static let jobsEnqueued = Atomic<Int>(0)
    private static let installed = Atomic<Bool>(false)

    /// What ``selfCheck()`` found: whether a task ran on an event loop, and how many jobs 100 round trips
    /// to an actor and back cost. With the hook they switch in place (a job or two: the task's start);
    /// jobs run as the loop's serial executor cost two per round trip.
    public struct Check: Sendable, Equatable {
        public let installed: Bool
        public let ranOnEventLoop: Bool
        public let jobsForHundredActorCalls: Int
        public var passed: Bool { installed && ranOnEventLoop && jobsForHundredActorCalls <= 10 }
    }

    /// Runs a task the way a request runs (through the global executor) and measures it. Meaningful once
    /// ``install()`` succeeded; `siwa doctor` reports it.
    public static func selfCheck() async -> Check {
        let before = jobsEnqueued.load(ordering: .relaxed)
        let ranOnEventLoop = await Task.detached { () -> Bool in
            let counter = Counter()
            for _ in 0..<100 { await counter.increment() }
            return MultiThreadedEventLoopGroup.currentEventLoop != nil
        }.value
        return Check(installed: installed.load(ordering: .relaxed), ranOnEventLoop: ranOnEventLoop,
                     jobsForHundredActorCalls: jobsEnqueued.load(ordering: .relaxed) - before)
    }

    private actor Counter {
        var value = 0
        func increment() { value += 1 }
    }
}
