import Foundation
import Logging
import SQLKit

/// One numbered schema change. Numbers only grow; a shipped migration is never edited, only followed.
package struct Migration: Sendable {
    package let version: Int
    package let name: String
    package let statements: [String]

    package init(version: Int, name: String, statements: [String]) {
        self.version = version
        self.name = name
        self.statements = statements
    }
}

/// The schema, in order. The SQL is portable: TEXT ids (UUID strings), BIGINT Unix seconds, BOOLEAN flags
/// (SQLite stores 0/1), base64 TEXT for ciphertexts.
package let migrations: [Migration] = [
    Migration(version: 1, name: "initial schema", statements: [
        """
        CREATE TABLE users (
            id TEXT PRIMARY KEY,
            apple_sub TEXT NOT NULL UNIQUE,
            email TEXT NULL,
            email_verified BOOLEAN NOT NULL DEFAULT FALSE,
            is_private_email BOOLEAN NOT NULL DEFAULT FALSE,
            email_disabled BOOLEAN NOT NULL DEFAULT FALSE,
            given_name TEXT NULL,
            family_name TEXT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            last_sign_in_at BIGINT NOT NULL,
            consent_checked_at BIGINT NULL
        )
        """,
        // Not unique and never used to find an account: two Apple IDs may share an address.
        "CREATE INDEX users_email_idx ON users (email)",
        """
        CREATE TABLE apple_user_info (
            apple_sub TEXT PRIMARY KEY,
            given_name TEXT NULL,
            family_name TEXT NULL,
            email TEXT NULL,
            raw_json TEXT NOT NULL,
            source TEXT NOT NULL,
            received_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE pending_authorizations (
            state TEXT PRIMARY KEY,
            nonce TEXT NOT NULL,
            binding_hash TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            consumed_at BIGINT NULL
        )
        """,
        "CREATE INDEX pending_authorizations_expires_idx ON pending_authorizations (expires_at)",
        """
        CREATE TABLE sessions (
            token_hash TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            last_seen_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX sessions_user_idx ON sessions (user_id)",
        "CREATE INDEX sessions_expires_idx ON sessions (expires_at)",
        """
        CREATE TABLE apple_tokens (
            user_id TEXT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
            client_id TEXT NOT NULL,
            refresh_token TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            validated_at BIGINT NULL
        )
        """,
        """
        CREATE TABLE revocation_outbox (
            id TEXT PRIMARY KEY,
            client_id TEXT NOT NULL,
            token TEXT NOT NULL,
            token_type_hint TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            attempts BIGINT NOT NULL DEFAULT 0,
            next_attempt_at BIGINT NOT NULL,
            locked_until BIGINT NULL,
            last_error TEXT NULL,
            completed_at BIGINT NULL
        )
        """,
        "CREATE INDEX revocation_outbox_due_idx ON revocation_outbox (completed_at, next_attempt_at)",
        """
        CREATE TABLE processed_notifications (
            jti TEXT PRIMARY KEY,
            event_type TEXT NOT NULL,
            apple_sub TEXT NOT NULL,
            received_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE pending_profiles (
            token_hash TEXT PRIMARY KEY,
            apple_sub TEXT NOT NULL,
            email TEXT NULL,
            email_verified BOOLEAN NOT NULL DEFAULT FALSE,
            is_private_email BOOLEAN NOT NULL DEFAULT FALSE,
            client_id TEXT NOT NULL,
            refresh_token TEXT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX pending_profiles_sub_idx ON pending_profiles (apple_sub)",
    ]),
    // A person who signs in on the web and in the app holds one Apple refresh token per client id; keyed by
    // user alone, each sign-in overwrote the other's token, which was then never revoked. SQLite cannot change
    // a primary key in place, so the table is rebuilt (the same statements work on PostgreSQL).
    Migration(version: 3, name: "apple_tokens keyed by user and client id", statements: [
        """
        CREATE TABLE apple_tokens_by_client (
            user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            client_id TEXT NOT NULL,
            refresh_token TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            validated_at BIGINT NULL,
            PRIMARY KEY (user_id, client_id)
        )
        """,
        """
        INSERT INTO apple_tokens_by_client (user_id, client_id, refresh_token, created_at, updated_at, validated_at)
        SELECT user_id, client_id, refresh_token, created_at, updated_at, validated_at FROM apple_tokens
        """,
        "DROP TABLE apple_tokens",
        "ALTER TABLE apple_tokens_by_client RENAME TO apple_tokens",
    ]),
    // Numbers need not be contiguous (2 was never used); each is applied once.
    Migration(version: 4, name: "gateway return target", statements: [
        // Where the gateway sends the person after sign-in (SPEC §10 `rd`), validated before it is stored.
        "ALTER TABLE pending_authorizations ADD COLUMN return_to TEXT NULL",
        // Kept through the name form (PROFILE_FALLBACK=ask) as well.
        "ALTER TABLE pending_profiles ADD COLUMN return_to TEXT NULL",
    ]),
    oidcProviderMigration,
    // Background work shared by several instances on one database (the
    // OpenID provider's is 5).
    Migration(version: 6, name: "consent-check claims and job leases", statements: [
        "ALTER TABLE users ADD COLUMN consent_claimed_until BIGINT NULL",
        """
        CREATE TABLE job_leases (
            name TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            lease_until BIGINT NOT NULL
        )
        """,
    ]),
    // The index on pending_authorizations.expires_at served no query: the sweep's `expires_at <= now OR
    // consumed_at IS NOT NULL` scans the table anyway (consumed_at has no index), and the count's
    // `expires_at > now` matches nearly every row (they are swept a minute after their use), so the
    // index only made it slower (SQLite, 54,000 rows: 6.3 ms against 4.1 ms without). Every sign-in paid
    // for it: one more page written when its authorization began, one more removed at the sweep.
    Migration(version: 7, name: "no index on pending authorizations' expiry", statements: [
        "DROP INDEX IF EXISTS pending_authorizations_expires_idx",
    ]),
    // Who holds each lease (a token per claim), so that only the holder records the work done: a holder
    // whose lease ran out while it waited for Apple, and whose item another instance has since claimed,
    // changes nothing (issue 34: revocations sent twice, people validated twice, under a slow Apple).
    Migration(version: 8, name: "holders of revocation leases and consent-check claims", statements: [
        "ALTER TABLE revocation_outbox ADD COLUMN locked_by TEXT NULL",
        "ALTER TABLE users ADD COLUMN consent_claimed_by TEXT NULL",
    ]),
    // The OpenID provider's signing keys in the database, so that a rotation reaches every instance
    // without a restart (SIWADatabase+OIDCSigningKeys.swift).
    oidcSigningKeysMigration,
    // The person each outbox item concerns, so that `siwa admin people export` lists their pending
    // revocations (issue 37). Apple's `sub`, not the account id: items are written as the account is
    // deleted, so its id names nobody afterwards, while the same Apple ID signing in again gets a new
    // account with the same `sub`. NULL for items written before, for items whose person is not known, and
    // once Apple has accepted the revocation (the done row then keeps nothing of the person). Portable SQL:
    // both backends add a nullable column and an index the same way.
    Migration(version: 10, name: "the person of each revocation", statements: [
        "ALTER TABLE revocation_outbox ADD COLUMN apple_sub TEXT NULL",
        "CREATE INDEX revocation_outbox_sub_idx ON revocation_outbox (apple_sub)",
    ]),
    // Which TOKEN_ENCRYPTION_KEY seals the stored secrets, so that a wrong key is refused (SIWADatabase+SealingKey.swift).
    sealingKeyMigration,
    // What operators did with `siwa admin` (SIWADatabase+AdminAudit.swift).
    adminAuditMigration,
    // Idle deadlines, devices and app refresh tokens (SessionRepository+AppSessions.swift).
    appSessionsMigration,
    // The OpenID provider's refresh tokens (OIDCRepository+RefreshTokens.swift).
    oidcRefreshTokensMigration,
    // The siwa session each OpenID code and refresh token was issued in: the ID token's `sid` (OIDCRepository.swift).
    oidcSessionIDsMigration,
]

extension SIWADatabase {
    /// Brings the schema up to date: each pending migration runs in its own transaction and is recorded in
    /// `siwa_schema_migrations`. Safe to run on every start and from several instances at once: on PostgreSQL
    /// a transaction-scoped advisory lock (keyed by the current schema) serialises them, and each re-checks
    /// what is applied after taking it.
    public func migrate() async throws {
        try await migrate(upTo: migrations)
    }

    /// The real schema's migrations (tests start from an earlier version to check a later migration).
    package static var schema: [Migration] { migrations }

    /// Applies `list` (the real schema is ``migrate()``; tests pass their own to check failure handling).
    package func migrate(upTo list: [Migration]) async throws {
        do {
            try await transaction { [dialect] sql in
                try await Self.lockMigrations(sql, dialect: dialect)
                try await sql.raw("""
                    CREATE TABLE IF NOT EXISTS siwa_schema_migrations (
                        version BIGINT PRIMARY KEY,
                        name TEXT NOT NULL,
                        applied_at BIGINT NOT NULL
                    )
                    """).run()
            }
            for migration in list.sorted(by: { $0.version < $1.version }) {
                try await transaction { [dialect, logger] sql in
                    try await Self.lockMigrations(sql, dialect: dialect)
                    let existing = try await sql.raw(
                        "SELECT version FROM siwa_schema_migrations WHERE version = \(bind: migration.version)"
                    ).first()
                    if existing != nil { return }
                    for statement in migration.statements {
                        try await sql.raw(SQLQueryString(statement)).run()
                    }
                    let now = Int64(Date().timeIntervalSince1970)
                    try await sql.raw("""
                        INSERT INTO siwa_schema_migrations (version, name, applied_at)
                        VALUES (\(bind: migration.version), \(bind: migration.name), \(bind: now))
                        """).run()
                    logger.info("applied database migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
                }
            }
        } catch let error as StoreError {
            if case .unavailable = error { throw error }
            throw StoreError.migrationFailed(error.description)
        } catch {
            throw StoreError.migrationFailed(StoreCore.describe(error))
        }
    }

    /// The indexes the schema created on `table`, by name (tests check what a migration left).
    package func indexNames(on table: String) async throws -> [String] {
        try await withSQL { [dialect] sql in
            try await sql.raw(dialect.namedIndexes(on: table)).all().map { try $0.decode(column: "name", as: String.self) }
        }
    }

    /// The versions recorded in `siwa_schema_migrations`, ascending.
    public func appliedMigrations() async throws -> [Int] {
        try await withSQL { sql in
            try await sql.raw("SELECT version FROM siwa_schema_migrations ORDER BY version").all()
                .map { try $0.decode(column: "version", as: Int.self) }
        }
    }

    private static func lockMigrations(_ sql: any SQLDatabase, dialect: Dialect) async throws {
        // SQLite: BEGIN IMMEDIATE already holds the only write lock.
        guard dialect == .postgres else { return }
        try await sql.raw("SELECT pg_advisory_xact_lock(hashtext('siwa_schema_migrations:' || current_schema()))").run()
    }
}
