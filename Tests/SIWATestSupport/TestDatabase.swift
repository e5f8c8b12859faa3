import Foundation
import Logging
import SIWAStore

/// The databases the web and end-to-end suites run on. PostgreSQL needs SIWA_TEST_POSTGRES_URL
/// (`.ci/postgres.sh` prints it): without it, PostgreSQL cases are skipped locally and fail when
/// SIWA_REQUIRE_POSTGRES=1 (as in CI).
public enum TestDatabase: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite, postgres

    public var description: String { rawValue }

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The URL to open for a fresh private database, and the PostgreSQL schema to use.
    public func location() throws -> (url: DatabaseURL, schema: String?)? {
        switch self {
        case .sqlite:
            let path = NSTemporaryDirectory() + "siwa-test-\(UUID().uuidString).sqlite"
            return (try DatabaseURL("sqlite:\(path)"), nil)
        case .postgres:
            let environment = ProcessInfo.processInfo.environment
            guard let url = environment["SIWA_TEST_POSTGRES_URL"], !url.isEmpty else {
                if environment["SIWA_REQUIRE_POSTGRES"] == "1" {
                    throw Unavailable(description: "SIWA_REQUIRE_POSTGRES=1 but SIWA_TEST_POSTGRES_URL is not set")
                }
                print("note: PostgreSQL case skipped (set SIWA_TEST_POSTGRES_URL; see .ci/postgres.sh)")
                return nil
            }
            let schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(24)
            return (try DatabaseURL(url), String(schema))
        }
    }

    /// Opens and migrates a fresh, private database; nil when this backend is skipped.
    public func open(logger: Logger = TestDatabase.quietLogger) async throws -> SIWADatabase? {
        guard let (url, schema) = try location() else { return nil }
        // Small pools: many cases run in parallel against one PostgreSQL.
        let database = try await SIWADatabase.open(url, logger: logger, poolSize: 2, postgresSchema: schema)
        try await database.migrate()
        return database
    }

    public static var quietLogger: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }
}
