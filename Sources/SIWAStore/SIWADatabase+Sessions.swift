import SQLKit

extension SIWADatabase {
    /// Stores a session (its token hash only).
    public func createSession(_ s: SessionRecord) async throws {
        try await write { sql in try await Self.insertSession(sql, s) }
    }

    /// Valid (unexpired) session joined with its account; nil otherwise. Updates `last_seen_at` at most once a
    /// minute, so that a busy page does not turn every read into a write — unless `touch` is false: the
    /// gateway's `/oauth2/auth` runs before every request of the app behind it and only reads (SPEC §10).
    public func session(tokenHash: String, now: Int64, touch: Bool = true) async throws -> (SessionRecord, UserAccount)? {
        let found = try await withSQL { sql -> SessionAndUser? in
            guard let row = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.sessionWithUserList) FROM sessions s JOIN users u ON u.id = s.user_id
                WHERE s.token_hash = \(bind: tokenHash) AND s.expires_at > \(bind: now)
                """).first()
            else { return nil }
            return SessionAndUser(session: try row.sessionRecord(prefix: "s_"), user: try row.userAccount(prefix: "u_"))
        }
        guard var found else { return nil }
        if touch, now - found.session.lastSeenAt >= 60 {
            try await write { sql in
                try await sql.raw(
                    "UPDATE sessions SET last_seen_at = \(bind: now) WHERE token_hash = \(bind: tokenHash)"
                ).run()
            }
            found.session.lastSeenAt = now
        }
        return (found.session, found.user)
    }

    /// The gateway's read (`/oauth2/auth`, `/oauth2/userinfo`): like `session(tokenHash:now:touch: false)`,
    /// answered from the in-process ``SessionCache`` when it read the same session less than a second ago
    /// and nothing since ended sessions (see there for what keeps it honest).
    public func gatewaySession(tokenHash: String, now: Int64) async throws -> (SessionRecord, UserAccount)? {
        switch sessionCache.lookup(tokenHash, now: now) {
        case .hit(let entry):
            return (entry.session, entry.user)
        case .miss(let generation):
            guard let (session, user) = try await self.session(tokenHash: tokenHash, now: now, touch: false) else { return nil }
            if let generation { sessionCache.store(tokenHash, session: session, user: user, generation: generation) }
            return (session, user)
        }
    }

    /// The session `tokenHash` names if the gateway's cache holds it, valid at `now`; nil when it does not
    /// (a miss says nothing: ``gatewaySession(tokenHash:now:)`` then reads the database). Never waits.
    public func cachedGatewaySession(tokenHash: String, now: Int64) -> CachedSession? {
        guard case .hit(let entry) = sessionCache.lookup(tokenHash, now: now) else { return nil }
        return entry
    }

    /// Ends one session (sign-out). No error when it does not exist.
    public func deleteSession(tokenHash: String) async throws {
        defer { sessionsEnded() }
        try await write { [sessionChannel] sql in
            try await sql.raw("DELETE FROM sessions WHERE token_hash = \(bind: tokenHash)").run()
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
        }
    }

    /// Ends every session of an account; returns how many there were.
    public func deleteSessions(userID: String) async throws -> Int {
        defer { sessionsEnded() }
        return try await write { [sessionChannel] sql in
            let count = try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: userID) RETURNING token_hash").all().count
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            return count
        }
    }

    /// Inside a write that ends sessions or deletes an account, on PostgreSQL: tells every instance's
    /// ``SessionChangeListener`` (NOTIFY, delivered when the write commits). Nothing on SQLite.
    static func announceSessionsEnded(_ sql: any SQLDatabase, channel: String?) async throws {
        if let channel { try await SessionChangeListener.announce(sql, channel: channel) }
    }

    /// After a write that ended sessions (committed or not): this process's gateway cache forgets them
    /// at once, without waiting for its own notification.
    func sessionsEnded() {
        sessionCache.invalidateAll()
    }

    static func insertSession(_ sql: any SQLDatabase, _ s: SessionRecord) async throws {
        try await sql.raw("""
            INSERT INTO sessions (token_hash, user_id, kind, created_at, expires_at, last_seen_at)
            VALUES (\(bind: s.tokenHash), \(bind: s.userID), \(bind: s.kind.rawValue), \(bind: s.createdAt),
                    \(bind: s.expiresAt), \(bind: s.lastSeenAt))
            """).run()
    }
}

struct SessionAndUser: Sendable {
    var session: SessionRecord
    let user: UserAccount
}
