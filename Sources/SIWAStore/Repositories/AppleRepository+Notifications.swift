import SQLKit

extension AppleRepository {
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

    /// Whether a notification with this `jti` was already processed. The web layer applies an event
    /// first and records it after, so a crash in between is repaired by Apple's retry.
    public func notificationSeen(jti: String) async throws -> Bool {
        try await withSQL { sql in
            try await sql.raw("SELECT jti FROM processed_notifications WHERE jti = \(bind: jti)").first() != nil
        }
    }
}
