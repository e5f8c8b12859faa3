import SQLKit

extension SIWADatabase {
    /// When the oldest revocation Apple has not yet accepted was queued (`created_at`, Unix seconds), or nil
    /// when none is waiting. `/metrics` reports its age: it grows while Apple refuses revocations or no
    /// instance's worker runs, which the pending count alone does not tell apart from a busy day.
    public func oldestPendingRevocationCreatedAt() async throws -> Int64? {
        try await withSQL { sql in
            let row = try await sql.raw("""
                SELECT MIN(created_at) AS oldest FROM revocation_outbox WHERE completed_at IS NULL
                """).first()
            return try row?.decode(column: "oldest", as: Int64?.self)
        }
    }
}
