import SQLKit

// The OpenID provider's refresh tokens (SPEC §11): issued to confidential clients that asked for
// `offline_access`, rotated on every use, and a rotated one presented again ends its whole family
// (RFC 9700 §4.14.2). The model is the app sessions' refresh tokens (SessionRepository+AppSessions.swift).

/// Refresh tokens. The family has no row of its own: it is named by the hash of the code it started from,
/// which its access tokens already carry (`oidc_access_tokens.code_hash`), so ending a family ends them too.
let oidcRefreshTokensMigration = Migration(version: 14, name: "openid provider refresh tokens", statements: [
    """
    CREATE TABLE oidc_refresh_tokens (
        token_hash TEXT PRIMARY KEY,
        family_id TEXT NOT NULL,
        user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        client_id TEXT NOT NULL,
        scope TEXT NOT NULL,
        auth_time BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        spent_at BIGINT NULL
    )
    """,
    "CREATE INDEX oidc_refresh_tokens_family_idx ON oidc_refresh_tokens (family_id)",
    "CREATE INDEX oidc_refresh_tokens_user_idx ON oidc_refresh_tokens (user_id)",
])

extension Columns {
    static let oidcRefreshToken = [
        "token_hash", "family_id", "user_id", "client_id", "scope", "auth_time", "created_at", "expires_at", "spent_at", "sid",
    ]
}

extension SQLRow {
    func oidcRefreshToken() throws -> OIDCRefreshToken {
        OIDCRefreshToken(
            tokenHash: try decode(column: "token_hash", as: String.self),
            familyID: try decode(column: "family_id", as: String.self),
            userID: try decode(column: "user_id", as: String.self),
            clientID: try decode(column: "client_id", as: String.self),
            scope: try decode(column: "scope", as: String.self),
            authTime: try decode(column: "auth_time", as: Int64.self),
            createdAt: try decode(column: "created_at", as: Int64.self),
            expiresAt: try decode(column: "expires_at", as: Int64.self),
            spentAt: try decode(column: "spent_at", as: Int64?.self),
            sid: try decode(column: "sid", as: String?.self))
    }
}

extension OIDCRepository {
    /// `grant_type=refresh_token`: spends the presented refresh token and stores what `rotate` returns (the
    /// new access token, and the next refresh token of the family), in one transaction. `rotate` sees the
    /// living token and its account first and may refuse (another client, a wider scope): nil leaves
    /// everything as it was. A spent token presented again ends the family: its refresh tokens and its
    /// access tokens.
    ///
    /// It holds the person's row lock (PostgreSQL `FOR UPDATE`; on SQLite the transaction holds the only
    /// write lock) like every write that ends the person's OIDC tokens, so that refreshes and endings run one
    /// after the other: of concurrent presentations of one token, one rotates (its conditional update spends
    /// the token), the next finds it spent and ends the family, and the rest find nothing (`.invalid`).
    public func refreshOIDC(
        presentedHash: String, now: Int64, rotate: @escaping @Sendable (OIDCRefreshToken, UserAccount) -> OIDCTokenGrant?
    ) async throws -> OIDCRefreshOutcome {
        let lock = dialect.forUpdate
        return try await transaction { sql -> OIDCRefreshOutcome in
            guard let owner = try await sql.raw("""
                SELECT user_id FROM oidc_refresh_tokens WHERE token_hash = \(bind: presentedHash)
                """).first()?.decode(column: "user_id", as: String.self),
                try await Self.lockPerson(sql, owner, lock: lock),
                let token = try await sql.raw("""
                    SELECT \(unsafeRaw: Columns.list(Columns.oidcRefreshToken)) FROM oidc_refresh_tokens
                    WHERE token_hash = \(bind: presentedHash)
                    """).first()?.oidcRefreshToken(),
                token.expiresAt > now
            else { return .invalid }
            if token.spentAt == nil {
                guard let account = try await sql.raw("""
                    SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: token.userID)
                    """).first()?.userAccount()
                else { return .invalid }
                guard let tokens = rotate(token, account) else { return .refused(token) }
                // The lock already orders presentations; the condition is what makes a spend happen once.
                if try await sql.raw("""
                    UPDATE oidc_refresh_tokens SET spent_at = \(bind: now)
                    WHERE token_hash = \(bind: presentedHash) AND spent_at IS NULL
                    RETURNING token_hash
                    """).first() != nil {
                    try await Self.insertOIDCAccessToken(sql, tokens.access)
                    if let refresh = tokens.refresh { try await Self.insertOIDCRefreshToken(sql, refresh) }
                    return .rotated(token, account)
                }
            }
            // Of presentations that all found it spent, only the one whose delete ends the family reports it.
            guard try await Self.endOIDCFamily(sql, token.familyID) else { return .invalid }
            return .reused(token)
        }
    }

    /// How many refresh tokens (spent ones too) an account holds; for tests and checks.
    public func countOIDCRefreshTokens(userID: String) async throws -> Int {
        try await withSQL { sql in
            let row = try await sql.raw("SELECT COUNT(*) AS n FROM oidc_refresh_tokens WHERE user_id = \(bind: userID)").first()
            return try row?.decode(column: "n", as: Int.self) ?? 0
        }
    }

    /// The refresh token with this hash, spent or not (for tests and checks).
    public func oidcRefreshToken(tokenHash: String) async throws -> OIDCRefreshToken? {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.oidcRefreshToken)) FROM oidc_refresh_tokens
                WHERE token_hash = \(bind: tokenHash)
                """).first()?.oidcRefreshToken()
        }
    }

    /// Ends a family: its refresh tokens (spent ones too) and the access tokens issued with them. False when
    /// it had no refresh token left (ended already).
    static func endOIDCFamily(_ sql: any SQLDatabase, _ familyID: String) async throws -> Bool {
        let tokens = try await sql.raw("DELETE FROM oidc_refresh_tokens WHERE family_id = \(bind: familyID) RETURNING token_hash").all()
        try await sql.raw("DELETE FROM oidc_access_tokens WHERE code_hash = \(bind: familyID)").run()
        return !tokens.isEmpty
    }

    static func insertOIDCAccessToken(_ sql: any SQLDatabase, _ token: OIDCAccessToken) async throws {
        try await sql.raw("""
            INSERT INTO oidc_access_tokens (token_hash, user_id, client_id, scope, code_hash, created_at, expires_at)
            VALUES (\(bind: token.tokenHash), \(bind: token.userID), \(bind: token.clientID), \(bind: token.scope),
                    \(bind: token.codeHash), \(bind: token.createdAt), \(bind: token.expiresAt))
            """).run()
    }

    static func insertOIDCRefreshToken(_ sql: any SQLDatabase, _ token: OIDCRefreshToken) async throws {
        try await sql.raw("""
            INSERT INTO oidc_refresh_tokens (token_hash, family_id, user_id, client_id, scope, auth_time, created_at,
                                             expires_at, spent_at, sid)
            VALUES (\(bind: token.tokenHash), \(bind: token.familyID), \(bind: token.userID), \(bind: token.clientID),
                    \(bind: token.scope), \(bind: token.authTime), \(bind: token.createdAt), \(bind: token.expiresAt),
                    \(bind: token.spentAt), \(bind: token.sid))
            """).run()
    }
}
