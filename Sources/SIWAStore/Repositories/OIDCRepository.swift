import SQLKit

/// The OpenID provider's records: authorization codes, access tokens, and the signing keys the instances share.
public struct OIDCRepository: StoreRoom {
    let core: StoreCore
}

/// The OpenID Provider's tables (SPEC §11). Both rows cascade with their account; `consent-revoked` ends them
/// through ``endOIDCGrants(sub:)``.
let oidcProviderMigration = Migration(version: 5, name: "openid provider codes and access tokens", statements: [
    """
    CREATE TABLE oidc_codes (
        code_hash TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        scope TEXT NOT NULL,
        nonce TEXT NULL,
        code_challenge TEXT NULL,
        auth_time BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        consumed_at BIGINT NULL
    )
    """,
    "CREATE INDEX oidc_codes_user_idx ON oidc_codes (user_id)",
    "CREATE INDEX oidc_codes_expires_idx ON oidc_codes (expires_at)",
    """
    CREATE TABLE oidc_access_tokens (
        token_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        client_id TEXT NOT NULL,
        scope TEXT NOT NULL,
        code_hash TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
    )
    """,
    "CREATE INDEX oidc_access_tokens_user_idx ON oidc_access_tokens (user_id)",
    "CREATE INDEX oidc_access_tokens_code_idx ON oidc_access_tokens (code_hash)",
    "CREATE INDEX oidc_access_tokens_expires_idx ON oidc_access_tokens (expires_at)",
])

/// The siwa web session a code was issued in, as the ID token's `sid` names it (OpenID Back-Channel Logout
/// 1.0 §2.1, RP-Initiated Logout 1.0): on the code, and on the refresh tokens of its family so that a
/// refreshed ID token names the same session. NULL for rows written before.
let oidcSessionIDsMigration = Migration(version: 15, name: "openid provider session ids (sid)", statements: [
    "ALTER TABLE oidc_codes ADD COLUMN sid TEXT NULL",
    "ALTER TABLE oidc_refresh_tokens ADD COLUMN sid TEXT NULL",
])

extension Columns {
    static let oidcCode = [
        "code_hash", "client_id", "redirect_uri", "user_id", "scope", "nonce", "code_challenge", "auth_time",
        "created_at", "expires_at", "consumed_at", "sid",
    ]
    static let oidcAccessToken = ["token_hash", "user_id", "client_id", "scope", "code_hash", "created_at", "expires_at"]
}

extension SQLRow {
    func oidcCode() throws -> OIDCAuthorizationCode {
        OIDCAuthorizationCode(
            codeHash: try decode(column: "code_hash", as: String.self),
            clientID: try decode(column: "client_id", as: String.self),
            redirectURI: try decode(column: "redirect_uri", as: String.self),
            userID: try decode(column: "user_id", as: String.self),
            scope: try decode(column: "scope", as: String.self),
            nonce: try decode(column: "nonce", as: String?.self),
            codeChallenge: try decode(column: "code_challenge", as: String?.self),
            authTime: try decode(column: "auth_time", as: Int64.self),
            createdAt: try decode(column: "created_at", as: Int64.self),
            expiresAt: try decode(column: "expires_at", as: Int64.self),
            consumedAt: try decode(column: "consumed_at", as: Int64?.self),
            sid: try decode(column: "sid", as: String?.self)
        )
    }

    func oidcAccessToken(prefix: String = "") throws -> OIDCAccessToken {
        OIDCAccessToken(
            tokenHash: try decode(column: prefix + "token_hash", as: String.self),
            userID: try decode(column: prefix + "user_id", as: String.self),
            clientID: try decode(column: prefix + "client_id", as: String.self),
            scope: try decode(column: prefix + "scope", as: String.self),
            codeHash: try decode(column: prefix + "code_hash", as: String.self),
            createdAt: try decode(column: prefix + "created_at", as: Int64.self),
            expiresAt: try decode(column: prefix + "expires_at", as: Int64.self)
        )
    }
}

extension OIDCRepository {
    /// How long a consumed or expired code row is kept: as long as an access token issued with it lives, so
    /// that a replay within that time still finds (and revokes) what the code issued.
    public static let oidcCodeRetention: Int64 = 3600

    /// Stores a code issued at the authorization endpoint.
    public func insertOIDCCode(_ c: OIDCAuthorizationCode) async throws {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO oidc_codes (code_hash, client_id, redirect_uri, user_id, scope, nonce, code_challenge,
                                        auth_time, created_at, expires_at, consumed_at, sid)
                VALUES (\(bind: c.codeHash), \(bind: c.clientID), \(bind: c.redirectURI), \(bind: c.userID),
                        \(bind: c.scope), \(bind: c.nonce), \(bind: c.codeChallenge), \(bind: c.authTime),
                        \(bind: c.createdAt), \(bind: c.expiresAt), \(bind: c.consumedAt), \(bind: c.sid))
                """).run()
        }
    }

    /// The token endpoint's one transaction: consumes the code in one statement (only the first caller gets
    /// it, expired or not), asks `issue` whether to issue for it, and stores the access token it returns
    /// (nil: refused, the code stays consumed). A code that was already consumed is a replay: every access
    /// token issued with it is deleted (RFC 6749 §4.1.2). ``exchangeOIDCCode(codeHash:now:grant:)`` without a
    /// refresh token.
    public func redeemOIDCCode(
        codeHash: String, now: Int64, issue: @escaping @Sendable (OIDCAuthorizationCode, UserAccount) -> OIDCAccessToken?
    ) async throws -> OIDCCodeRedemption {
        try await exchangeOIDCCode(codeHash: codeHash, now: now, grant: { code, account in issue(code, account).map { OIDCTokenGrant(access: $0) } })
    }

    /// The token endpoint's one transaction: consumes the code in one statement (only the first caller gets
    /// it, expired or not), asks `grant` whether to issue for it, and stores the access token it returns, and
    /// the refresh token that starts a family when there is one (nil: refused, the code stays consumed). A
    /// code that was already consumed is a replay: every access token issued with it, and every refresh
    /// token of its family, is deleted (RFC 6749 §4.1.2).
    ///
    /// Consumption and the tokens' insert commit together, so a replay racing the first exchange waits for
    /// the code's row (PostgreSQL) or the write lock (SQLite) and then finds the tokens to revoke.
    public func exchangeOIDCCode(
        codeHash: String, now: Int64, grant: @escaping @Sendable (OIDCAuthorizationCode, UserAccount) -> OIDCTokenGrant?
    ) async throws -> OIDCCodeRedemption {
        let lock = dialect.forUpdate
        return try await transaction { sql in
            if let code = try await sql.raw("""
                UPDATE oidc_codes SET consumed_at = \(bind: now)
                WHERE code_hash = \(bind: codeHash) AND consumed_at IS NULL
                RETURNING \(unsafeRaw: Columns.list(Columns.oidcCode))
                """).first()?.oidcCode() {
                guard let account = try await sql.raw("""
                    SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: code.userID)
                    """).first()?.userAccount()
                else { return .refused(code) }
                guard let tokens = grant(code, account) else { return .refused(code) }
                try await Self.insertOIDCAccessToken(sql, tokens.access)
                if let refresh = tokens.refresh { try await Self.insertOIDCRefreshToken(sql, refresh) }
                return .issued(code, account)
            }
            guard let owner = try await sql.raw("SELECT user_id FROM oidc_codes WHERE code_hash = \(bind: codeHash)").first()?
                .decode(column: "user_id", as: String.self)
            else { return .unknown }
            // The person's lock, as a refresh takes it: a refresh of this family under way commits first.
            _ = try await Self.lockPerson(sql, owner, lock: lock)
            // A family is named by its code's hash, and its access tokens carry that hash: all of them go.
            let revoked = try await sql.raw("""
                DELETE FROM oidc_access_tokens WHERE code_hash = \(bind: codeHash) RETURNING token_hash
                """).all().count
            let family = try await sql.raw("""
                DELETE FROM oidc_refresh_tokens WHERE family_id = \(bind: codeHash) RETURNING spent_at
                """).all().filter { try $0.decode(column: "spent_at", as: Int64?.self) == nil }.count
            return .replayed(revoked: revoked + family)
        }
    }

    /// The unexpired access token with this hash, and its account.
    public func oidcAccessToken(tokenHash: String, now: Int64) async throws -> (OIDCAccessToken, UserAccount)? {
        let columns = Columns.list(Columns.oidcAccessToken, table: "t", prefix: "t_") + ", "
            + Columns.list(Columns.user, table: "u", prefix: "u_")
        return try await withSQL { sql -> OIDCTokenAndUser? in
            guard let row = try await sql.raw("""
                SELECT \(unsafeRaw: columns) FROM oidc_access_tokens t JOIN users u ON u.id = t.user_id
                WHERE t.token_hash = \(bind: tokenHash) AND t.expires_at > \(bind: now)
                """).first()
            else { return nil }
            return OIDCTokenAndUser(token: try row.oidcAccessToken(prefix: "t_"), user: try row.userAccount(prefix: "u_"))
        }.map { ($0.token, $0.user) }
    }

    /// Apple's `consent-revoked` (and the daily check's equivalent): the person's OIDC access tokens, refresh
    /// tokens and unused codes end with their sessions. Returns how many were deleted (refresh tokens: the
    /// living ones, one per family).
    ///
    /// It holds the person's row lock (PostgreSQL `FOR UPDATE`) like a refresh does, so that a refresh under
    /// way commits first and the pair it stored is deleted too.
    @discardableResult
    public func endOIDCGrants(sub: String) async throws -> Int {
        let lock = dialect.forUpdate
        return try await transaction { sql in
            guard let user = try await Self.findUser(sql, sub: sub, lock: lock) else { return 0 }
            let families = try await sql.raw(
                "DELETE FROM oidc_refresh_tokens WHERE user_id = \(bind: user.id) RETURNING spent_at"
            ).all().filter { try $0.decode(column: "spent_at", as: Int64?.self) == nil }.count
            let tokens = try await sql.raw(
                "DELETE FROM oidc_access_tokens WHERE user_id = \(bind: user.id) RETURNING token_hash"
            ).all().count
            let codes = try await sql.raw(
                "DELETE FROM oidc_codes WHERE user_id = \(bind: user.id) RETURNING code_hash"
            ).all().count
            return families + tokens + codes
        }
    }

    /// Deletes expired access tokens, refresh tokens past their family's end (spent ones are kept until then,
    /// so that a reuse is recognised as long as the family could live), and codes past ``oidcCodeRetention``
    /// after they expired; returns how many.
    public func sweepOIDC(now: Int64) async throws -> Int {
        try await write { sql in
            let refresh = try await sql.raw(
                "DELETE FROM oidc_refresh_tokens WHERE expires_at <= \(bind: now) RETURNING token_hash"
            ).all().count
            let tokens = try await sql.raw(
                "DELETE FROM oidc_access_tokens WHERE expires_at <= \(bind: now) RETURNING token_hash"
            ).all().count
            let codes = try await sql.raw(
                "DELETE FROM oidc_codes WHERE expires_at <= \(bind: now - Self.oidcCodeRetention) RETURNING code_hash"
            ).all().count
            return refresh + tokens + codes
        }
    }

    /// How many OIDC access tokens an account holds (for tests and `siwa doctor`-style checks).
    public func countOIDCAccessTokens(userID: String) async throws -> Int {
        try await withSQL { sql in
            let row = try await sql.raw("SELECT COUNT(*) AS n FROM oidc_access_tokens WHERE user_id = \(bind: userID)").first()
            return try row?.decode(column: "n", as: Int.self) ?? 0
        }
    }
}

struct OIDCTokenAndUser: Sendable {
    let token: OIDCAccessToken
    let user: UserAccount
}
