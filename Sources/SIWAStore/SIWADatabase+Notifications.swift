import SQLKit

extension SIWADatabase {
    /// Records a server-to-server notification's `jti`; false when it was already there (a replay).
    public func recordNotification(jti: String, eventType: String, sub: String, now: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO processed_notifications (jti, event_type, apple_sub, received_at)
                VALUES (\(bind: jti), \(bind: eventType), \(bind: sub), \(bind: now))
                ON CONFLICT (jti) DO NOTHING
                RETURNING jti
                """).first() != nil
        }
    }
}
