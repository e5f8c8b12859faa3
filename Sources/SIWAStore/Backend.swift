import Foundation
import Logging
import PostgresKit
import NIOPosix
import SQLKit

/// The places where SQL differs between SQLite and PostgreSQL. Everything else is portable SQL
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

    /// Whether a returning sign-in reads the account in the `UPDATE` of its sign-in times
    /// (`UPDATE … RETURNING`) instead of a `SELECT` before it. On PostgreSQL that is one round trip of
    /// the sign-in's nine fewer (`siwa-loadtest`: lower in all five interleaved pairs). SQLite builds a
    /// temporary table for every `RETURNING`, which cost more than the second statement saves (higher
    /// in six interleaved pairs of six at 16 browsers).
    var touchesAccountWithReturning: Bool {
        switch self {
        case .sqlite: return false
        case .postgres: return true
        }
    }

    /// The indexes the schema created on `table`, as `name`: not SQLite's automatic ones for keys (those
    /// have no SQL), and on PostgreSQL only the current schema's, without the `_pkey` ones.
    func namedIndexes(on table: String) -> SQLQueryString {
        switch self {
        case .sqlite:
            return "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name = \(bind: table) ORDER BY name"
        case .postgres:
            return """
                SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND tablename = \(bind: table)
                    AND indexname NOT LIKE '%\\_pkey' ORDER BY indexname
                """
        }
    }
}

/// The connections of one backend.
///
/// `@unchecked Sendable`: AsyncKit's `EventLoopGroupConnectionPool` predates Sendable annotations but guards
/// its state with a lock and hands each connection to one user at a time.
enum Backend: @unchecked Sendable {
    /// SQLite run directly (see ``SQLitePool``): one writer for the holder of SIWADatabase's write gate,
    /// readers beside it. `deletePath`: the file to remove on close (`sqlite::memory:`).
    case sqlite(SQLitePool, deletePath: String?)
    case postgres(EventLoopGroupConnectionPool<PostgresConnectionSource>, schema: String?)

    var dialect: Dialect {
        switch self {
        case .sqlite: return .sqlite
        case .postgres: return .postgres
        }
    }

    /// SQLite's one-writer gate (the pool's: its checkpointer takes it too); PostgreSQL needs none.
    var writeGate: WriteGate? {
        switch self {
        case .sqlite(let pool, _): return pool.writeGate
        case .postgres: return nil
        }
    }

    static func openSQLite(path: String, deleteOnClose: Bool, poolSize: Int, logger: Logger) async throws -> Backend {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            try PrivateFile.createDirectory(atPath: folder.path)
        } catch {
            throw StoreError.unavailable("cannot create the SQLite folder \(folder.path): \(error.localizedDescription)")
        }
        // A new database is the owner's alone from its first byte; SQLite gives its side files the same mode.
        if !PrivateFile.exists(path) {
            do {
                try PrivateFile.create(atPath: path, replacing: false)
            } catch {
                // Another process may have created it meanwhile; anything else is the open's to report.
                if !PrivateFile.exists(path) { throw StoreError.unavailable(String(describing: error)) }
            }
        }
        do {
            return .sqlite(try SQLitePool(path: path, maximumReaders: poolSize, logger: logger), deletePath: deleteOnClose ? path : nil)
        } catch {
            throw StoreCore.map(error)
        }
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
        case .sqlite(let pool, _):
            return try await pool.withReader { try await body($0) }
        case .postgres(let pool, _):
            // Requested and released around `body`, which runs in the caller's task: the pool's own
            // `withConnection` takes a closure returning a future, which cost a new Task for every use.
            let connection = try await pool.requestConnection(logger: logger).get()
            defer { pool.releaseConnection(connection, logger: logger) }
            return try await body(connection.sql())
        }
    }

    /// Like ``withConnection(logger:_:)`` for the holder of the write gate: on SQLite the writer; on
    /// PostgreSQL the shared pool.
    func withWriteConnection<R: Sendable>(logger: Logger, _ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
        switch self {
        case .sqlite(let pool, _):
            return try await pool.withWriter { try await body($0) }
        case .postgres:
            return try await withConnection(logger: logger, body)
        }
    }

    func shutdown() async throws {
        switch self {
        case .sqlite(let pool, let deletePath):
            await pool.shutdown()
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
