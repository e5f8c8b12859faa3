import Foundation
import Logging
import PostgresKit
import NIOCore
import SQLiteDirect
import SQLKit
import Synchronization

/// The service's database: owns the connection pool (SQLite or PostgreSQL) and offers one method per use case.
///
/// Open it with ``open(_:logger:poolSize:)``, call ``migrate()`` once at start-up, and ``close()`` at shutdown.
/// Every method maps "cannot reach the database" to ``StoreError/unavailable(_:)`` and unique violations
/// to ``StoreError/conflict(_:)``.
public final class SIWADatabase: Sendable {
    let backend: Backend
    let dialect: Dialect
    let logger: Logger
    private let closed = Mutex(false)
    /// SQLite only: one writer at a time from this process (see ``WriteGate``).
    private let writeGate: WriteGate?
    /// The gateway's valid sessions (``gatewaySession(tokenHash:now:)``).
    let sessionCache: SessionCache
    /// PostgreSQL only: the channel writes that end sessions notify, and the task listening on it.
    let sessionChannel: String?
    private let sessionListener = Mutex<Task<Void, Never>?>(nil)

    private init(backend: Backend, logger: Logger) {
        self.backend = backend
        self.dialect = backend.dialect
        self.logger = logger
        self.writeGate = backend.writeGate
        switch backend {
        case .sqlite:
            // One process serves a SQLite file: every write that ends a session happens here (`siwa admin`'s,
            // in a process of its own, reach the cache's one-second limit).
            self.sessionCache = SessionCache(enabled: true)
            self.sessionChannel = nil
        case .postgres(_, let schema):
            self.sessionCache = SessionCache(enabled: false)
            self.sessionChannel = SessionChangeListener.channel(schema: schema)
        }
    }

    /// Starts listening for other instances' session changes (PostgreSQL); the cache answers once it listens.
    private func startSessionListener(_ configuration: PostgresConnection.Configuration) {
        guard let sessionChannel else { return }
        let task = Task { [sessionCache, logger] in
            await SessionChangeListener.run(configuration: configuration, channel: sessionChannel, cache: sessionCache, logger: logger)
        }
        sessionListener.withLock { $0 = task }
    }

    /// The gateway's session cache, by default: enough for ten thousand people signed in at once (a few MB).
    public static let defaultGatewaySessionCacheCapacity = SessionCache.defaultCapacity

    /// Whether the gateway's session cache answers: its capacity is not 0, and on PostgreSQL this instance
    /// listens for the others' changes.
    public var gatewaySessionCacheIsOn: Bool { sessionCache.isEnabled }

    /// How many sessions the gateway's cache keeps (`GATEWAY_SESSION_CACHE`); 0 turns it off.
    public func setGatewaySessionCacheCapacity(_ capacity: Int) {
        sessionCache.setCapacity(capacity)
    }

    /// True when the database is PostgreSQL (false for SQLite).
    public var isPostgres: Bool { dialect == .postgres }

    /// The default PostgreSQL pool size: four connections per core, at least 16. A sign-in holds a
    /// connection only for its statements, but each statement is a round trip during which the connection
    /// idles; with two per core, 512 concurrent sign-ins on 2 cores queued for connections while the CPU
    /// was not busy. With 8 on 2 cores they still queued, and handing a connection to a waiting request
    /// cost the pool 7 % of the server's CPU (each waiter's timeout is a timer the hand-over cancels);
    /// 16 took 11 % less CPU per sign-in and answered 7 % more sign-ins per second (`siwa loadtest`,
    /// 512 browsers). `POSTGRES_MAX_CONNECTIONS` sets it.
    public static var defaultPostgresPoolSize: Int { max(16, 4 * ProcessInfo.processInfo.activeProcessorCount) }
    /// SQLite readers open at most at once: they run beside the single writer (WAL), each statement on the
    /// caller's thread, so more readers than threads running tasks are rarely in use at the same time.
    public static let defaultSQLitePoolSize = 8

    /// Opens a pool for `url`. For SQLite the file (and its folder) is created; for PostgreSQL nothing is
    /// contacted until the first query (use ``ping()`` to check).
    public static func open(_ url: DatabaseURL, logger: Logger, poolSize: Int? = nil) async throws -> SIWADatabase {
        try await open(url, logger: logger, poolSize: poolSize, postgresSchema: nil)
    }

    /// Like ``open(_:logger:poolSize:)``, and on PostgreSQL uses (creating it when needed) the schema
    /// `postgresSchema` through `search_path`, so that tests get a private, disposable set of tables.
    /// The schema name must be lower-case letters, digits and underscores. Ignored for SQLite.
    public static func open(
        _ url: DatabaseURL, logger: Logger, poolSize: Int? = nil, postgresSchema: String?
    ) async throws -> SIWADatabase {
        if let size = poolSize, size < 1 {
            throw StoreError.invalidDatabaseURL("the database pool size must be at least 1 (got \(size))")
        }
        switch url.kind {
        case .sqlite(let path):
            let backend = try await Backend.openSQLite(path: path, deleteOnClose: false, poolSize: poolSize ?? defaultSQLitePoolSize, logger: logger)
            return SIWADatabase(backend: backend, logger: logger)
        case .sqliteInMemory:
            // SQLite's ":memory:" is private to one connection; a pool needs every connection to see the same
            // data, so "in memory" is a temporary file removed on close.
            let path = FileManager.default.temporaryDirectory
                .appendingPathComponent("siwa-memory-\(UUID().uuidString).sqlite").path
            let backend = try await Backend.openSQLite(path: path, deleteOnClose: true, poolSize: poolSize ?? defaultSQLitePoolSize, logger: logger)
            return SIWADatabase(backend: backend, logger: logger)
        case .postgres(let host, let port, let username, let password, let database):
            if let schema = postgresSchema, !isValidSchemaName(schema) {
                throw StoreError.invalidDatabaseURL("postgresSchema '\(schema)' must match [a-z_][a-z0-9_]{0,62}")
            }
            let tls: PostgresConnection.Configuration.TLS
            do {
                switch url.tlsMode {
                case .disable: tls = .disable
                case .prefer: tls = try .prefer(.init(configuration: .makeClientConfiguration()))
                case .require: tls = try .require(.init(configuration: .makeClientConfiguration()))
                }
            } catch {
                throw StoreError.invalidDatabaseURL("DATABASE_URL asks for TLS but no TLS context could be made: \(error)")
            }
            var configuration = SQLPostgresConfiguration(
                hostname: host, port: port, username: username, password: password, database: database, tls: tls
            )
            if let schema = postgresSchema { configuration.searchPath = [schema] }
            let backend = Backend.openPostgres(configuration: configuration, schema: postgresSchema, poolSize: poolSize ?? defaultPostgresPoolSize, logger: logger)
            let db = SIWADatabase(backend: backend, logger: logger)
            db.startSessionListener(configuration.coreConfiguration)
            if let schema = postgresSchema {
                do {
                    try await db.withSQL { sql in
                        try await sql.raw("CREATE SCHEMA IF NOT EXISTS \(ident: schema)").run()
                    }
                } catch {
                    try? await db.close()
                    throw error
                }
            }
            return db
        }
    }

    private static func isValidSchemaName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 63 else { return false }
        let lower = Unicode.Scalar("a")...Unicode.Scalar("z")
        let digit = Unicode.Scalar("0")...Unicode.Scalar("9")
        guard lower.contains(first) || first == "_" else { return false }
        return name.unicodeScalars.allSatisfy { lower.contains($0) || digit.contains($0) || $0 == "_" }
    }

    /// A database dropped without `close()` still shuts its pools down: async-kit traps when a pool is
    /// deallocated open, and a forgotten close must not take the whole process down. The task keeps
    /// the backend alive until its pools are closed.
    deinit {
        guard !closed.withLock({ $0 }) else { return }
        sessionListener.withLock { $0?.cancel() }
        logger.warning("SIWADatabase deallocated without close(); closing its pool")
        Task { [backend] in try? await backend.shutdown() }
    }

    /// Closes the pool (and for `sqlite::memory:` removes the temporary file). Safe to call twice.
    public func close() async throws {
        let alreadyClosed = closed.withLock { value in
            defer { value = true }
            return value
        }
        if alreadyClosed { return }
        if let listener = sessionListener.withLock({ $0 }) {
            listener.cancel()
            await listener.value
        }
        try await backend.shutdown()
    }

    /// Drops the PostgreSQL schema this database was opened with (tests' cleanup). No-op otherwise.
    public func dropSchema() async throws {
        guard case .postgres(_, let schema?) = backend else { return }
        try await withSQL { sql in
            try await sql.raw("DROP SCHEMA IF EXISTS \(ident: schema) CASCADE").run()
        }
    }

    /// Runs a trivial query; throws ``StoreError/unavailable(_:)`` when the database does not answer.
    public func ping() async throws {
        do {
            try await withSQL { sql in
                _ = try await sql.raw("SELECT 1 AS ok").all()
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.unavailable(Self.describe(error))
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
        if case .sqlite(let pool, _) = backend { return try await grouped(pool, .statements, body) }
        return try await withSQL(body)
    }

    /// Runs `body` as one transaction: committed when it returns, rolled back when it throws. On SQLite it
    /// waits its turn at the ``WriteGate`` and runs as one write of a group that commits together (see
    /// `SQLitePool.batchedWrite`: in a savepoint of its own, inside a transaction begun IMMEDIATE so that the
    /// write lock is taken before any read); it returns once its group has committed.
    func transaction<R: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> R) async throws -> R {
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
                if state == "23505" { return StoreError.conflict(message) }
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
