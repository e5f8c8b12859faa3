import Foundation
import Synchronization
internal import CCurl

/// The network thread: owns the curl multi handle and runs every transfer on it.
///
/// It drives libcurl's socket interface with epoll (see `siwa_curl_events_*` in the CCurl shim): epoll
/// reports the sockets that are ready and `curl_multi_socket_action` handles just those, so the cost of
/// a wake-up does not grow with the number of transfers in flight (with `curl_multi_poll` and
/// `curl_multi_perform`, every wake-up looked at every transfer).
///
/// libcurl is driven only by the holder of `driver`: the loop thread while it hands libcurl what epoll
/// reported, and a thread that submits a request while the loop thread waits, which then starts the
/// transfer itself (libcurl connects or sends right away) instead of waking the loop thread for just
/// that; the loop thread sleeps on until the answer arrives. When the loop thread holds `driver`, a
/// submitter leaves its request in `state`'s queue and writes the loop's eventfd, which ends its
/// `epoll_wait` (or makes the next one return at once).
///
/// `@unchecked Sendable` because of `multi` and `events`: both are used only under `driver`, except
/// for the wake-up write to `events.wake_fd`, which any thread may do after deciding under the lock
/// that a wake-up is due: the descriptors stay open until `deinit`, and the thread holds the loop
/// while it runs. The write is done outside the lock, so the woken thread does not find the lock
/// still held by its waker (perf showed it spinning in `Mutex._lockSlow`).
final class CurlMultiLoop: @unchecked Sendable {
    private struct State {
        var table = RequestTable<Transfer>()
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        var connectionsOpened = 0
        /// The eventfd has been written since the loop last drained the table: another write would only
        /// cost a system call (under the lock), since the loop drains everything once it wakes.
        var wakePending = false
        /// Eventfd writes so far (for tests: a request started by its submitter needs none).
        var wakeUps = 0
    }

    /// What only the holder of `driver` may touch besides libcurl itself.
    private struct Driver {
        /// Strong references to every attached handle: this is what keeps the pointers given to libcurl
        /// (CURLOPT_PRIVATE, WRITEDATA, HEADERDATA) valid.
        var attached: [UInt64: EasyHandle] = [:]
        /// The loop thread has detached everything for good: nobody may drive libcurl again.
        var stopped = false
    }

    /// A transfer that has ended, to be completed in the table and resumed outside the locks.
    private typealias Finished = (id: UInt64, transfer: Transfer, result: Result<HTTPClientResponse, HTTPClientError>, opened: Int)

    private let multi: UnsafeMutableRawPointer
    /// The epoll and eventfd descriptors and libcurl's timer. Allocated here and handed to libcurl as the
    /// callbacks' user pointer; closed and freed in `deinit`, after the loop thread's `curl_multi_cleanup`
    /// (a `CurlMultiLoop` is never deinitialised while its thread runs: `run` holds it).
    private let events: UnsafeMutablePointer<siwa_curl_events>
    private let state = Mutex(State())
    private let driver = Mutex(Driver())
    /// The network thread runs under `SCHED_BATCH` (``CurlHTTPClient/Configuration/networkThreadYields``).
    private let yields: Bool
    /// The network thread's kernel id once it runs (what `/proc/self/task` and the scheduler know it by).
    let networkThreadID = Mutex<pid_t?>(nil)

    init(configuration: CurlHTTPClient.Configuration) {
        precondition(CurlGlobal.initialized, "curl_global_init failed")
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        yields = configuration.networkThreadYields
        events = .allocate(capacity: 1)
        let opened = siwa_curl_events_open(multi, events)
        // Running out of file descriptors at start-up leaves the process nothing useful to do.
        guard opened == 0 else { fatalError("CurlHTTP: cannot create its epoll/eventfd descriptors (errno \(opened))") }
        let perHost = max(1, configuration.maximumConnectionsPerHost)
        let total = max(perHost, configuration.maximumTotalConnections)
        _ = siwa_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, perHost)
        _ = siwa_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, total)
        // The idle-connection cache: big enough to keep every connection we allow open.
        _ = siwa_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, total)
    }

    deinit {
        siwa_curl_events_close(events)
        events.deallocate()
    }

    /// The network thread's name, as `/proc/PID/task/TID/comm` shows it.
    static let threadName = "siwa-curl"

    func start() {
        let thread = Thread { [self] in
            // Named from inside, for the kernel: a new thread starts with its creator's name, and
            // Foundation's `Thread.current.name` did not always reach the kernel (a test that read
            // /proc/self/task/TID/comm found the Dispatch worker's name it was created from).
            _ = siwa_current_thread_set_name(Self.threadName)
            if yields { _ = siwa_thread_schedule_as_batch(0) }
            networkThreadID.withLock { $0 = siwa_current_thread_id() }
            run()
        }
        thread.start()
    }

    // MARK: Any thread

    func reserve() -> UInt64 {
        state.withLock { $0.table.reserve() }
    }

    /// Up to this many requests in flight, a submitter starts its request itself when it can. With more,
    /// the network thread wakes for answers all the time and starts new requests on those turns at no
    /// extra wake-up, and libcurl's work cost the submitting event loop more than it saved the network
    /// thread (`siwa-loadtest` at 512 browsers: 509 against 470 µs of server CPU per sign-in; at 16,
    /// where each start cost the thread a wake-up of its own, 625–778 against 676–791 µs).
    static let startHereUpTo = 32

    func submit(_ transfer: Transfer) {
        let (action, inFlight) = state.withLock { ($0.table.submit(transfer.id, transfer), $0.table.count) }
        switch action {
        case .enqueued:
            if inFlight > Self.startHereUpTo || !startHere(transfer.id) { wakeIfDue() }
        case .failCancelled: transfer.resume(with: .failure(.cancelled))
        case .failShutDown: transfer.resume(with: .failure(.shutDown))
        }
    }

    /// Starts a transfer just queued by this thread when the loop thread is not driving libcurl (it is
    /// waiting in `epoll_wait`, usually): attached, and libcurl connects or sends at once. Wakes the
    /// loop thread only if libcurl's timer now falls before the end of its wait. False when the loop
    /// thread holds the driver: it starts the transfer on its next turn.
    private func startHere(_ id: UInt64) -> Bool {
        var finished: [Finished] = []
        let outcome = driver.withLockIfAvailable { driver -> (started: Bool, wake: Bool) in
            guard !driver.stopped else { return (true, false) }  // shut down: the table fails it
            // Nil: cancelled or failed meanwhile, or already drained by the loop thread.
            guard let transfer = state.withLock({ $0.table.take(id) }) else { return (true, false) }
            if let failed = attach(id, transfer, to: &driver) {
                finished.append(failed)
                return (true, false)
            }
            // An added handle arms libcurl's timer at 0 ms: this runs it, which starts the transfer.
            var running: Int32 = 0
            _ = siwa_curl_multi_timeout_action(multi, &running)
            collectFinished(&driver, into: &finished)
            return (true, siwa_curl_events_timer_before_wake(events) != 0)
        }
        finish(finished)
        guard let outcome else { return false }
        if outcome.wake { wake() }
        return outcome.started
    }

    /// Writes the eventfd unless a wake-up is already pending.
    private func wakeIfDue() {
        if state.withLock({ Self.wakeUpDue(&$0) }) { siwa_curl_events_wake(events) }
    }

    /// Writes the eventfd: libcurl's timer moved before the end of the loop thread's wait.
    private func wake() {
        state.withLock { $0.wakeUps += 1 }
        siwa_curl_events_wake(events)
    }

    func cancel(_ id: UInt64) {
        let (action, wake) = state.withLock { state in
            let action = state.table.cancel(id)
            guard case .failActive = action else { return (action, false) }
            return (action, Self.wakeUpDue(&state))
        }
        if wake { siwa_curl_events_wake(events) }
        switch action {
        case .none: break
        case .failQueued(let transfer), .failActive(let transfer): transfer.resume(with: .failure(.cancelled))
        }
    }

    /// Tells the thread to stop, without waiting for it.
    func beginShutdown() {
        let (failed, wake) = state.withLock { state in
            let failed = state.table.beginShutdown()
            return (failed, Self.wakeUpDue(&state))
        }
        if wake { siwa_curl_events_wake(events) }
        for transfer in failed { transfer.resume(with: .failure(.shutDown)) }
    }

    /// Stops the thread and returns once it has ended.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (failed, stopped, wake) = state.withLock { state in
                guard state.table.phase != .stopped else { return ([Transfer](), true, false) }
                state.exitWaiters.append(continuation)
                let failed = state.table.beginShutdown()
                return (failed, false, Self.wakeUpDue(&state))
            }
            if wake { siwa_curl_events_wake(events) }
            for transfer in failed { transfer.resume(with: .failure(.shutDown)) }
            if stopped { continuation.resume() }
        }
    }

    /// Connections the multi handle has opened so far (a connection reused from the
    /// cache is not counted).
    var connectionsOpened: Int {
        state.withLock { $0.connectionsOpened }
    }

    var requestsInFlight: Int {
        state.withLock { $0.table.count }
    }

    /// Eventfd writes so far: a request started by its submitter while the loop thread waits needs none.
    var wakeUpsWritten: Int {
        state.withLock { $0.wakeUps }
    }

    /// Whether the caller must write the eventfd once it has let go of the lock: not when the thread has
    /// stopped, nor when a wake-up is already pending (the thread drains everything once it wakes).
    private static func wakeUpDue(_ state: inout State) -> Bool {
        guard state.table.phase != .stopped, !state.wakePending else { return false }
        state.wakePending = true
        state.wakeUps += 1
        return true
    }

    // MARK: Loop thread

    private func run() {
        // What one epoll_wait reported: socket and CURL_CSELECT_* flags (the C side caps it at 256).
        var readySockets = [Int32](repeating: 0, count: 256)
        var readyFlags = [Int32](repeating: 0, count: 256)

        while true {
            var finished: [Finished] = []
            // The turn's new work, and how long the wait may then last (libcurl's timer, at most 1 s).
            let timeout = driver.withLock { driver -> Int32? in
                let work = state.withLock { state in
                    state.wakePending = false
                    return state.table.drain()
                }
                for (id, transfer) in work.starts {
                    if let failed = attach(id, transfer, to: &driver) { finished.append(failed) }
                }
                for id in work.cancellations {
                    // Already failed with `.cancelled` by the cancelling thread; only detach.
                    if let handle = driver.attached.removeValue(forKey: id) {
                        curl_multi_remove_handle(multi, handle.raw)
                    }
                }
                if work.shuttingDown {
                    for (id, handle) in driver.attached {
                        curl_multi_remove_handle(multi, handle.raw)
                        finished.append((id, handle.transfer, .failure(.shutDown), 0))
                    }
                    driver.attached.removeAll()
                    driver.stopped = true
                    return nil
                }
                // Added handles arm the timer at 0 ms, so new transfers start at once after this wait.
                return siwa_curl_events_plan_wait(events, 1000)
            }
            finish(finished)
            guard let timeout else { break }

            // Sleeps until a socket is ready, libcurl's timer is due, or another thread wakes us.
            let ready = siwa_curl_events_wait(events, &readySockets, &readyFlags, Int32(readySockets.count), timeout)
            finished = []
            driver.withLock { driver in
                var running: Int32 = 0
                for index in 0..<Int(max(0, ready)) {
                    _ = siwa_curl_multi_socket_action(multi, readySockets[index], readyFlags[index], &running)
                }
                if siwa_curl_events_take_due_timer(events) != 0 {
                    _ = siwa_curl_multi_timeout_action(multi, &running)
                }
                collectFinished(&driver, into: &finished)
            }
            finish(finished)
        }

        let (waiters, leftovers) = state.withLock { state in
            let leftovers = state.table.finishShutdown()
            defer { state.exitWaiters.removeAll() }
            return (state.exitWaiters, leftovers)
        }
        // Under the driver: a submitter that took its transfer before `stopped` was set has let go by now.
        _ = driver.withLock { _ in curl_multi_cleanup(multi) }
        for transfer in leftovers { transfer.resume(with: .failure(.shutDown)) }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: Holder of the driver

    /// Attaches a transfer to the multi handle; one that cannot be attached is returned, failed.
    private func attach(_ id: UInt64, _ transfer: Transfer, to driver: inout Driver) -> Finished? {
        guard let handle = EasyHandle(transfer: transfer) else {
            return (id, transfer, .failure(.transport(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_easy_init failed")), 0)
        }
        if let error = handle.configure() {
            return (id, transfer, .failure(error), 0)
        }
        let added = curl_multi_add_handle(multi, handle.raw)
        guard added == CURLM_OK else {
            let message = String(cString: curl_multi_strerror(added))
            return (id, transfer, .failure(.transport(code: Int(added.rawValue), message: message)), 0)
        }
        driver.attached[id] = handle
        return nil
    }

    /// Detaches the transfers libcurl has finished and adds them to `finished`.
    private func collectFinished(_ driver: inout Driver, into finished: inout [Finished]) {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            var context: UnsafeMutableRawPointer?
            _ = siwa_curl_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &context)
            guard let context else { continue }
            // Set by EasyHandle.configure to itself; `attached` still holds it here.
            let handle = Unmanaged<EasyHandle>.fromOpaque(context).takeUnretainedValue()
            let result = handle.result(for: message.pointee.data.result)
            curl_multi_remove_handle(multi, easy)
            driver.attached[handle.transfer.id] = nil
            finished.append((handle.transfer.id, handle.transfer, result, handle.newConnections))
        }
    }

    // MARK: Any thread, holding no lock

    private func finish(_ finished: [Finished]) {
        guard !finished.isEmpty else { return }
        state.withLock { state in
            for item in finished {
                state.table.complete(item.id)
                state.connectionsOpened += item.opened
            }
        }
        for item in finished { item.transfer.resume(with: item.result) }
    }
}
