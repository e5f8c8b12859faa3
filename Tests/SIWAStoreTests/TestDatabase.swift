import Foundation
import Logging
import SIWAStore
import Testing

/// The two backends every store test runs on.
enum Backend: String, CustomTestStringConvertible, Sendable, CaseIterable {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    static var postgresURL: String? {
        let value = ProcessInfo.processInfo.environment["SIWA_TEST_POSTGRES_URL"] ?? ""
        return value.isEmpty ? nil : value
    }

    static var postgresRequired: Bool {
        ProcessInfo.processInfo.environment["SIWA_REQUIRE_POSTGRES"] == "1"
    }
}

struct PostgresNotConfigured: Error, CustomStringConvertible {
    var description: String { "SIWA_REQUIRE_POSTGRES=1 but SIWA_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)" }
}

let testLogger: Logger = {
    var logger = Logger(label: "siwa.store.tests")
    logger.logLevel = .warning
    return logger
}()

/// A fresh, migrated database for one test: an SQLite temp file, or a private PostgreSQL schema.
/// Returns nil (after printing why) when PostgreSQL is not configured and not required.
func freshDatabase(_ backend: Backend, migrate: Bool = true) async throws -> TestDatabase? {
    switch backend {
    case .sqlite:
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("siwa-store-test-\(UUID().uuidString)/db.sqlite").path
        let url = try DatabaseURL("sqlite:\(path)")
        let db = try await SIWADatabase.open(url, logger: testLogger)
        if migrate { try await db.migrate() }
        return TestDatabase(db: db, url: url, schema: nil, sqlitePath: path)
    case .postgres:
        guard let string = Backend.postgresURL else {
            if Backend.postgresRequired { throw PostgresNotConfigured() }
            print("note: SIWA_TEST_POSTGRES_URL is not set; skipping the PostgreSQL case")
            return nil
        }
        let url = try DatabaseURL(string)
        let schema = "siwa_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let db = try await SIWADatabase.open(url, logger: testLogger, postgresSchema: schema)
        if migrate { try await db.migrate() }
        return TestDatabase(db: db, url: url, schema: schema, sqlitePath: nil)
    }
}

struct TestDatabase: Sendable {
    let db: SIWADatabase
    let url: DatabaseURL
    let schema: String?
    let sqlitePath: String?

    /// Another pool on the same database (a second instance of the service).
    func openSecond() async throws -> SIWADatabase {
        try await SIWADatabase.open(url, logger: testLogger, postgresSchema: schema)
    }

    func cleanUp() async throws {
        try await db.dropSchema()
        try await db.close()
        if let path = sqlitePath {
            try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path)
        }
    }
}

/// Runs `body` with a fresh database and always cleans up; does nothing when the backend is skipped.
func withDatabase(
    _ backend: Backend, migrate: Bool = true, _ body: (TestDatabase) async throws -> Void
) async throws {
    guard let test = try await freshDatabase(backend, migrate: migrate) else { return }
    do {
        try await body(test)
    } catch {
        try? await test.cleanUp()
        throw error
    }
    try await test.cleanUp()
}

func randomID(_ prefix: String = "") -> String { prefix + UUID().uuidString.lowercased() }

func signIn(
    sub: String, email: String? = nil, given: String? = "Ada", family: String? = "Lovelace",
    refreshToken: String? = nil, clientID: String = "com.example.web", transferFrom: String? = nil, now: Int64 = 1_000,
    session: String = randomID("s-")
) -> NewSignIn {
    var seal: (@Sendable (String) throws -> String)?
    if let refreshToken {
        // The store treats the ciphertext as opaque text: tests store a recognisable one, whatever the account.
        seal = { _ in refreshToken }
    }
    return NewSignIn(
        appleSub: sub, email: email, emailVerified: email != nil, isPrivateEmail: email?.hasSuffix("privaterelay.appleid.com") ?? false,
        givenName: given, familyName: family, transferFromSub: transferFrom,
        clientID: clientID, sealRefreshToken: seal,
        sessionTokenHash: session, sessionKind: "web", sessionExpiresAt: now + 3_600, now: now
    )
}
