import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// The container itself, on SQLite and on a real PostgreSQL (skipped, with a note, when
/// SIWA_TEST_POSTGRES_URL is unset — unless SIWA_REQUIRE_POSTGRES=1, which makes it fail instead): the
/// schema and its migrations, ping and close. What each repository does is in its own suite
/// (AccountRepositoryTests, SessionRepositoryTests, AppleRepositoryTests, OIDCRepositoryTests,
/// OutboxRepositoryTests, OperationsRepositoryTests, BackupRepositoryTests).
@Suite("SIWADatabase on both backends: schema, ping, close")
struct SIWADatabaseTests {
    // MARK: Schema

    @Test(arguments: Backend.allCases)
    func migrationsAreRecordedAndRerunIdempotently(_ backend: Backend) async throws {
        try await withDatabase(backend, migrate: false) { test in
            // MUT: two instances starting at once, then a restart.
            let second = try await test.openAnother()
            async let first: Void = test.db.migrate()
            async let other: Void = second.migrate()
            _ = try await (first, other)
            try await test.db.migrate()
            try await second.close()

            // validate
            #expect(try await test.db.appliedMigrations() == SIWADatabase.schema.map(\.version).sorted())
            #expect(try await test.db.sessions.countPendingAuthorizations(now: 0) == 0)
        }
    }

    @Test("pending authorizations keep no index on their expiry (no query used it; every sign-in wrote it); sessions keep theirs",
          arguments: Backend.allCases)
    func pendingAuthorizationsHaveNoExpiryIndex(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let pending = try await test.db.indexNames(on: "pending_authorizations")
            let sessions = try await test.db.indexNames(on: "sessions")
            #expect(pending == [])
            #expect(sessions == ["sessions_expires_idx", "sessions_family_idx", "sessions_user_idx"])
        }
    }

    @Test(arguments: Backend.allCases)
    func aFailingMigrationRollsBackAndIsNotRecorded(_ backend: Backend) async throws {
        try await withDatabase(backend, migrate: false) { test in
            let good = Migration(version: 1, name: "good", statements: ["CREATE TABLE probe_one (id TEXT PRIMARY KEY)"])
            let bad = Migration(version: 2, name: "bad", statements: [
                "CREATE TABLE probe_two (id TEXT PRIMARY KEY)",
                "THIS IS NOT SQL",
            ])

            // MUT
            await #expect {
                try await test.db.migrate(upTo: [good, bad])
            } throws: { error in
                if case .migrationFailed = error as? StoreError { return true }
                return false
            }

            // validate: 1 applied, 2 neither recorded nor half-applied (probe_two can be created again)
            #expect(try await test.db.appliedMigrations() == [1])
            let fixed = Migration(version: 2, name: "fixed", statements: ["CREATE TABLE probe_two (id TEXT PRIMARY KEY)"])
            try await test.db.migrate(upTo: [good, fixed])
            #expect(try await test.db.appliedMigrations() == [1, 2])
        }
    }

    @Test("migration 3 keeps the tokens stored under the old one-per-person key", arguments: Backend.allCases)
    func migrationKeepsTokens(_ backend: Backend) async throws {
        try await withDatabase(backend, migrate: false) { test in
            let db = test.db
            // setup: the schema of version 1 with a person and their token, as an older release wrote them
            let version1 = SIWADatabase.schema.filter { $0.version == 1 }
            let rows = Migration(version: 900, name: "rows written by version 1", statements: [
                """
                INSERT INTO users (id, apple_sub, email_verified, is_private_email, email_disabled, created_at, updated_at, last_sign_in_at)
                VALUES ('u-old', 'sub-old', FALSE, FALSE, FALSE, 1, 1, 1)
                """,
                """
                INSERT INTO apple_tokens (user_id, client_id, refresh_token, created_at, updated_at, validated_at)
                VALUES ('u-old', '\(Fixture.nativeClientID)', 'old-ciphertext', 10, 20, 30)
                """,
            ])
            try await db.migrate(upTo: version1 + [rows])

            // MUT
            try await db.migrate()

            // validate: the row survived; a web sign-in adds a second token instead of overwriting it
            #expect(try await db.apple.appleTokens(userID: "u-old") == [AppleTokenRecord(
                userID: "u-old", clientID: Fixture.nativeClientID, refreshToken: "old-ciphertext", createdAt: 10, updatedAt: 20, validatedAt: 30)])
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-old", refreshToken: "new-web", clientID: Fixture.webClientID, now: 40))
            #expect(try await db.apple.appleTokens(userID: "u-old").map(\.refreshToken) == ["old-ciphertext", "new-web"])
            // deleting the person still cascades to the rebuilt table
            #expect(try await db.accounts.deleteAccount(userID: "u-old", revocations: nil) != nil)
            #expect(try await db.apple.appleTokens(userID: "u-old").isEmpty)
        }
    }

    // MARK: Ping and close

    @Test(arguments: Backend.allCases)
    func pingAndClose(_ backend: Backend) async throws {
        guard let test = try await TestDatabase.make(backend) else { return }
        #expect(test.db.isPostgres == (backend == .postgres))
        try await test.db.ping()
        try await test.cleanUp()
        // A closed pool is "unavailable", the state a 503 page reports.
        await #expect(throws: StoreError.unavailable("the database pool is closed")) {
            try await test.db.ping()
        }
        try await test.db.close()  // twice is fine
    }
}

@Suite("SIWADatabase opening and failures")
struct SIWADatabaseOpenTests {
    @Test func inMemorySQLiteSharesOneDatabaseAcrossThePool() async throws {
        let db = try await SIWADatabase.open(DatabaseURL("sqlite::memory:"), logger: testLogger, poolSize: 4)
        try await db.migrate()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<16 {
                group.addTask {
                    try await db.sessions.insertPendingAuthorization(.init(state: "s\(i)", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 100))
                }
            }
            try await group.waitForAll()
        }
        #expect(try await db.sessions.countPendingAuthorizations(now: 0) == 16)
        try await db.close()
    }

    @Test func sqliteFileCreatesItsFolderAndPersists() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-open-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = try DatabaseURL("sqlite:\(folder.path)/nested/siwa.sqlite")

        let first = try await SIWADatabase.open(url, logger: testLogger)
        try await first.migrate()
        #expect(try await first.apple.recordNotification(jti: "j", eventType: "e", sub: "s", now: 1))
        try await first.close()

        // A restart: same file, migrations are a no-op, data is still there.
        let second = try await SIWADatabase.open(url, logger: testLogger)
        try await second.migrate()
        #expect(try await second.appliedMigrations() == SIWADatabase.schema.map(\.version).sorted())
        #expect(try await second.apple.recordNotification(jti: "j", eventType: "e", sub: "s", now: 2) == false)
        try await second.close()
    }

    @Test func unreachablePostgresIsUnavailable() async throws {
        // Port 1 on loopback: nothing listens, the connection is refused at once. The pool logs each refused
        // connection at error level; that is expected here.
        var quiet = testLogger
        quiet.logLevel = .critical
        let db = try await SIWADatabase.open(DatabaseURL("postgres://siwa:siwa@127.0.0.1:1/siwa"), logger: quiet, poolSize: 1)
        await #expect {
            try await db.ping()
        } throws: { error in
            if case .unavailable = error as? StoreError { return true }
            return false
        }
        await #expect {
            try await db.migrate()
        } throws: { error in
            if case .unavailable = error as? StoreError { return true }
            return false
        }
        try await db.close()
    }

    @Test func invalidPoolSizeAndSchemaAreRefused() async throws {
        await #expect(throws: StoreError.self) {
            _ = try await SIWADatabase.open(DatabaseURL("sqlite::memory:"), logger: testLogger, poolSize: 0)
        }
        await #expect(throws: StoreError.self) {
            _ = try await SIWADatabase.open(DatabaseURL("postgres://u:p@127.0.0.1:1/db"), logger: testLogger, postgresSchema: "Bad; DROP")
        }
    }
}
