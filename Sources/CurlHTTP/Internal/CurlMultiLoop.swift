import Foundation
import Synchronization
internal import CCurl

/// The network thread: owns the curl multi handle and runs every transfer on it.
///
/// Other threads talk to it only through `state` (requests to start, cancellations,
/// shutdown) followed by `curl_multi_wakeup`, which interrupts `curl_multi_poll`.
///
/// `@unchecked Sendable` because of `multi`: it is used only on the loop thread,
/// except for `curl_multi_wakeup`, which libcurl documents as callable from any
/// thread, and which we call only under the lock while the phase is not `.stopped`
/// (the thread sets `.stopped` under the same lock before `curl_multi_cleanup`).
final class CurlMultiLoop: @unchecked Sendable {
    private struct State {
        var table = RequestTable<Transfer>()
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        var connectionsOpened = 0
    }

    private let multi: UnsafeMutableRawPointer
    private let state = Mutex(State())

    init(configuration: CurlHTTPClient.Configuration) {
        precondition(CurlGlobal.initialized, "curl_global_init failed")
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        let perHost = max(1, configuration.maximumConnectionsPerHost)
        let total = max(perHost, configuration.maximumTotalConnections)
        _ = siwa_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, perHost)
        _ = siwa_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, total)
        // The idle-connection cache: big enough to keep every connection we allow open.
        _ = siwa_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, total)
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
        let action = state.withLock { state in
            let action = state.table.submit(transfer.id, transfer)
            if case .enqueued = action { wakeUp(state) }
            return action
        }
        switch action {
        case .enqueued: break
        case .failCancelled: transfer.resume(with: .failure(.cancelled))
        case .failShutDown: transfer.resume(with: .failure(.shutDown))
        }
    }

    func cancel(_ id: UInt64) {
        let action = state.withLock { state in
            let action = state.table.cancel(id)
            if case .failActive = action { wakeUp(state) }
            return action
        }
        switch action {
        case .none: break
        case .failQueued(let transfer), .failActive(let transfer): transfer.resume(with: .failure(.cancelled))
        }
    }

    /// Tells the thread to stop, without waiting for it.
    func beginShutdown() {
        let failed = state.withLock { state in
            let failed = state.table.beginShutdown()
            wakeUp(state)
            return failed
        }
        for transfer in failed { transfer.resume(with: .failure(.shutDown)) }
    }

    /// Stops the thread and returns once it has ended.
    func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (failed, stopped) = state.withLock { state in
                guard state.table.phase != .stopped else { return ([Transfer](), true) }
                state.exitWaiters.append(continuation)
                let failed = state.table.beginShutdown()
                wakeUp(state)
                return (failed, false)
            }
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

    private func wakeUp(_ state: borrowing State) {
        guard state.table.phase != .stopped else { return }
        _ = curl_multi_wakeup(multi)
    }

    // MARK: Loop thread

    private func run() {
        // Strong references to every attached handle: this is what keeps the pointers
        // given to libcurl (CURLOPT_PRIVATE, WRITEDATA, HEADERDATA) valid.
        var attached: [UInt64: EasyHandle] = [:]

        while true {
            let work = state.withLock { $0.table.drain() }

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

            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)

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
                state.withLock { $0.connectionsOpened += opened }
                finish(handle.transfer.id, handle.transfer, result)
            }

            // Sleeps until a socket is ready, a curl timer is due, or curl_multi_wakeup.
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
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

    private func finish(_ id: UInt64, _ transfer: Transfer, _ result: Result<HTTPClientResponse, HTTPClientError>) {
        state.withLock { $0.table.complete(id) }
        transfer.resume(with: result)
    }
}
