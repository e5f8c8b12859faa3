import SQLKit

extension AccountRepository {
    /// Parks a verified sign-in while the person supplies a name (`PROFILE_FALLBACK=ask`).
    public func savePendingProfile(_ p: PendingProfile) async throws {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO pending_profiles (token_hash, apple_sub, email, email_verified, is_private_email,
                                              client_id, refresh_token, created_at, expires_at, return_to)
                VALUES (\(bind: p.tokenHash), \(bind: p.appleSub), \(bind: p.email), \(bind: p.emailVerified),
                        \(bind: p.isPrivateEmail), \(bind: p.clientID), \(bind: p.refreshToken), \(bind: p.createdAt),
                        \(bind: p.expiresAt), \(bind: p.returnTo))
                ON CONFLICT (token_hash) DO UPDATE SET apple_sub = excluded.apple_sub, email = excluded.email,
                    email_verified = excluded.email_verified, is_private_email = excluded.is_private_email,
                    client_id = excluded.client_id, refresh_token = excluded.refresh_token,
                    created_at = excluded.created_at, expires_at = excluded.expires_at, return_to = excluded.return_to
                """).run()
        }
    }

    /// Deletes the pending profile and returns it when unexpired (single use: a second call gets nil).
    public func takePendingProfile(tokenHash: String, now: Int64) async throws -> PendingProfile? {
        let taken = try await write { sql in
            try await sql.raw("""
                DELETE FROM pending_profiles WHERE token_hash = \(bind: tokenHash)
                RETURNING \(unsafeRaw: Columns.list(Columns.pendingProfile))
                """).first()?.pendingProfile()
        }
        guard let taken, taken.expiresAt > now else { return nil }
        return taken
    }
}
