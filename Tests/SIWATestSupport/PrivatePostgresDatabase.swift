import Foundation
import Logging
import PostgresKit
import SIWAStore

/// A PostgreSQL database of one test's own, on the test server (`SIWA_TEST_POSTGRES_URL`), for a test that
/// reaches the database only through a `DATABASE_URL` (the built binary): a private schema cannot be named
/// there, and in a shared one tests see each other's rows — one test's claim of every due revocation once
/// took another's items from under it. `.ci/postgres.sh` lets the test role create databases.
public struct PrivatePostgresDatabase: Sendable {
    /// `postgres://…/NAME`: the new, empty database.
    public let url: String
    private let name: String
    private let server: PostgresConnection.Configuration

    /// Creates `siwa_private_<random>` on the server `baseURL` names (through its database).
    public static func create(on baseURL: String) async throws -> PrivatePostgresDatabase {
        let base = try DatabaseURL(baseURL)
        guard case let .postgres(host, port, username, password, database) = base.kind, var components = URLComponents(string: baseURL)
        else { throw Failure(description: "SIWA_TEST_POSTGRES_URL is not a postgres:// URL") }
        let name = "siwa_private_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let server = PostgresConnection.Configuration(host: host, port: port, username: username, password: password,
                                                      database: database, tls: .disable)
        // The name is ours (letters, digits, underscores), so it needs no quoting.
        try await run("CREATE DATABASE \(name)", on: server)
        components.path = "/" + name
        guard let url = components.string else { throw Failure(description: "no URL for \(name)") }
        return PrivatePostgresDatabase(url: url, name: name, server: server)
    }

    /// Drops the database, ending any connection still open to it (PostgreSQL 13's `WITH (FORCE)`).
    public func drop() async throws {
        try await Self.run("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", on: server)
    }

    private static func run(_ statement: String, on server: PostgresConnection.Configuration) async throws {
        var logger = Logger(label: "test.private-database")
        logger.logLevel = .warning
        let connection = try await PostgresConnection.connect(configuration: server, id: 1, logger: logger)
        do {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }
}
