import Foundation
import Logging
import NIOPosix
import SQLiteDirect
import Synchronization

/// The SQLite connections of one database file: one writer, used only by the holder of the pool's
/// ``writeGate``, and readers handed out one user at a time (WAL lets them read beside the writer).
/// Statements run on the caller's thread (see ``SQLiteSession``); a background task copies the WAL into
/// the database file, so no commit ever waits for that checkpoint's fsync.
final class SQLitePool: Sendable {
    let path: String
    let logger: Logger
    /// One writer at a time from this process (SIWADatabase's writes and the checkpointer's last step).
    let writeGate = WriteGate()
    /// Used only by the write gate's holder.
    let writer: SQLiteConnection
    /// The writes of the group whose transaction is open on the writer (nil: none is open); see
    /// `batchedWrite`. Touched only by the write gate's holder.
    let openGroup = Mutex<[CommitTicket]?>(nil)
    let groupPacing = Mutex(GroupPacing())
    /// Groups committed, and the writes they held (tests and diagnostics).
    let groupsCommitted = Atomic<Int>(0)
    let writesCommitted = Atomic<Int>(0)
    private let readers: Mutex<Readers>
    private let maximumReaders: Int
    private let checkpointing: Mutex<Task<Void, Never>?>

    private struct Readers {
        var idle: [SQLiteConnection] = []
        var open = 0
        var waiters: [CheckedContinuation<SQLiteConnection, any Error>] = []
        var closed = false
    }

    /// Opens the writer (which switches the file to WAL, once for good) and starts the checkpointer.
    /// `maximumReaders` bounds the connections open for reading at once; more readers wait their turn.
    /// `openCheckpointConnection` opens the checkpointer's connection (tests make it fail).
    init(
        path: String, maximumReaders: Int, logger: Logger,
        openCheckpointConnection: @escaping @Sendable (String) throws -> SQLiteConnection = SQLitePool.connect
    ) throws {
        self.path = path
        self.logger = logger
        self.maximumReaders = max(1, maximumReaders)
        writer = try Self.connect(path)
        // WAL is a property of the file: every later connection (and process) uses it. Switching needs
        // the file to itself for a moment, so at start-up (and only here) SQLite may wait for another
        // process's lock, as it did before this pool existed.
        writer.setBusyTimeout(milliseconds: 10_000)
        try writer.executeScript("PRAGMA journal_mode = WAL")
        writer.setBusyTimeout(milliseconds: 0)
        readers = Mutex(Readers())
        checkpointing = Mutex(nil)
        startCheckpointing(open: openCheckpointConnection)
    }

    /// A connection set up as siwa needs it: foreign keys on; `synchronous = NORMAL` (in WAL a commit no
    /// longer waits for an fsync, only checkpoints do: every commit stays atomic and survives a crash of
    /// the process; a power loss may undo the last commits, never corrupt the file); no automatic
    /// checkpoint (the pool's task runs them); no waiting in SQLite for locks (see ``SQLiteSession``).
    static func connect(_ path: String) throws -> SQLiteConnection {
        let connection = try SQLiteConnection(path: path)
        connection.setBusyTimeout(milliseconds: 0)
        try connection.executeScript("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0;")
        return connection
    }

    /// Runs `body` with the writer. Only the holder of the write gate may call this.
    func withWriter<R>(_ body: (SQLiteSession) async throws -> R) async throws -> R {
        try await body(SQLiteSession(connection: writer, logger: logger))
    }

    /// Runs `body` with a reader of its own.
    func withReader<R>(_ body: (SQLiteSession) async throws -> R) async throws -> R {
        let connection = try await checkOut()
        defer { checkIn(connection) }
        return try await body(SQLiteSession(connection: connection, logger: logger))
    }

    private enum Take {
        case use(SQLiteConnection)
        case open
        case wait
        case closed
    }

    private func checkOut() async throws -> SQLiteConnection {
        let take = readers.withLock { state -> Take in
            if state.closed { return .closed }
            if let idle = state.idle.popLast() { return .use(idle) }
            if state.open < maximumReaders {
                state.open += 1
                return .open
            }
            return .wait
        }
        switch take {
        case .use(let connection):
            return connection
        case .closed:
            throw StoreError.unavailable("the database pool is closed")
        case .open:
            do {
                return try Self.connect(path)
            } catch {
                readers.withLock { $0.open -= 1 }
                throw error
            }
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                let ready = readers.withLock { state -> Result<SQLiteConnection, any Error>? in
                    if state.closed { return .failure(StoreError.unavailable("the database pool is closed")) }
                    if let idle = state.idle.popLast() { return .success(idle) }
                    state.waiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }

    private func checkIn(_ connection: SQLiteConnection) {
        let waiter = readers.withLock { state -> CheckedContinuation<SQLiteConnection, any Error>? in
            if !state.waiters.isEmpty { return state.waiters.removeFirst() }
            if state.closed {
                state.open -= 1
                connection.close()
            } else {
                state.idle.append(connection)
            }
            return nil
        }
        waiter?.resume(returning: connection)
    }

    // MARK: - Checkpoints

    /// How often the WAL is copied back into the database file (and then reused from its start).
    static let checkpointInterval: Duration = .milliseconds(500)

    /// Every `checkpointInterval`: first the WAL is copied beside the writers (the bulk of the pages and
    /// both fsyncs), then the few frames committed meanwhile (under steady load there always are some)
    /// are copied while the write gate is held, so the copy reaches the WAL's end.
    /// Only a completely copied WAL is started over from its beginning by the next writer; without the
    /// second step a busy server's WAL never was: it grew by every commit's frames (236 MB in 13 s at
    /// 512 browsers), each append writing fresh file blocks and each read searching a longer wal-index.
    private func startCheckpointing(open openConnection: @escaping @Sendable (String) throws -> SQLiteConnection) {
        let path = path
        let logger = logger
        let writeGate = writeGate
        let task = Task.detached {
            // Its own connection, and its own thread for opening it, the copy and its fsync.
            let thread = NIOThreadPool(numberOfThreads: 1)
            thread.start()
            let loop = MultiThreadedEventLoopGroup.singleton.any()
            // The future form: a cancelled task still lets a started step finish.
            @Sendable func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
                try await thread.runIfActive(eventLoop: loop, work).get()
            }
            // Opened at the first tick, and at every later one until that works: opening reads the
            // schema, which can meet another connection's recovery of the WAL index or another process's
            // lock (SQLITE_BUSY). Given up at the first failure, as it once was, the WAL grew until a restart.
            var connection: SQLiteConnection?
            var openFailureReported = false
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.checkpointInterval)
                guard !Task.isCancelled else { break }
                do {
                    let open: SQLiteConnection
                    if let connection {
                        open = connection
                    } else {
                        open = try await onThread { try openConnection(path) }
                        connection = open
                        if openFailureReported { logger.notice("SQLite checkpointer opened \(path) after all") }
                    }
                    try await onThread { try open.checkpointPassive() }
                    // The frames committed during that copy; writers wait meanwhile (~0.1–5 ms at 512 browsers).
                    if !Task.isCancelled {
                        try await writeGate.run { try await onThread { try open.checkpointPassive() } }
                    }
                } catch let error as SQLiteError where error.isBusy {
                    // Another connection is checkpointing, recovering or holding the file: the next tick tries again.
                } catch {
                    if connection != nil {
                        logger.warning("SQLite checkpoint failed", metadata: ["error": "\(error)"])
                    } else if !openFailureReported {
                        openFailureReported = true
                        logger.error("SQLite checkpointer cannot open \(path); trying again every \(Self.checkpointInterval)", metadata: ["error": "\(error)"])
                    }
                }
            }
            connection?.close()
            try? await thread.shutdownGracefully()
        }
        checkpointing.withLock { $0 = task }
    }

    // MARK: - Shutdown

    /// Stops the checkpointer and closes every connection; waiting readers fail with `unavailable`.
    func shutdown() async {
        if let task = checkpointing.withLock({ $0 }) {
            task.cancel()
            await task.value
        }
        let (idle, waiters) = readers.withLock { state in
            state.closed = true
            defer {
                state.open -= state.idle.count
                state.idle = []
                state.waiters = []
            }
            return (state.idle, state.waiters)
        }
        for connection in idle { connection.close() }
        for waiter in waiters { waiter.resume(throwing: StoreError.unavailable("the database pool is closed")) }
        // A group's writes are committed before the writer closes.
        await writeGate.runWithoutFailing { await endGroup(committing: true) }
        writer.close()
    }
}
