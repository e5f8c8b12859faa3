import SQLKit

/// Turns one stored Apple token of an account being deleted into its revocation-outbox item (the caller
/// re-seals the ciphertext for the outbox); nil skips that token. Called inside the deletion's transaction,
/// which sets the item's `appleSub` to the account's own.
public typealias RevocationForToken = @Sendable (AppleTokenRecord) -> RevocationItem?

extension SIWADatabase {
    /// One transaction: deletes sessions, `apple_tokens`, the `apple_user_info` row, pending profiles and the
    /// user, and, when `revocations` is given, inserts an item into `revocation_outbox` for every Apple token
    /// the account held (web and app alike), each naming the account's Apple `sub` (whatever `revocations`
    /// put there), so that the revoke calls at Apple survive a crash right after the deletion and
    /// `people export` finds them under the person. The tokens are read inside the transaction, so one stored
    /// by a concurrent sign-in is either revoked or was never there. Returns false when there is no such account (then nothing is written, not
    /// even an outbox row).
    public func deleteAccount(userID: String, revocations: RevocationForToken?) async throws -> Bool {
        let lock = dialect.forUpdate
        defer { sessionsEnded() }
        return try await transaction { [sessionChannel] sql in
            guard let user = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: userID)\(unsafeRaw: lock)
                """).first()?.userAccount()
            else { return false }
            try await Self.deleteEverything(sql, of: user, revocations: revocations)
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            return true
        }
    }

    /// ``deleteAccount(userID:revocations:)`` by Apple `sub` (Apple's `account-delete` notification).
    public func deleteAccount(sub: String, revocations: RevocationForToken?) async throws -> Bool {
        let lock = dialect.forUpdate
        defer { sessionsEnded() }
        return try await transaction { [sessionChannel] sql in
            guard let user = try await Self.findUser(sql, sub: sub, lock: lock) else { return false }
            try await Self.deleteEverything(sql, of: user, revocations: revocations)
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            return true
        }
    }

    private static func deleteEverything(_ sql: any SQLDatabase, of user: UserAccount, revocations: RevocationForToken?) async throws {
        var items: [RevocationItem] = []
        if let revocations {
            // The user row is locked (PostgreSQL FOR UPDATE; SQLite's write lock), and a sign-in upserts its
            // token under that same lock, so no token can slip in between this read and the DELETE below.
            items = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appleToken)) FROM apple_tokens WHERE user_id = \(bind: user.id)
                ORDER BY client_id
                """).all().map { try $0.appleToken() }.compactMap(revocations).map { item in
                var item = item
                item.appleSub = user.appleSub
                return item
            }
        }
        try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: user.id)").run()
        try await sql.raw("DELETE FROM apple_tokens WHERE user_id = \(bind: user.id)").run()
        try await sql.raw("DELETE FROM apple_user_info WHERE apple_sub = \(bind: user.appleSub)").run()
        try await sql.raw("DELETE FROM pending_profiles WHERE apple_sub = \(bind: user.appleSub)").run()
        try await sql.raw("DELETE FROM users WHERE id = \(bind: user.id)").run()
        for item in items {
            try await insertRevocation(sql, item)
        }
    }

    /// Adds an item to the revocation outbox on its own (e.g. a token replaced at sign-in); its `appleSub`
    /// should name the person when the caller knows them.
    public func enqueueRevocation(_ item: RevocationItem) async throws {
        try await write { sql in try await Self.insertRevocation(sql, item) }
    }

    private static func insertRevocation(_ sql: any SQLDatabase, _ item: RevocationItem) async throws {
        try await sql.raw("""
            INSERT INTO revocation_outbox (id, client_id, token, token_type_hint, created_at, attempts,
                                           next_attempt_at, locked_until, last_error, completed_at, apple_sub)
            VALUES (\(bind: item.id), \(bind: item.clientID), \(bind: item.token), \(bind: item.tokenTypeHint),
                    \(bind: item.createdAt), \(bind: item.attempts), \(bind: item.nextAttemptAt), NULL,
                    \(bind: item.lastError), \(bind: item.completedAt), \(bind: item.appleSub))
            """).run()
    }
}
