import CurlHTTP
import Foundation

/// The load test's own threads — the virtual browsers and the emulator standing in for Apple — under
/// Linux's `SCHED_BATCH` once `siwa serve` runs in its own process. In production the browsers and
/// Apple are other machines; here they share the server's cores, and each of their wake-ups that landed
/// on the core where the server was answering a request preempted it (its event loop was preempted
/// ~1,350 times a second at 512 browsers), charging the server the switches and the caches they cost.
/// Under `SCHED_BATCH` their wake-ups wait for the running thread's turn to end or a free core; they
/// keep their share of the CPU (the nice value is unchanged). The server's process keeps the usual
/// policy: it was started before, and a policy is inherited only by what a thread creates afterwards.
enum LoadGeneratorScheduling {
    /// Puts every thread of this process under `SCHED_BATCH` (threads created later inherit it from the
    /// thread creating them). Returns "batch", or why not (a thread may refuse, e.g. under a seccomp
    /// profile that forbids `sched_setscheduler`).
    static func yieldToServer() -> String {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        var refused: Int32 = 0
        for task in tasks {
            guard let thread = pid_t(task) else { continue }
            // The call libcurl's network thread makes for itself. A thread that ended since the listing
            // (ESRCH) is not a refusal.
            let error = ThreadScheduling.runAsBatch(threadID: thread)
            if error != 0, error != ESRCH { refused = error }
        }
        if tasks.isEmpty { return "normal (no /proc/self/task)" }
        return refused == 0 ? "batch" : "normal (SCHED_BATCH refused: \(String(cString: strerror(refused))))"
    }
}
