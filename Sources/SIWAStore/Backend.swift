import Foundation
import Logging
import PostgresKit
import SQLiteKit

/// The two places where SQL differs between SQLite and PostgreSQL. Everything else is portable SQL
/// (`ON CONFLICT … DO UPDATE`, `RETURNING`, `BIGINT`, `BOOLEAN` work in both).
enum Dialect: Sendable, Equatable {
    case sqlite
    case postgres

    /// SQLite takes the database write lock up front; PostgreSQL locks rows as it goes.
    var beginTransaction: String {
        switch self {
        case .sqlite: return "BEGIN IMMEDIATE"
        case .postgres: return "BEGIN"
        }
    }

    /// Row locks for read-then-write inside a transaction. SQLite needs none: BEGIN IMMEDIATE already excludes
    /// every other writer.
    var forUpdate: String {
        switch self {
        case .sqlite: return ""
        case .postgres: return " FOR UPDATE"
        }
    }

    /// Lets concurrent claimers on PostgreSQL take disjoint rows instead of waiting for each other.
    var forUpdateSkipLocked: String {
        switch self {
        case .sqlite: return ""
        case .postgres: return " FOR UPDATE SKIP LOCKED"
        }
    }
}

/// The connection pool of one backend.
///
/// `@unchecked Sendable`: AsyncKit's `EventLoopGroupConnectionPool` predates Sendable annotations but guards
/// its state with a lock and hands each connection to one user at a time; `NIOThreadPool` is thread-safe.
enum Backend: @unchecked Sendable {
    /// `writers`: one connection per event loop used only by the holder of SIWADatabase's write gate, so
    /// that a writer never waits for a connection behind readers while every other writer waits for it.
    case sqlite(EventLoopGroupConnectionPool<SQLiteSource>, writers: EventLoopGroupConnectionPool<SQLiteSource>,
                threads: NIOThreadPool, deletePath: String?)
    case postgres(EventLoopGroupConnectionPool<PostgresConnectionSource>, schema: String?)

    var dialect: Dialect {
        switch self {
        case .sqlite: return .sqlite
        case .postgres: return .postgres
        }
    }

    static func openSQLite(path: String, deleteOnClose: Bool, poolSize: Int, logger: Logger) async throws -> Backend {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw StoreError.unavailable("cannot create the SQLite folder \(folder.path): \(error.localizedDescription)")
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let loops = Array(group.makeIterator()).count
        let perLoop = max(1, (poolSize + loops - 1) / loops)
        // One thread per connection: a connection waiting in SQLite's busy handler blocks its thread, and must
        // never starve the connection that holds the lock of a thread to finish on.
        let threads = NIOThreadPool(numberOfThreads: (perLoop + 1) * loops)
        threads.start()
        let source = SQLiteSource(
            inner: SQLiteConnectionSource(configuration: .init(storage: .file(path: path), enableForeignKeys: true), threadPool: threads)
        )
        let pool = EventLoopGroupConnectionPool(
            source: source, maxConnectionsPerEventLoop: perLoop, requestTimeout: .seconds(10), logger: logger, on: group
        )
        let writers = EventLoopGroupConnectionPool(
            source: source, maxConnectionsPerEventLoop: 1, requestTimeout: .seconds(10), logger: logger, on: group
        )
        let backend = Backend.sqlite(pool, writers: writers, threads: threads, deletePath: deleteOnClose ? path : nil)
        do {
            // WAL is a property of the file: set once, every later connection uses it. It lets readers run
            // beside the single writer.
            try await backend.withConnection(logger: logger) { sql in
                _ = try await sql.raw("PRAGMA journal_mode = WAL").all()
            }
        } catch {
            try? await backend.shutdown()
            throw SIWADatabase.map(error)
        }
        return backend
    }

    static func openPostgres(configuration: SQLPostgresConfiguration, schema: String?, poolSize: Int, logger: Logger) -> Backend {
        let group = MultiThreadedEventLoopGroup.singleton
        let loops = Array(group.makeIterator()).count
        let perLoop = max(1, (poolSize + loops - 1) / loops)
        let pool = EventLoopGroupConnectionPool(
            source: PostgresConnectionSource(sqlConfiguration: configuration),
            maxConnectionsPerEventLoop: perLoop, requestTimeout: .seconds(10), logger: logger, on: group
        )
        return .postgres(pool, schema: schema)
    }

    func withConnection<R: Sendable>(logger: Logger, _ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        switch self {
        case .sqlite(let pool, _, _, _):
            return try await pool.withConnection(logger: logger) { connection in
                connection.eventLoop.makeFutureWithTask { try await body(connection.sql()) }
            }.get()
        case .postgres(let pool, _):
            return try await pool.withConnection(logger: logger) { connection in
                connection.eventLoop.makeFutureWithTask { try await body(connection.sql()) }
            }.get()
        }
    }

    /// Like ``withConnection(logger:_:)`` for the holder of the write gate: on SQLite a connection kept for
    /// writes; on PostgreSQL the shared pool.
    func withWriteConnection<R: Sendable>(logger: Logger, _ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        switch self {
        case .sqlite(_, let writers, _, _):
            return try await writers.withConnection(logger: logger) { connection in
                connection.eventLoop.makeFutureWithTask { try await body(connection.sql()) }
            }.get()
        case .postgres:
            return try await withConnection(logger: logger, body)
        }
    }

    func shutdown() async throws {
        switch self {
        case .sqlite(let pool, let writers, let threads, let deletePath):
            try await pool.shutdownAsync()
            try await writers.shutdownAsync()
            try await threads.shutdownGracefully()
            if let path = deletePath {
                for suffix in ["", "-wal", "-shm"] {
                    try? FileManager.default.removeItem(atPath: path + suffix)
                }
            }
        case .postgres(let pool, _):
            try await pool.shutdownAsync()
        }
    }
}

/// SQLiteKit's source plus the per-connection setting it does not make: a busy timeout, so that writers
/// (here or in another process) wait for each other instead of failing at once.
struct SQLiteSource: ConnectionPoolSource, Sendable {
    let inner: SQLiteConnectionSource

    func makeConnection(logger: Logger, on eventLoop: any EventLoop) -> EventLoopFuture<SQLiteConnection> {
        inner.makeConnection(logger: logger, on: eventLoop).flatMap { connection in
            // synchronous = NORMAL: in WAL mode a commit then no longer waits for an fsync of the log (only
            // checkpoints do). Every commit stays atomic and survives a crash of this process; a power loss
            // may undo the last commits, never corrupt the file. With FULL, each of the ~4 commits of a
            // sign-in waited for the disk, one writer at a time (≈3 ms per fsync measured here: ~100 sign-ins/s).
            connection.query("PRAGMA busy_timeout = 10000").flatMap { _ in
                connection.query("PRAGMA synchronous = NORMAL")
            }.map { _ in connection }
        }
    }
}
