import SQLKit

// Sessions people and apps expect (SPEC §13): idle deadlines and the signing-in device on every session,
// and the app's rotating refresh tokens. An app session is a *family*: the refresh tokens of one sign-in,
// each spent by the refresh that issues the next, and the hour-long access tokens (`sessions` rows of kind
// `api` with the family's id) issued beside them. Only hashes are stored.

/// Idle deadlines, the signing-in `User-Agent`, and refresh token families. A nullable column and an index
/// added the same way on both backends; the new table's parent is `users` (the family has no row of its own:
/// its living refresh token carries its start and device).
let appSessionsMigration = Migration(version: 13, name: "session idle deadlines, devices and app refresh tokens", statements: [
    "ALTER TABLE sessions ADD COLUMN idle_expires_at BIGINT NULL",
    "ALTER TABLE sessions ADD COLUMN user_agent TEXT NULL",
    "ALTER TABLE sessions ADD COLUMN family_id TEXT NULL",
    "CREATE INDEX sessions_family_idx ON sessions (family_id)",
    """
    CREATE TABLE app_refresh_tokens (
        token_hash TEXT PRIMARY KEY,
        family_id TEXT NOT NULL,
        user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        user_agent TEXT NULL,
        family_started_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        spent_at BIGINT NULL
    )
    """,
    "CREATE INDEX app_refresh_tokens_family_idx ON app_refresh_tokens (family_id)",
    "CREATE INDEX app_refresh_tokens_user_idx ON app_refresh_tokens (user_id)",
])

/// The first refresh token of an app sign-in, which starts its family.
public struct AppRefreshGrant: Sendable, Equatable {
    public var tokenHash: String
    public var familyID: String
    /// The family's absolute end (`APP_REFRESH_TOKEN_LIFETIME_SECONDS` after the sign-in); rotation keeps it.
    public var expiresAt: Int64

    public init(tokenHash: String, familyID: String, expiresAt: Int64) {
        (self.tokenHash, self.familyID, self.expiresAt) = (tokenHash, familyID, expiresAt)
    }
}

/// One stored refresh token (its hash).
public struct AppRefreshToken: Sendable, Equatable {
    public var tokenHash: String
    public var familyID: String
    public var userID: String
    public var userAgent: String?
    public var familyStartedAt: Int64
    public var createdAt: Int64
    public var expiresAt: Int64
    /// When a refresh spent it; a spent token presented again ends its family.
    public var spentAt: Int64?
}

/// What presenting a refresh token did.
public enum AppRefreshOutcome: Sendable, Equatable {
    /// Spent; the new access token (a session of kind `api` in the family) and refresh token are stored.
    case rotated(access: SessionRecord, account: UserAccount)
    /// Already spent: the whole family ended (RFC 9700 §4.14.2). `familyStartedAt` for the log.
    case reused(userID: String, familyID: String)
    /// Unknown (never issued, or its family ended) or past the family's end.
    case invalid
}

/// A session as its person sees it on the account page: a browser, or an app (a refresh token family, or
/// a bearer from before refresh tokens).
public struct PersonSession: Sendable, Equatable {
    /// Which rows make the session: one session's (by its token's hash), or a family's.
    public enum Key: Sendable, Hashable {
        case token(hash: String)
        case family(id: String)
    }

    public var key: Key
    public var kind: SessionKind
    public var startedAt: Int64
    public var lastUsedAt: Int64
    public var userAgent: String?
}

/// Sessions ended by the sweep, by why.
public struct SweptSessions: Sendable, Equatable {
    /// Web sessions whose idle deadline passed.
    public var idle = 0
    /// Web sessions, pre-refresh bearers and refresh families that reached their absolute end.
    public var lifetime = 0

    public init(idle: Int = 0, lifetime: Int = 0) { (self.idle, self.lifetime) = (idle, lifetime) }
}

extension SessionRepository {
    /// `POST /auth/apple/native/refresh`: spends the presented refresh token and stores the new pair, in one
    /// transaction; of concurrent presentations of one token exactly one spends it (a conditional update),
    /// and one presented after that finds it spent: reuse, which ends the family. The new refresh token keeps the
    /// family's absolute end; the access token ends at `accessExpiresAt` or the family's end if earlier.
    ///
    /// It holds the person's lock (``lockPerson(_:_:lock:)``) like every write that ends app sessions, so
    /// refreshes and endings of one person's app sessions run one after the other: of concurrent
    /// presentations of one token, one rotates, the next finds it spent and ends the family, and the rest
    /// find nothing (`.invalid`).
    public func refreshAppSession(presentedHash: String, newAccessHash: String, newRefreshHash: String,
                                  accessExpiresAt: Int64, now: Int64) async throws -> AppRefreshOutcome {
        let lock = dialect.forUpdate
        let outcome = try await transaction { [sessionChannel] sql -> AppRefreshOutcome in
            guard let owner = try await sql.raw("""
                SELECT user_id FROM app_refresh_tokens WHERE token_hash = \(bind: presentedHash)
                """).first()?.decode(column: "user_id", as: String.self),
                try await Self.lockPerson(sql, owner, lock: lock)
            else { return .invalid }
            if let row = try await sql.raw("""
                UPDATE app_refresh_tokens SET spent_at = \(bind: now)
                WHERE token_hash = \(bind: presentedHash) AND spent_at IS NULL AND expires_at > \(bind: now)
                RETURNING \(unsafeRaw: Columns.list(Columns.appRefreshToken))
                """).first() {
                let spent = try row.appRefreshToken()
                guard let account = try await sql.raw("""
                    SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: spent.userID)
                    """).first()?.userAccount()
                else { return .invalid }
                try await sql.raw("""
                    INSERT INTO app_refresh_tokens (token_hash, family_id, user_id, user_agent, family_started_at, created_at,
                                                    expires_at, spent_at)
                    VALUES (\(bind: newRefreshHash), \(bind: spent.familyID), \(bind: spent.userID), \(bind: spent.userAgent),
                            \(bind: spent.familyStartedAt), \(bind: now), \(bind: spent.expiresAt), NULL)
                    """).run()
                let access = SessionRecord(tokenHash: newAccessHash, userID: spent.userID, kind: .api, createdAt: now,
                                           expiresAt: min(accessExpiresAt, spent.expiresAt), lastSeenAt: now,
                                           userAgent: spent.userAgent, familyID: spent.familyID)
                try await Self.insertSession(sql, access)
                return .rotated(access: access, account: account)
            }
            guard let known = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appRefreshToken)) FROM app_refresh_tokens
                WHERE token_hash = \(bind: presentedHash)
                """).first()?.appRefreshToken(), known.spentAt != nil, known.expiresAt > now
            else { return .invalid }
            // Of concurrent presentations that all found it spent (PostgreSQL), only the one whose delete ends
            // the family reports the reuse: the others wait on its delete and find the family already gone.
            guard try await Self.endFamily(sql, known.familyID, userID: known.userID, lock: lock, channel: sessionChannel)
            else { return .invalid }
            return .reused(userID: known.userID, familyID: known.familyID)
        }
        if case .reused = outcome { sessionsEnded() }
        return outcome
    }

    /// `POST /api/sign_out`: ends the app session an access token belongs to (its whole family), or the
    /// pre-refresh bearer itself. False when the token names no valid app session.
    public func endAppSession(accessTokenHash: String, now: Int64) async throws -> Bool {
        let lock = dialect.forUpdate
        let ended = try await transaction { [sessionChannel] sql -> Bool in
            guard let session = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.session)) FROM sessions
                WHERE token_hash = \(bind: accessTokenHash) AND kind = \(bind: SessionKind.api.rawValue)
                    AND expires_at > \(bind: now)
                """).first()?.sessionRecord()
            else { return false }
            if let family = session.familyID {
                try await Self.endFamily(sql, family, userID: session.userID, lock: lock, channel: sessionChannel)
            } else {
                try await sql.raw("DELETE FROM sessions WHERE token_hash = \(bind: accessTokenHash)").run()
                try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            }
            return true
        }
        if ended { sessionsEnded() }
        return ended
    }

    /// The person's valid sessions, web and app, most recently used first.
    public func personSessions(userID: String, now: Int64) async throws -> [PersonSession] {
        try await withSQL { sql in
            var list: [PersonSession] = []
            for row in try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.session)) FROM sessions
                WHERE user_id = \(bind: userID) AND family_id IS NULL AND expires_at > \(bind: now)
                    AND (idle_expires_at IS NULL OR idle_expires_at > \(bind: now))
                """).all() {
                let s = try row.sessionRecord()
                list.append(PersonSession(key: .token(hash: s.tokenHash), kind: s.kind, startedAt: s.createdAt,
                                          lastUsedAt: s.lastSeenAt, userAgent: s.userAgent))
            }
            // A family's last use: its last refresh, or a later use of one of its access tokens.
            for row in try await sql.raw("""
                SELECT r.family_id, r.user_agent, r.family_started_at, r.created_at,
                    (SELECT MAX(s.last_seen_at) FROM sessions s WHERE s.family_id = r.family_id) AS last_access
                FROM app_refresh_tokens r
                WHERE r.user_id = \(bind: userID) AND r.spent_at IS NULL AND r.expires_at > \(bind: now)
                """).all() {
                let family = try row.decode(column: "family_id", as: String.self)
                let refreshed = try row.decode(column: "created_at", as: Int64.self)
                let accessed = try row.decode(column: "last_access", as: Int64?.self) ?? refreshed
                list.append(PersonSession(key: .family(id: family), kind: .api,
                                          startedAt: try row.decode(column: "family_started_at", as: Int64.self),
                                          lastUsedAt: max(refreshed, accessed),
                                          userAgent: try row.decode(column: "user_agent", as: String?.self)))
            }
            return list.sorted { ($0.lastUsedAt, $0.startedAt) > ($1.lastUsedAt, $1.startedAt) }
        }
    }

    /// Ends `session` if it is `userID`'s: a web session, a pre-refresh bearer, or an app's whole family.
    /// False when there is no such session of that person.
    public func endPersonSession(userID: String, _ session: PersonSession.Key) async throws -> Bool {
        let lock = dialect.forUpdate
        let ended = try await transaction { [sessionChannel] sql -> Bool in
            switch session {
            case .token(let hash):
                guard try await sql.raw("""
                    DELETE FROM sessions WHERE token_hash = \(bind: hash) AND user_id = \(bind: userID) AND family_id IS NULL
                    RETURNING token_hash
                    """).first() != nil
                else { return false }
                try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            case .family(let id):
                guard try await sql.raw("""
                    SELECT family_id FROM app_refresh_tokens WHERE user_id = \(bind: userID) AND family_id = \(bind: id)
                    """).first() != nil
                else { return false }
                try await Self.endFamily(sql, id, userID: userID, lock: lock, channel: sessionChannel)
            }
            return true
        }
        if ended { sessionsEnded() }
        return ended
    }
}

extension StoreRoom {
    /// Inside a transaction that refreshes or ends app sessions: takes the person's row lock until it ends
    /// (PostgreSQL `FOR UPDATE`, `lock`; on SQLite the transaction holds the only write lock already). False
    /// when there is no such person. Every such write takes it before it reads or writes a refresh token,
    /// so that on PostgreSQL an ending never runs beside a refresh of the same person: otherwise an ending
    /// that started while a refresh was under way waited for the spent token's row, then deleted the
    /// family's tokens as its statement had seen them, without the refresh token the refresh had just
    /// inserted, which lived on (a reuse detection, a sign-out, consent revocation left the new pair alive).
    /// Each statement after the lock sees what the refresh committed; a refresh that comes after the ending
    /// finds its token gone.
    static func lockPerson(_ sql: any SQLDatabase, _ userID: String, lock: String) async throws -> Bool {
        try await sql.raw("SELECT id FROM users WHERE id = \(bind: userID)\(unsafeRaw: lock)").first() != nil
    }

    /// Ends a family of `userID` (whose lock it takes first, ``lockPerson(_:_:lock:)``): its refresh tokens
    /// (spent ones too) and its access tokens, announced to the gateways. False when it had no refresh token
    /// left (another transaction ended it first).
    @discardableResult
    static func endFamily(_ sql: any SQLDatabase, _ familyID: String, userID: String, lock: String, channel: String?) async throws -> Bool {
        _ = try await lockPerson(sql, userID, lock: lock)
        let tokens = try await sql.raw("DELETE FROM app_refresh_tokens WHERE family_id = \(bind: familyID) RETURNING token_hash").all()
        try await sql.raw("DELETE FROM sessions WHERE family_id = \(bind: familyID)").run()
        try await announceSessionsEnded(sql, channel: channel)
        return !tokens.isEmpty
    }

    /// Inside the sign-in transaction: the first refresh token of an app sign-in.
    static func insertRefreshGrant(_ sql: any SQLDatabase, _ grant: AppRefreshGrant, userID: String, userAgent: String?,
                                   now: Int64) async throws {
        try await sql.raw("""
            INSERT INTO app_refresh_tokens (token_hash, family_id, user_id, user_agent, family_started_at, created_at,
                                            expires_at, spent_at)
            VALUES (\(bind: grant.tokenHash), \(bind: grant.familyID), \(bind: userID),
                    \(bind: userAgent.map { String($0.prefix(SessionRecord.userAgentLimit)) }), \(bind: now), \(bind: now),
                    \(bind: grant.expiresAt), NULL)
            """).run()
    }

    /// The sweep's part: sessions past their end or idle deadline, and refresh tokens past their family's
    /// end (spent ones are kept until then, so a reuse is recognised as long as the family could live).
    static func sweepSessions(_ sql: any SQLDatabase, now: Int64) async throws -> (rows: Int, ended: SweptSessions) {
        var ended = SweptSessions()
        let sessions = try await sql.raw("""
            DELETE FROM sessions
            WHERE expires_at <= \(bind: now) OR (idle_expires_at IS NOT NULL AND idle_expires_at <= \(bind: now))
            RETURNING expires_at, idle_expires_at, family_id
            """).all()
        for row in sessions where try row.decode(column: "family_id", as: String?.self) == nil {
            if try row.decode(column: "expires_at", as: Int64.self) <= now {
                ended.lifetime += 1
            } else {
                ended.idle += 1
            }
        }
        let tokens = try await sql.raw("""
            DELETE FROM app_refresh_tokens WHERE expires_at <= \(bind: now) RETURNING spent_at
            """).all()
        ended.lifetime += try tokens.filter { try $0.decode(column: "spent_at", as: Int64?.self) == nil }.count
        return (sessions.count + tokens.count, ended)
    }
}
