import Foundation
import Logging
import PostgresKit
import NIOCore
import SQLiteDirect
import SQLKit
import Synchronization

/// The service's database: opens the connection pool (SQLite or PostgreSQL), migrates and closes it, and
/// holds the repositories, one per concern, which offer one method per use case:
///
/// | repository | what it keeps |
/// |---|---|
/// | ``accounts`` | accounts, the one-time name (`apple_user_info`), pending profiles, deleting an account |
/// | ``sessions`` | web and app sessions, pending authorizations (sign-ins under way), signing out everywhere |
/// | ``apple`` | Apple's refresh tokens, the daily consent check, Apple's notifications seen |
/// | ``oidc`` | the OpenID provider's codes, access tokens and signing keys |
/// | ``outbox`` | the revocation outbox and the job leases the instances share |
/// | ``operations`` | what an operator reads and records: people, the audit, the sealing key, team transfer |
/// | ``backups`` | SQLite's online backup |
///
/// Open it with ``open(_:logger:poolSize:)``, call ``migrate()`` once at start-up, and ``close()`` at shutdown.
/// Every method maps "cannot reach the database" to ``StoreError/unavailable(_:)`` and unique violations
/// to ``StoreError/conflict(_:)``.
public final class SIWADatabase: StoreRoom {
    let core: StoreCore
    public let accounts: AccountRepository
    public let sessions: SessionRepository
    public let apple: AppleRepository
    public let oidc: OIDCRepository
    public let outbox: OutboxRepository
    public let operations: OperationsRepository
    public let backups: BackupRepository
    /// PostgreSQL only: the task listening for the other instances' session changes.
    private let sessionListener = Mutex<Task<Void, Never>?>(nil)

    /// When sessions may have ended, for a cache kept outside the store (the gateway's).
    public var sessionChanges: SessionChanges { core.sessionChanges }

    private init(backend: Backend, logger: Logger) {
        let core = StoreCore(backend: backend, logger: logger)
        self.core = core
        accounts = AccountRepository(core: core)
        sessions = SessionRepository(core: core)
        apple = AppleRepository(core: core)
        oidc = OIDCRepository(core: core)
        outbox = OutboxRepository(core: core)
        operations = OperationsRepository(core: core)
        backups = BackupRepository(core: core)
    }

    /// Starts listening for other instances' session changes (PostgreSQL); ``sessionChanges`` hears them once it listens.
    private func startSessionListener(_ configuration: PostgresConnection.Configuration) {
        guard let sessionChannel else { return }
        let task = Task { [sessionChanges, logger] in
            await SessionChangeListener.run(configuration: configuration, channel: sessionChannel, changes: sessionChanges, logger: logger)
        }
        sessionListener.withLock { $0 = task }
    }

    /// True when the database is PostgreSQL (false for SQLite).
    public var isPostgres: Bool { dialect == .postgres }

    /// The default PostgreSQL pool size: four connections per core, at least 16. A sign-in holds a
    /// connection only for its statements, but each statement is a round trip during which the connection
    /// idles; with two per core, 512 concurrent sign-ins on 2 cores queued for connections while the CPU
    /// was not busy. With 8 on 2 cores they still queued, and handing a connection to a waiting request
    /// cost the pool 7 % of the server's CPU (each waiter's timeout is a timer the hand-over cancels);
    /// 16 took 11 % less CPU per sign-in and answered 7 % more sign-ins per second (`siwa-loadtest`,
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
        guard !core.closed.withLock({ $0 }) else { return }
        sessionListener.withLock { $0?.cancel() }
        logger.warning("SIWADatabase deallocated without close(); closing its pool")
        Task { [backend] in try? await backend.shutdown() }
    }

    /// Closes the pool (and for `sqlite::memory:` removes the temporary file). Safe to call twice.
    public func close() async throws {
        let alreadyClosed = core.closed.withLock { value in
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
            throw StoreError.unavailable(StoreCore.describe(error))
        }
    }
}

