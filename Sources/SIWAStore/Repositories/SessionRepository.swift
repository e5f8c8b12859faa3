import SQLKit

/// Web and app sessions, the sign-ins under way (pending authorizations), and signing out everywhere.
/// Every write that ends sessions tells ``SessionChanges`` (and on PostgreSQL the other instances).
public struct SessionRepository: StoreRoom {
    let core: StoreCore
}

extension SessionRepository {
    /// Stores a session (its token hash only).
    public func createSession(_ s: SessionRecord) async throws {
        try await write { sql in try await Self.insertSession(sql, s) }
    }

    /// The valid session (before its absolute end and its idle deadline) joined with its account; nil otherwise.
    /// With `touch`, a use that is due (``SessionTouch/isDue(_:now:)``: at most once an hour) records the
    /// use and moves the idle deadline forward, and the returned record says so (`wasTouched`); every other
    /// read writes nothing. The gateway's `/oauth2/auth` runs before every request of the app behind it; its
    /// cache (which watches ``SIWADatabase/sessionChanges``) asks the database only when the session is due.
    public func session(tokenHash: String, now: Int64, touch: SessionTouch? = nil) async throws -> (SessionRecord, UserAccount)? {
        let found = try await withSQL { sql -> SessionAndUser? in
            guard let row = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.sessionWithUserList) FROM sessions s JOIN users u ON u.id = s.user_id
                WHERE s.token_hash = \(bind: tokenHash) AND s.expires_at > \(bind: now)
                    AND (s.idle_expires_at IS NULL OR s.idle_expires_at > \(bind: now))
                """).first()
            else { return nil }
            return SessionAndUser(session: try row.sessionRecord(prefix: "s_"), user: try row.userAccount(prefix: "u_"))
        }
        guard var found else { return nil }
        // A web session without a deadline (written before idle deadlines, or while the timeout was 0) that has
        // been unused for the idle timeout is as idle as one with a deadline.
        if let touch, touch.idleTimeout > 0, found.session.kind == .web, found.session.idleExpiresAt == nil,
           now - found.session.lastSeenAt >= touch.idleTimeout {
            return nil
        }
        if let touch, touch.isDue(found.session, now: now) {
            // One touch per interval however many instances or requests find it due at once: the row moves only
            // while its last use is still a whole interval old (a later second's request finds it moved).
            // App access tokens have no idle deadline: they live an hour, and their family as long as it is refreshed.
            let deadline = found.session.kind == .web ? touch.idleDeadline(now: now, expiresAt: found.session.expiresAt) : nil
            let moved = try await write { sql in
                try await sql.raw("""
                    UPDATE sessions SET last_seen_at = \(bind: now), idle_expires_at = \(bind: deadline)
                    WHERE token_hash = \(bind: tokenHash) AND last_seen_at <= \(bind: now - touch.interval)
                    RETURNING token_hash
                    """).first() != nil
            }
            found.session.lastSeenAt = now
            found.session.idleExpiresAt = deadline
            found.session.wasTouched = moved
        }
        return (found.session, found.user)
    }

    /// Ends one session (sign-out). No error when it does not exist.
    public func deleteSession(tokenHash: String) async throws {
        defer { sessionsEnded() }
        try await write { [sessionChannel] sql in
            try await sql.raw("DELETE FROM sessions WHERE token_hash = \(bind: tokenHash)").run()
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
        }
    }

    /// Ends every session of an account (and its apps' refresh tokens); returns how many sessions there were.
    public func deleteSessions(userID: String) async throws -> Int {
        let lock = dialect.forUpdate
        defer { sessionsEnded() }
        // One transaction holding the person's lock (``lockPerson(_:_:lock:)``): no refresh under way survives it.
        return try await transaction { [sessionChannel] sql in
            _ = try await Self.lockPerson(sql, userID, lock: lock)
            try await sql.raw("DELETE FROM app_refresh_tokens WHERE user_id = \(bind: userID)").run()
            let count = try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: userID) RETURNING token_hash").all().count
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            return count
        }
    }

    /// Signs the person out everywhere, in one transaction: web sessions, app bearer sessions, OpenID access
    /// and refresh tokens, and OpenID codes not yet exchanged. Consumed codes stay (until swept) so that a replay is still
    /// recognised. The account and its Apple tokens stay. Nil when there is no such account.
    public func signOutEverywhere(userID: String) async throws -> SignedOutEverywhere? {
        let lock = dialect.forUpdate
        defer { sessionsEnded() }
        return try await transaction { [sessionChannel] sql -> SignedOutEverywhere? in
            // The person's lock (``lockPerson(_:_:lock:)``): a refresh under way commits first, and its new pair is ended too.
            guard try await Self.lockPerson(sql, userID, lock: lock) else { return nil }
            var ended = SignedOutEverywhere()
            // An app session is a refresh token family (its living token), or a bearer from before refresh tokens.
            ended.appSessions = try await sql.raw("""
                DELETE FROM app_refresh_tokens WHERE user_id = \(bind: userID) RETURNING spent_at
                """).all().filter { try $0.decode(column: "spent_at", as: Int64?.self) == nil }.count
            for row in try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: userID) RETURNING kind, family_id").all() {
                if try row.decode(column: "kind", as: String.self) == SessionKind.web.rawValue {
                    ended.webSessions += 1
                } else if try row.decode(column: "family_id", as: String?.self) == nil {
                    ended.appSessions += 1
                }
            }
            ended.oidcAccessTokens = try await sql.raw(
                "DELETE FROM oidc_access_tokens WHERE user_id = \(bind: userID) RETURNING token_hash"
            ).all().count
            // OpenID refresh tokens end with them (SPEC §11), counted once per family (its living token).
            ended.oidcAccessTokens += try await sql.raw(
                "DELETE FROM oidc_refresh_tokens WHERE user_id = \(bind: userID) RETURNING spent_at"
            ).all().filter { try $0.decode(column: "spent_at", as: Int64?.self) == nil }.count
            ended.oidcCodes = try await sql.raw(
                "DELETE FROM oidc_codes WHERE user_id = \(bind: userID) AND consumed_at IS NULL RETURNING code_hash"
            ).all().count
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            return ended
        }
    }
}

extension StoreRoom {
    static func insertSession(_ sql: any SQLDatabase, _ s: SessionRecord) async throws {
        try await sql.raw("""
            INSERT INTO sessions (token_hash, user_id, kind, created_at, expires_at, last_seen_at, idle_expires_at,
                                  user_agent, family_id)
            VALUES (\(bind: s.tokenHash), \(bind: s.userID), \(bind: s.kind.rawValue), \(bind: s.createdAt),
                    \(bind: s.expiresAt), \(bind: s.lastSeenAt), \(bind: s.idleExpiresAt), \(bind: s.userAgent),
                    \(bind: s.familyID))
            """).run()
    }

    /// Inside a write that ends sessions or deletes an account, on PostgreSQL: tells every instance's
    /// ``SessionChangeListener`` (NOTIFY, delivered when the write commits). Nothing on SQLite.
    static func announceSessionsEnded(_ sql: any SQLDatabase, channel: String?) async throws {
        if let channel { try await SessionChangeListener.announce(sql, channel: channel) }
    }
}

struct SessionAndUser: Sendable {
    var session: SessionRecord
    let user: UserAccount
}

/// What ``SessionRepository/signOutEverywhere(userID:)`` ended.
public struct SignedOutEverywhere: Sendable, Equatable {
    public var webSessions = 0
    public var appSessions = 0
    /// OpenID access tokens, and refresh token families (one per family).
    public var oidcAccessTokens = 0
    /// Codes issued but not yet exchanged (each could still become an access token).
    public var oidcCodes = 0

    public init(webSessions: Int = 0, appSessions: Int = 0, oidcAccessTokens: Int = 0, oidcCodes: Int = 0) {
        (self.webSessions, self.appSessions, self.oidcAccessTokens, self.oidcCodes) = (webSessions, appSessions, oidcAccessTokens, oidcCodes)
    }
}
