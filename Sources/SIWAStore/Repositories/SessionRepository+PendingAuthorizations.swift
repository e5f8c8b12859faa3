import SQLKit

extension SessionRepository {
    /// Stores a sign-in started at `/auth/apple`. A reused `state` is a ``StoreError/conflict(_:)``.
    public func insertPendingAuthorization(_ p: PendingAuthorization) async throws {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO pending_authorizations (state, nonce, binding_hash, created_at, expires_at, consumed_at, return_to)
                VALUES (\(bind: p.state), \(bind: p.nonce), \(bind: p.bindingHash), \(bind: p.createdAt),
                        \(bind: p.expiresAt), \(bind: p.consumedAt), \(bind: p.returnTo))
                """).run()
        }
    }

    /// Atomically marks it consumed and returns it — only the FIRST caller gets it (nil after, or if unknown).
    /// Returned even when expired (caller decides, and the row is consumed either way).
    public func consumePendingAuthorization(state: String, now: Int64) async throws -> PendingAuthorization? {
        // One statement: the row lock (PostgreSQL) or the write lock (SQLite) makes a second caller see
        // consumed_at already set and match nothing.
        try await write { sql in
            try await sql.raw("""
                UPDATE pending_authorizations SET consumed_at = \(bind: now)
                WHERE state = \(bind: state) AND consumed_at IS NULL
                RETURNING \(unsafeRaw: Columns.pendingAuthorizationList)
                """).first()?.pendingAuthorization()
        }
    }

    /// Pending authorizations that are neither consumed nor expired.
    public func countPendingAuthorizations(now: Int64) async throws -> Int {
        try await withSQL { sql in
            let row = try await sql.raw("""
                SELECT COUNT(*) AS n FROM pending_authorizations
                WHERE consumed_at IS NULL AND expires_at > \(bind: now)
                """).first()
            return try row?.decode(column: "n", as: Int.self) ?? 0
        }
    }

    /// Deletes expired or consumed pending authorizations, sessions past their end or idle deadline, refresh
    /// tokens past their family's end, and expired pending profiles: how many rows, and which sessions ended why.
    public func sweepExpired(now: Int64) async throws -> SweptRows {
        try await write { sql in
            let authorizations = try await sql.raw("""
                DELETE FROM pending_authorizations
                WHERE expires_at <= \(bind: now) OR consumed_at IS NOT NULL RETURNING state
                """).all().count
            let (sessionRows, ended) = try await Self.sweepSessions(sql, now: now)
            let profiles = try await sql.raw(
                "DELETE FROM pending_profiles WHERE expires_at <= \(bind: now) RETURNING token_hash"
            ).all().count
            return SweptRows(rows: authorizations + sessionRows + profiles, sessionsEnded: ended)
        }
    }
}

/// What ``SessionRepository/sweepExpired(now:)`` deleted.
public struct SweptRows: Sendable, Equatable {
    public var rows: Int
    public var sessionsEnded: SweptSessions
}
