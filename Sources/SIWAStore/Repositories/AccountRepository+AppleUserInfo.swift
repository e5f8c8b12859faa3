import SQLKit

extension AccountRepository {
    /// Upsert keyed by sub; never replaces a stored non-empty name/email with nil (or an empty string).
    ///
    /// Apple sends `user` only on a person's first authorization, so what is stored here may be the only copy
    /// of their name. The raw JSON and source follow the newest row that carries a name.
    public func saveAppleUserInfo(_ info: AppleUserInfo) async throws {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO apple_user_info (apple_sub, given_name, family_name, email, raw_json, source, received_at)
                VALUES (\(bind: info.appleSub), \(bind: info.givenName), \(bind: info.familyName), \(bind: info.email),
                        \(bind: info.rawJSON), \(bind: info.source), \(bind: info.receivedAt))
                ON CONFLICT (apple_sub) DO UPDATE SET
                    given_name = COALESCE(NULLIF(excluded.given_name, ''), apple_user_info.given_name),
                    family_name = COALESCE(NULLIF(excluded.family_name, ''), apple_user_info.family_name),
                    email = COALESCE(NULLIF(excluded.email, ''), apple_user_info.email),
                    raw_json = CASE WHEN COALESCE(excluded.given_name, '') <> '' OR COALESCE(excluded.family_name, '') <> ''
                                    THEN excluded.raw_json ELSE apple_user_info.raw_json END,
                    source = CASE WHEN COALESCE(excluded.given_name, '') <> '' OR COALESCE(excluded.family_name, '') <> ''
                                  THEN excluded.source ELSE apple_user_info.source END,
                    received_at = excluded.received_at
                """).run()
        }
    }

    /// The fallback row for `sub`, if any.
    public func appleUserInfo(sub: String) async throws -> AppleUserInfo? {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appleUserInfo)) FROM apple_user_info WHERE apple_sub = \(bind: sub)
                """).first()?.appleUserInfo()
        }
    }
}
