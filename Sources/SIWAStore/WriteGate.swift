import Synchronization

/// Lets one SQLite write at a time into the database from this process, in arrival order.
///
/// SQLite has a single writer. Without the gate, pooled connections race for the write lock and the
/// losers wait in SQLite's busy handler, which *sleeps* (1, 2, 5 … 100 ms) on a blocked thread before
/// trying again: under load most of a sign-in's time went to those sleeps, with the cores idle
/// (~110 sign-ins/s). Waiting here instead costs no thread and wakes the next writer the moment the
/// previous one commits. Other processes (a `siwa transfer` beside `siwa serve`) are still kept
/// apart by SQLite's lock and `busy_timeout`.
///
/// PostgreSQL needs no gate: its writers lock rows, not the database.
final class WriteGate: Sendable {
    private struct State {
        var held = false
        /// A write transaction is open on the writer between its holders (group commit, see
        /// `SQLitePool.batchedWrite`): the writer's connection is not for reading then.
        var transactionOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Index of the next waiter to wake; the array is compacted when it is drained.
        var head = 0
    }

    private let state = Mutex(State())

    /// Runs `body` while holding the gate; the next waiter enters as soon as it returns or throws.
    func run<R: Sendable>(_ body: @Sendable () async throws -> R) async throws -> R {
        // A free gate is taken without suspending: a continuation suspends the task even when resumed at
        // once, and the gate would stay held, idle, until the executor ran the task again (readers then
        // found it taken and used a reader connection with a cold cache).
        if !tryEnter() { await enter() }
        defer { leave() }
        return try await body()
    }

    /// Runs `body` holding the gate if it is free right now and no write transaction is open; nil (and
    /// `body` not run) otherwise. For reads on the writer's connection: it then has nothing uncommitted.
    func runIfFree<R: Sendable>(_ body: @Sendable () async throws -> R) async throws -> R? {
        guard tryEnter(forReading: true) else { return nil }
        defer { leave() }
        return try await body()
    }

    /// Marks a write transaction open (or closed) across holders. Only the holder calls this.
    func setTransactionOpen(_ open: Bool) {
        state.withLock { $0.transactionOpen = open }
    }

    /// Takes the gate if nobody holds it (then nobody waits either: waiters only queue behind a holder).
    private func tryEnter(forReading: Bool = false) -> Bool {
        state.withLock { state in
            guard !state.held, !(forReading && state.transactionOpen) else { return false }
            state.held = true
            return true
        }
    }

    private func enter() async {
        // Not cancellable on purpose: the wait is as long as the writes ahead of us (microseconds to a few
        // milliseconds each), and a cancelled waiter would have to be found and removed from the queue.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let enterNow = state.withLock { state -> Bool in
                if state.held {
                    state.waiters.append(continuation)
                    return false
                }
                state.held = true
                return true
            }
            if enterNow { continuation.resume() }
        }
    }

    private func leave() {
        // Ownership passes straight to the next waiter (`held` stays true), so nobody can overtake it.
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.waiters.count else {
                state.waiters.removeAll(keepingCapacity: true)
                state.head = 0
                state.held = false
                return nil
            }
            let next = state.waiters[state.head]
            state.head += 1
            return next
        }
        next?.resume()
    }

    /// Writers waiting right now (for tests and diagnostics).
    var waiting: Int { state.withLock { $0.waiters.count - $0.head } }
}
