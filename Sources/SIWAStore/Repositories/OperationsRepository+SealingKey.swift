import SQLKit

/// Which TOKEN_ENCRYPTION_KEY seals the stored secrets (SPEC §14): a fingerprint that reveals nothing of the
/// key, and during a rotation the fingerprint of the key it moves to. One row, named `token_encryption_key`.
let sealingKeyMigration = Migration(version: 11, name: "the key that seals stored secrets", statements: [
    """
    CREATE TABLE sealing_keys (
        name TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        target_fingerprint TEXT NULL,
        recorded_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )
    """,
])

/// The recorded sealing key (SPEC §14).
public struct SealingKeyRecord: Sendable, Equatable {
    /// The fingerprint of the key that seals what is stored.
    public var fingerprint: String
    /// While a rotation runs: the fingerprint of the new key (TOKEN_ENCRYPTION_KEY), the recorded one being
    /// TOKEN_ENCRYPTION_KEY_PREVIOUS. Nil otherwise.
    public var targetFingerprint: String?
    public var recordedAt: Int64
    public var updatedAt: Int64

    public init(fingerprint: String, targetFingerprint: String?, recordedAt: Int64, updatedAt: Int64) {
        self.fingerprint = fingerprint
        self.targetFingerprint = targetFingerprint
        self.recordedAt = recordedAt
        self.updatedAt = updatedAt
    }
}

extension Columns {
    static let sealingKey = ["fingerprint", "target_fingerprint", "recorded_at", "updated_at"]
}

extension SQLRow {
    func sealingKey() throws -> SealingKeyRecord {
        SealingKeyRecord(
            fingerprint: try decode(column: "fingerprint", as: String.self),
            targetFingerprint: try decode(column: "target_fingerprint", as: String?.self),
            recordedAt: try decode(column: "recorded_at", as: Int64.self),
            updatedAt: try decode(column: "updated_at", as: Int64.self))
    }
}

extension OperationsRepository {
    private static let sealingKeyName = "token_encryption_key"

    /// The one row, read on `sql` (inside a write, after its change).
    private static func selectSealingKey(_ sql: any SQLDatabase) async throws -> SealingKeyRecord? {
        try await sql.raw("""
            SELECT \(unsafeRaw: Columns.list(Columns.sealingKey)) FROM sealing_keys WHERE name = \(bind: sealingKeyName)
            """).first()?.sealingKey()
    }

    /// The recorded key; nil before the first start recorded one.
    public func sealingKey() async throws -> SealingKeyRecord? {
        try await withSQL { sql in try await Self.selectSealingKey(sql) }
    }

    /// Records `fingerprint` (and a rotation's `target`) when nothing is recorded yet; returns what is recorded
    /// afterwards, which is another instance's record when it was first.
    public func recordSealingKey(fingerprint: String, target: String? = nil, now: Int64) async throws -> SealingKeyRecord {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO sealing_keys (name, fingerprint, target_fingerprint, recorded_at, updated_at)
                VALUES (\(bind: Self.sealingKeyName), \(bind: fingerprint), \(bind: target), \(bind: now), \(bind: now))
                ON CONFLICT (name) DO NOTHING
                """).run()
            guard let record = try await Self.selectSealingKey(sql) else { throw StoreError.conflict("the sealing key record is missing after it was written") }
            return record
        }
    }

    /// Starts a rotation from the recorded `from` to `to`, when `from` is recorded and no rotation runs; returns
    /// what is recorded afterwards (another instance may have started the same rotation, or another one).
    public func startSealingKeyRotation(from: String, to: String, now: Int64) async throws -> SealingKeyRecord? {
        try await write { sql in
            try await sql.raw("""
                UPDATE sealing_keys SET target_fingerprint = \(bind: to), updated_at = \(bind: now)
                WHERE name = \(bind: Self.sealingKeyName) AND fingerprint = \(bind: from) AND target_fingerprint IS NULL
                """).run()
            return try await Self.selectSealingKey(sql)
        }
    }

    /// Ends the rotation from `from` to `to`: `to` becomes the recorded key. False when that rotation is not
    /// the one recorded (nothing changed).
    public func finishSealingKeyRotation(from: String, to: String, now: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE sealing_keys SET fingerprint = \(bind: to), target_fingerprint = NULL, updated_at = \(bind: now)
                WHERE name = \(bind: Self.sealingKeyName) AND fingerprint = \(bind: from) AND target_fingerprint = \(bind: to)
                RETURNING name
                """).first() != nil
        }
    }
}
