import SQLKit

extension SIWADatabase {
    /// Whether a notification with this `jti` was already processed. The web layer applies an event
    /// first and records it after, so a crash in between is repaired by Apple's retry.
    public func notificationSeen(jti: String) async throws -> Bool {
        try await withSQL { sql in
            try await sql.raw("SELECT jti FROM processed_notifications WHERE jti = \(bind: jti)").first() != nil
        }
    }
}
