internal import CCurl

/// Linux scheduling of this process's threads, with the call the network thread makes for itself
/// (``CurlHTTPClient/Configuration/networkThreadYields``), so that no code outside this target needs the
/// C shim for it.
public enum ThreadScheduling {
    /// Puts thread `threadID` under `SCHED_BATCH`, its nice value unchanged: its wake-ups then never
    /// preempt the thread running on that core (it runs when a core is free or that thread's turn ends).
    /// Threads it creates afterwards inherit the policy. A process may ask this for its own threads
    /// without privileges.
    ///
    /// - Parameter threadID: a kernel thread id of this process (a name in `/proc/self/task`); 0 is the
    ///   calling thread.
    /// - Returns: 0, or the `errno` of the refusal (`ESRCH`: no such thread, e.g. it has ended since it was
    ///   listed; `EPERM`: e.g. a seccomp profile forbids `sched_setscheduler`).
    @discardableResult
    public static func runAsBatch(threadID: Int32 = 0) -> Int32 {
        siwa_thread_schedule_as_batch(threadID)
    }
}
