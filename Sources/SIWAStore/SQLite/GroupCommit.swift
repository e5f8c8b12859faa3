import NIOPosix
import SQLKit
import Synchronization

/// Group commit: the writes that are ready at the same moment share one SQLite transaction.
///
/// Each write still runs alone, in arrival order, holding the ``WriteGate``; each after the first runs
/// inside a savepoint of its own: one that throws is rolled back alone, and its caller gets the error
/// at once (a first write that throws rolls the transaction back). The first write of a group opens
/// the transaction (`BEGIN IMMEDIATE`), lets the tasks that are ready run (those that write join the
/// group; see ``GroupPacing`` for when it does not wait), then takes the gate again in line and commits.
/// No caller returns before the commit that holds its write: a write that returned is durable as
/// before, and a commit that fails fails every write of its group.
///
/// Why: a commit costs SQLite its locks on the database and the wal-index (6 `fcntl`s per transaction)
/// and the WAL frames of every page it changed (5.3 `pwrite`s for one pending authorization), and
/// SQLite was a quarter of `GET /auth/apple`'s CPU (perf, 16 clients). Writes of one group share them;
/// pages two of them change (a table's last leaf, an index's) are written once.
///
/// While a group's transaction is open the writer's connection serves no reads (``WriteGate/runIfFree(_:)``
/// refuses, so they go to a reader and see only what is committed), and shutdown commits an open group
/// before it closes the writer. The checkpointer's gated step needs no commit first: an open group has
/// written no frame yet, and its commit waits behind that step.
extension SQLitePool {
    /// What a write is, for when it runs alone: statements that each commit on their own, or one
    /// transaction.
    enum WriteKind: Sendable {
        case statements
        case transaction
    }

    /// Runs `body` on the writer as one write of a group (see above); returns after its group committed.
    /// A write that would lead a group which ``GroupPacing`` says will have no company runs alone, as
    /// writes ran before group commit (`kind` says how).
    func batchedWrite<R: Sendable>(_ kind: WriteKind, _ body: @Sendable (SQLiteSession) async throws -> R) async throws -> R {
        let session = SQLiteSession(connection: writer, logger: logger)
        let (result, ticket, leads) = try await writeGate.run { () async throws -> (R, CommitTicket?, Bool) in
            let leads = openGroup.withLock { $0 == nil }
            if leads {
                guard groupPacing.withLock({ $0.waitsForOthers() }) else {
                    return (try await Self.runAlone(kind, session, body), nil, true)
                }
                try await session.raw(SQLQueryString(Dialect.sqlite.beginTransaction)).run()
                openGroup.withLock { $0 = [] }
                writeGate.setTransactionOpen(true)
            }
            // The first write needs no savepoint: until it is done nobody else is in the transaction, and
            // when it throws the whole transaction is rolled back.
            if !leads { try await session.raw("SAVEPOINT siwa_write").run() }
            let result: R
            do {
                result = try await body(session)
                if !leads { try await session.raw("RELEASE siwa_write").run() }
            } catch {
                if leads {
                    await endGroup(committing: false)
                } else {
                    do {
                        try await session.raw("ROLLBACK TO siwa_write").run()
                        try await session.raw("RELEASE siwa_write").run()
                    } catch {
                        // Its changes could not be undone alone: the whole group fails rather than keep them.
                        await endGroup(committing: false)
                    }
                }
                throw error
            }
            let ticket = CommitTicket()
            openGroup.withLock { $0?.append(ticket) }
            return (result, ticket, leads)
        }
        guard let ticket else { return result }  // ran alone: committed already
        if leads {
            // The writes that are ready now join; then the commit waits its turn like any writer.
            await Self.letReadyTasksRun()
            await writeGate.runWithoutFailing { await endGroup(committing: true) }
        }
        try await ticket.wait()
        return result
    }

    /// A write with the writer to itself: its statements as they are, or one transaction.
    private static func runAlone<R: Sendable>(
        _ kind: WriteKind, _ session: SQLiteSession, _ body: @Sendable (SQLiteSession) async throws -> R
    ) async throws -> R {
        guard kind == .transaction else { return try await body(session) }
        return try await session.inTransaction(begin: Dialect.sqlite.beginTransaction) { try await body(session) }
    }

    /// Lets the tasks already queued on this event loop run first: this task goes on from the back of the
    /// loop's queue. (`Task.yield()` handed it to Dispatch's pool and back instead, two thread wake-ups:
    /// +70 µs of CPU per `GET /auth/apple` with one client.) Off an event loop, `Task.yield()`.
    static func letReadyTasksRun() async {
        guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else { return await Task.yield() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { continuation.resume() }
        }
    }

    /// Commits (or rolls back) the open group, if any, and tells each of its writes. The gate's holder
    /// calls this.
    func endGroup(committing: Bool) async {
        guard let tickets = openGroup.withLock({ group -> [CommitTicket]? in
            defer { group = nil }
            return group
        }) else { return }
        let session = SQLiteSession(connection: writer, logger: logger)
        let outcome: Result<Void, any Error>
        do {
            // Rolled back on purpose: its writes were not kept, as when the database cannot take them.
            guard committing else { throw StoreError.unavailable("a write of its group could not be undone alone; the group was rolled back") }
            try await session.raw("COMMIT").run()
            outcome = .success(())
            groupsCommitted.add(1, ordering: .relaxed)
            writesCommitted.add(tickets.count, ordering: .relaxed)
            groupPacing.withLock { $0.committed(writes: tickets.count) }
        } catch {
            // SQLite may have ended the transaction itself (an I/O error during COMMIT); then this fails too.
            try? await session.raw("ROLLBACK").run()
            outcome = .failure(error)
        }
        writeGate.setTransactionOpen(false)
        for ticket in tickets { ticket.complete(outcome) }
    }
}

/// Whether a write that finds no group open starts one (and lets the ready tasks run before its commit)
/// or runs alone, as writes ran before group commit. On a server with one request at a time nobody
/// joins, and a group only costs (its `BEGIN`/`COMMIT` around single statements, two turns of the event
/// loop's queue: +8 % CPU per `GET /auth/apple` with one client): such a write runs alone, unless it is
/// one in eight, which starts a group to see whether others come. Once a group had company, every
/// write starts one until a group has none again.
struct GroupPacing {
    static let sampleEvery = 8
    private var grouping: Bool
    private var sinceSample = 0

    init(grouping: Bool = false) {
        self.grouping = grouping
    }

    mutating func waitsForOthers() -> Bool {
        sinceSample += 1
        if grouping || sinceSample >= Self.sampleEvery {
            sinceSample = 0
            return true
        }
        return false
    }

    mutating func committed(writes: Int) {
        grouping = writes > 1
    }
}

extension WriteGate {
    /// `run` for a body that cannot throw.
    func runWithoutFailing(_ body: @Sendable () async -> Void) async {
        _ = try? await run { await body() }
    }
}

/// One write's wait for its group's commit: completed once, waited for once (before or after).
final class CommitTicket: Sendable {
    private enum State {
        case pending(CheckedContinuation<Void, any Error>?)
        case done(Result<Void, any Error>)
    }

    private let state = Mutex(State.pending(nil))

    func complete(_ outcome: Result<Void, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard case .pending(let waiter) = state else { return nil }
            state = .done(outcome)
            return waiter
        }
        waiter?.resume(with: outcome)
    }

    func wait() async throws {
        // Already committed (the usual case for the group's first write): no suspension.
        if case .done(let outcome) = state.withLock({ $0 }) { return try outcome.get() }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome = state.withLock { state -> Result<Void, any Error>? in
                switch state {
                case .done(let outcome): return outcome
                case .pending: state = .pending(continuation); return nil
                }
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }
}
