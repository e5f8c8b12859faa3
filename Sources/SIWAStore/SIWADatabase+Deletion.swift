import SQLKit

extension SIWADatabase {
    /// One transaction: deletes sessions, `apple_tokens`, the `apple_user_info` row, pending profiles and the
    /// user, and inserts `revocation` (when non-nil) into `revocation_outbox`, so that the revoke call at Apple
    /// survives a crash right after the deletion. Returns false when there is no such account (then nothing is
    /// written, not even the outbox row).
    public func deleteAccount(userID: String, revocation: RevocationItem?) async throws -> Bool {
        let lock = dialect.forUpdate
        return try await transaction { sql in
            guard let user = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.user)) FROM users WHERE id = \(bind: userID)\(unsafeRaw: lock)
                """).first()?.userAccount()
            else { return false }
            try await Self.deleteEverything(sql, of: user, revocation: revocation)
            return true
        }
    }

    /// ``deleteAccount(userID:revocation:)`` by Apple `sub` (Apple's `account-delete` notification).
    public func deleteAccount(sub: String, revocation: RevocationItem?) async throws -> Bool {
        let lock = dialect.forUpdate
        return try await transaction { sql in
            guard let user = try await Self.findUser(sql, sub: sub, lock: lock) else { return false }
            try await Self.deleteEverything(sql, of: user, revocation: revocation)
            return true
        }
    }

    private static func deleteEverything(_ sql: any SQLDatabase, of user: UserAccount, revocation: RevocationItem?) async throws {
        try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: user.id)").run()
        try await sql.raw("DELETE FROM apple_tokens WHERE user_id = \(bind: user.id)").run()
        try await sql.raw("DELETE FROM apple_user_info WHERE apple_sub = \(bind: user.appleSub)").run()
        try await sql.raw("DELETE FROM pending_profiles WHERE apple_sub = \(bind: user.appleSub)").run()
        try await sql.raw("DELETE FROM users WHERE id = \(bind: user.id)").run()
        if let item = revocation {
            try await insertRevocation(sql, item)
        }
    }

    /// Adds an item to the revocation outbox on its own (e.g. a token replaced at sign-in).
    public func enqueueRevocation(_ item: RevocationItem) async throws {
        try await write { sql in try await Self.insertRevocation(sql, item) }
    }

    private static func insertRevocation(_ sql: any SQLDatabase, _ item: RevocationItem) async throws {
        try await sql.raw("""
            INSERT INTO revocation_outbox (id, client_id, token, token_type_hint, created_at, attempts,
                                           next_attempt_at, locked_until, last_error, completed_at)
            VALUES (\(bind: item.id), \(bind: item.clientID), \(bind: item.token), \(bind: item.tokenTypeHint),
                    \(bind: item.createdAt), \(bind: item.attempts), \(bind: item.nextAttemptAt), NULL,
                    \(bind: item.lastError), \(bind: item.completedAt))
            """).run()
    }
}
