import Foundation
import Logging
import PostgresKit
import SIWAStore

/// One test's private database: a new SQLite file in a temporary folder of its own, or a new schema
/// in the test PostgreSQL, opened (a pool in `db`) and migrated. `openAnother` opens a second pool on
/// the same data (another instance of the service, or the service after a restart); `cleanUp` closes
/// `db`, drops the schema and removes the folder. `withDatabase` does all of it around a test body.
public struct TestDatabase: Sendable {
    public let backend: Backend
    /// A pool on this database.
    public let db: SIWADatabase
    public let url: DatabaseURL
    /// The private PostgreSQL schema (nil on SQLite).
    public let schema: String?
    /// The SQLite file's temporary folder (nil on PostgreSQL).
    private let folder: String?

    /// A fresh database on `backend`, migrated unless `migrate` is false; nil (after a note) when
    /// PostgreSQL is not configured and not required. `poolSize` nil is the service's default.
    public static func make(
        _ backend: Backend, migrate: Bool = true, poolSize: Int? = nil, logger: Logger = TestDatabase.quietLogger
    ) async throws -> TestDatabase? {
        let url: DatabaseURL, schema: String?, folder: String?
        switch backend {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-test-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            (url, schema, folder) = (try DatabaseURL("sqlite:\(path)/siwa.sqlite"), nil, path)
        case .postgres:
            let environment = ProcessInfo.processInfo.environment
            guard let string = environment["SIWA_TEST_POSTGRES_URL"], !string.isEmpty else {
                if environment["SIWA_REQUIRE_POSTGRES"] == "1" {
                    throw Backend.Unavailable(description: "SIWA_REQUIRE_POSTGRES=1 but SIWA_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")
                }
                print("note: PostgreSQL case skipped (set SIWA_TEST_POSTGRES_URL; see .ci/postgres.sh)")
                return nil
            }
            let name = "siwa_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            (url, schema, folder) = (try DatabaseURL(string), name, nil)
        }
        let db = try await SIWADatabase.open(url, logger: logger, poolSize: poolSize, postgresSchema: schema)
        let test = TestDatabase(backend: backend, db: db, url: url, schema: schema, folder: folder)
        if migrate {
            do {
                try await db.migrate()
            } catch {
                try? await test.cleanUp()
                throw error
            }
        }
        return test
    }

    /// Another pool on the same data, as a second instance (or a restarted one) would open; the caller closes it.
    public func openAnother(poolSize: Int? = nil, logger: Logger = TestDatabase.quietLogger) async throws -> SIWADatabase {
        try await SIWADatabase.open(url, logger: logger, poolSize: poolSize, postgresSchema: schema)
    }

    /// Ends a session as a process that is not the service would, and that no cache of the service hears
    /// of: on SQLite through a pool of its own (its writes tell only its own ``SessionChanges``), on
    /// PostgreSQL by a plain `DELETE` on a connection of its own (no `NOTIFY`).
    public func deleteSessionUnannounced(tokenHash: String) async throws {
        switch url.kind {
        case .postgres(let host, let port, let username, let password, let database):
            let configuration = PostgresConnection.Configuration(host: host, port: port, username: username, password: password,
                                                                 database: database, tls: .disable)
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Self.quietLogger)
            do {
                // The schema is ours (letters, digits, underscores); the hash is bound.
                try await connection.query(PostgresQuery(unsafeSQL: "SET search_path TO \(schema ?? "public")"), logger: Self.quietLogger)
                try await connection.query("DELETE FROM sessions WHERE token_hash = \(tokenHash)", logger: Self.quietLogger)
            } catch {
                try? await connection.close()
                throw error
            }
            try await connection.close()
        default:
            let other = try await openAnother(poolSize: 1)
            do {
                try await other.sessions.deleteSession(tokenHash: tokenHash)
            } catch {
                try? await other.close()
                throw error
            }
            try await other.close()
        }
    }

    /// Drops the PostgreSQL schema (with everything in it), closes `db` and removes the SQLite folder.
    /// Safe when the test closed `db` itself: the schema is then dropped through a pool of its own.
    public func cleanUp() async throws {
        if schema != nil {
            do {
                try await db.dropSchema()
            } catch {
                let other = try await openAnother(poolSize: 1)
                do {
                    try await other.dropSchema()
                } catch {
                    try? await other.close()
                    throw error
                }
                try await other.close()
            }
        }
        try await db.close()
        if let folder { try? FileManager.default.removeItem(atPath: folder) }
    }

    public static var quietLogger: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }
}

/// Runs `body` with a fresh database on `backend` and always cleans up afterwards; does nothing when
/// the backend is skipped.
@discardableResult
public func withDatabase<T: Sendable>(
    _ backend: Backend, migrate: Bool = true, poolSize: Int? = nil, logger: Logger = TestDatabase.quietLogger,
    _ body: (TestDatabase) async throws -> T
) async throws -> T? {
    guard let test = try await TestDatabase.make(backend, migrate: migrate, poolSize: poolSize, logger: logger) else { return nil }
    let value: T
    do {
        value = try await body(test)
    } catch {
        try? await test.cleanUp()
        throw error
    }
    try await test.cleanUp()
    return value
}
