import Foundation
import Logging
import PostgresKit
import NIOCore
import SQLiteDirect
import SQLKit
import Synchronization

/// What every repository of the store shares: the one connection pool (SQLite or PostgreSQL), its write
/// discipline (SQLite's single writer, grouped commits), the mapping of errors to ``StoreError``, and the
/// announcements of ended sessions. ``SIWADatabase`` owns it and hands it to each repository.
final class StoreCore: Sendable {
    let backend: Backend
    let dialect: Dialect
    let logger: Logger
    let closed = Mutex(false)
    /// SQLite only: one writer at a time from this process (see ``WriteGate``).
    private let writeGate: WriteGate?
    /// When sessions may have ended, for a cache kept outside the store (the gateway's).
    let sessionChanges: SessionChanges
    /// PostgreSQL only: the channel writes that end sessions notify (``SessionChangeListener``).
    let sessionChannel: String?
    /// How many reads and writes went through this core (for tests: "no write per request" is counted).
    let activity = StoreActivity()

    init(backend: Backend, logger: Logger) {
        self.backend = backend
        self.dialect = backend.dialect
        self.logger = logger
        self.writeGate = backend.writeGate
        switch backend {
        case .sqlite:
            // One process serves a SQLite file: every write that ends a session happens here (`siwa admin`'s,
            // in a process of its own, reach a cache's one-second limit).
            self.sessionChanges = SessionChanges(hearsOthers: true)
            self.sessionChannel = nil
        case .postgres(_, let schema):
            self.sessionChanges = SessionChanges(hearsOthers: false)
            self.sessionChannel = SessionChangeListener.channel(schema: schema)
        }
    }

    // MARK: - Connection access

    /// Runs `body` on one pooled connection. For reads; writes go through ``write(_:)`` or ``transaction(_:)``.
    ///
    /// SQLite: on the writer connection when no write is under way, else on a reader. A connection's
    /// page cache is dropped whenever another connection has written since its last read, so a reader
    /// re-reads its pages after every sign-in's commit; the writer's cache stays valid across its own
    /// commits (perf: ~5 `pread`s and the B-tree pages decoded again for each session lookup).
    func withSQL<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        activity.reads.add(1, ordering: .relaxed)
        return try await anyConnection(body)
    }

    /// ``withSQL(_:)`` uncounted (PostgreSQL's writes run on it).
    private func anyConnection<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        if let writeGate, let result = try await writeGate.runIfFree({ try await onConnection(forWrites: true, body) }) {
            return result
        }
        return try await onConnection(forWrites: false, body)
    }

    /// One connection for `body`: a pooled one, or for the write-gate holder the one SQLite keeps per
    /// event loop for writes alone. Maps connection failures to ``StoreError``.
    private func onConnection<R: Sendable>(
        forWrites: Bool, _ body: @escaping @Sendable (any SQLDatabase) async throws -> R
    ) async throws -> R {
        if closed.withLock({ $0 }) { throw StoreError.unavailable("the database pool is closed") }
        do {
            return forWrites
                ? try await backend.withWriteConnection(logger: logger, body)
                : try await backend.withConnection(logger: logger, body)
        } catch {
            throw Self.map(error)
        }
    }

    /// Runs `body`, which writes, on one connection without an explicit transaction (each statement commits
    /// on its own). On SQLite it waits its turn at the ``WriteGate``, and when it joins or starts a group
    /// (see ``transaction(_:)``) it is one write of that group's transaction.
    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        activity.writes.add(1, ordering: .relaxed)
        if case .sqlite(let pool, _) = backend { return try await grouped(pool, .statements, body) }
        return try await anyConnection(body)
    }

    /// Runs `body` as one transaction: committed when it returns, rolled back when it throws. On SQLite it
    /// waits its turn at the ``WriteGate`` and runs as one write of a group that commits together (see
    /// `SQLitePool.batchedWrite`: in a savepoint of its own, inside a transaction begun IMMEDIATE so that the
    /// write lock is taken before any read); it returns once its group has committed.
    func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        activity.writes.add(1, ordering: .relaxed)
        if case .sqlite(let pool, _) = backend { return try await grouped(pool, .transaction, body) }
        return try await unguardedTransaction(body)
    }

    private func grouped<R: Sendable>(
        _ pool: SQLitePool, _ kind: SQLitePool.WriteKind, _ body: @escaping @Sendable (any SQLDatabase) async throws -> R
    ) async throws -> R {
        if closed.withLock({ $0 }) { throw StoreError.unavailable("the database pool is closed") }
        do {
            return try await pool.batchedWrite(kind) { try await body($0) }
        } catch {
            throw Self.map(error)
        }
    }

    private func unguardedTransaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        let begin = dialect.beginTransaction
        return try await onConnection(forWrites: true) { sql in
            try await sql.inTransaction(begin: begin) { try await body(sql) }
        }
    }

    // MARK: - Errors

    static func map(_ error: any Error) -> any Error {
        if error is StoreError { return error }
        if let error = error as? PSQLError {
            switch error.code {
            case .server:
                let state = error.serverInfo?[.sqlState] ?? ""
                let message = error.serverInfo?[.message] ?? "server error"
                // 23: integrity constraint violations (unique, foreign key, check, not null), as SQLite's
                // constraint errors below.
                if state.hasPrefix("23") { return StoreError.conflict(message) }
                // 08: connection exceptions; 28: authentication; 3D: no such database; 57P: server shutting down;
                // 53: out of resources (too many connections).
                if ["08", "28", "3D", "53"].contains(where: state.hasPrefix) || state.hasPrefix("57P") {
                    return StoreError.unavailable("\(message) (SQLSTATE \(state))")
                }
                return error
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown,
                 .poolClosed, .sslUnsupported, .failedToAddSSLHandler:
                return StoreError.unavailable(describe(error))
            default:
                return error
            }
        }
        if let error = error as? SQLiteError {
            if error.isConstraint { return StoreError.conflict(error.message) }
            if error.isUnavailable { return StoreError.unavailable(error.message) }
            return error
        }
        if error is ConnectionPoolError || error is ConnectionPoolTimeoutError
            || error is NIOConnectionError || error is ChannelError || error is IOError
        {
            return StoreError.unavailable(describe(error))
        }
        return error
    }

    /// A short, secret-free description (PSQLError's own description hides details on purpose).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        if let error = error as? ConnectionPoolError {
            switch error {
            case .shutdown: return "the connection pool is shut down"
            }
        }
        if error is ConnectionPoolTimeoutError { return "timed out waiting for a database connection" }
        return "\(error)"
    }
}

/// Counts of the store's uses since it opened: `reads` (``StoreCore/withSQL(_:)``) and `writes` (each
/// ``StoreCore/write(_:)`` or ``StoreCore/transaction(_:)``, whether or not it changed a row). Two relaxed
/// atomic increments per use; tests read them to show what a request costs the database.
final class StoreActivity: Sendable {
    let reads = Atomic<Int>(0)
    let writes = Atomic<Int>(0)

    var counts: (reads: Int, writes: Int) { (reads.load(ordering: .relaxed), writes.load(ordering: .relaxed)) }
}

/// A part of the store that reads and writes through the shared ``StoreCore``: each repository, and the
/// container itself (migrations, ping). What they share is here once, so a use case reads the same in any
/// of them.
protocol StoreRoom: Sendable {
    var core: StoreCore { get }
}

extension StoreRoom {
    var backend: Backend { core.backend }
    var dialect: Dialect { core.dialect }
    var logger: Logger { core.logger }
    var sessionChannel: String? { core.sessionChannel }

    func withSQL<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await core.withSQL(body)
    }

    func write<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await core.write(body)
    }

    func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        try await core.transaction(body)
    }

    /// After a write that ended sessions (committed or not): a cache in this process (the gateway's)
    /// forgets them at once, without waiting for its own notification.
    func sessionsEnded() {
        core.sessionChanges.ended()
    }
}

extension SQLDatabase {
    /// `body` between `begin` and `COMMIT`, rolled back when it throws. A failed `ROLLBACK` is not
    /// reported over `body`'s error: the connection is then probably broken, and the database rolls
    /// back when it goes.
    func inTransaction<R>(begin: String, _ body: () async throws -> R) async throws -> R {
        try await raw(SQLQueryString(begin)).run()
        do {
            let result = try await body()
            try await raw("COMMIT").run()
            return result
        } catch {
            try? await raw("ROLLBACK").run()
            throw error
        }
    }
}

extension SIWADatabase {
    /// The store's reads and writes since it opened (``StoreActivity``), for tests that count what a request costs.
    package var activity: (reads: Int, writes: Int) { core.activity.counts }
}
