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
/// Other threads talk to it only through `state` (requests to start, cancellations,
/// shutdown) followed by a write to the loop's eventfd, which ends its `epoll_wait`.
///
/// `@unchecked Sendable` because of `multi` and `events`: both are used only on the loop
/// thread, except for the wake-up write to `events.wake_fd`, which any thread may do after
/// deciding under the lock that a wake-up is due: the descriptors stay open until `deinit`, and
/// the thread holds the loop while it runs. The write is done outside the lock, so the woken thread
/// does not find the lock still held by its waker (perf showed it spinning in `Mutex._lockSlow`).
final class CurlMultiLoop: @unchecked Sendable {
    private struct State {
        var table = RequestTable<Transfer>()
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        var connectionsOpened = 0
        /// The eventfd has been written since the loop last drained the table: another write would only
        /// cost a system call (under the lock), since the loop drains everything once it wakes.
        var wakePending = false
    }

    private let multi: UnsafeMutableRawPointer
    /// The epoll and eventfd descriptors and libcurl's timer. Allocated here and handed to libcurl as the
    /// callbacks' user pointer; closed and freed in `deinit`, after the loop thread's `curl_multi_cleanup`
    /// (a `CurlMultiLoop` is never deinitialised while its thread runs: `run` holds it).
    private let events: UnsafeMutablePointer<siwa_curl_events>
    private let state = Mutex(State())

    init(configuration: CurlHTTPClient.Configuration) {
        precondition(CurlGlobal.initialized, "curl_global_init failed")
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
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

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "siwa-curl"
        thread.start()
    }

    // MARK: Any thread

    func reserve() -> UInt64 {
        state.withLock { $0.table.reserve() }
    }

    func submit(_ transfer: Transfer) {
        let (action, wake) = state.withLock { state in
            let action = state.table.submit(transfer.id, transfer)
            guard case .enqueued = action else { return (action, false) }
            return (action, Self.wakeUpDue(&state))
        }
        if wake { siwa_curl_events_wake(events) }
        switch action {
        case .enqueued: break
        case .failCancelled: transfer.resume(with: .failure(.cancelled))
        case .failShutDown: transfer.resume(with: .failure(.shutDown))
        }
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

    /// Whether the caller must write the eventfd once it has let go of the lock: not when the thread has
    /// stopped, nor when a wake-up is already pending (the thread drains everything once it wakes).
    private static func wakeUpDue(_ state: inout State) -> Bool {
        guard state.table.phase != .stopped, !state.wakePending else { return false }
        state.wakePending = true
        return true
    }

    // MARK: Loop thread

    private func run() {
        // Strong references to every attached handle: this is what keeps the pointers
        // given to libcurl (CURLOPT_PRIVATE, WRITEDATA, HEADERDATA) valid.
        var attached: [UInt64: EasyHandle] = [:]
        // What one epoll_wait reported: socket and CURL_CSELECT_* flags (the C side caps it at 256).
        var readySockets = [Int32](repeating: 0, count: 256)
        var readyFlags = [Int32](repeating: 0, count: 256)

        while true {
            let work = state.withLock { state in
                state.wakePending = false
                return state.table.drain()
            }

            for (id, transfer) in work.starts {
                guard let handle = EasyHandle(transfer: transfer) else {
                    finish(id, transfer, .failure(.transport(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_easy_init failed")))
                    continue
                }
                if let error = handle.configure() {
                    finish(id, transfer, .failure(error))
                    continue
                }
                let added = curl_multi_add_handle(multi, handle.raw)
                guard added == CURLM_OK else {
                    let message = String(cString: curl_multi_strerror(added))
                    finish(id, transfer, .failure(.transport(code: Int(added.rawValue), message: message)))
                    continue
                }
                attached[id] = handle
            }

            for id in work.cancellations {
                // Already failed with `.cancelled` by the cancelling thread; only detach.
                if let handle = attached.removeValue(forKey: id) {
                    curl_multi_remove_handle(multi, handle.raw)
                }
            }

            if work.shuttingDown {
                for (id, handle) in attached {
                    curl_multi_remove_handle(multi, handle.raw)
                    finish(id, handle.transfer, .failure(.shutDown))
                }
                attached.removeAll()
                break
            }

            // Sleeps until a socket is ready, libcurl's timer is due, or another thread wakes us. Added
            // handles arm the timer at 0 ms, so new transfers start on this very turn.
            var running: Int32 = 0
            let ready = siwa_curl_events_wait(events, &readySockets, &readyFlags, Int32(readySockets.count), 1000)
            for index in 0..<Int(max(0, ready)) {
                _ = siwa_curl_multi_socket_action(multi, readySockets[index], readyFlags[index], &running)
            }
            if siwa_curl_events_take_due_timer(events) != 0 {
                _ = siwa_curl_multi_timeout_action(multi, &running)
            }

            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                var context: UnsafeMutableRawPointer?
                _ = siwa_curl_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &context)
                guard let context else { continue }
                // Set by EasyHandle.configure to itself; `attached` still holds it here.
                let handle = Unmanaged<EasyHandle>.fromOpaque(context).takeUnretainedValue()
                let result = handle.result(for: message.pointee.data.result)
                let opened = handle.newConnections
                curl_multi_remove_handle(multi, easy)
                attached[handle.transfer.id] = nil
                finish(handle.transfer.id, handle.transfer, result, connectionsOpened: opened)
            }
        }

        let (waiters, leftovers) = state.withLock { state in
            let leftovers = state.table.finishShutdown()
            defer { state.exitWaiters.removeAll() }
            return (state.exitWaiters, leftovers)
        }
        curl_multi_cleanup(multi)
        for transfer in leftovers { transfer.resume(with: .failure(.shutDown)) }
        for waiter in waiters { waiter.resume() }
    }

    private func finish(_ id: UInt64, _ transfer: Transfer, _ result: Result<HTTPClientResponse, HTTPClientError>,
                        connectionsOpened opened: Int = 0) {
        state.withLock { state in
            state.table.complete(id)
            state.connectionsOpened += opened
        }
        transfer.resume(with: result)
    }
}
