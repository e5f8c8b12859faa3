import SQLKit

extension SIWADatabase {
    /// The stored Apple refresh token (ciphertext) of an account.
    public func appleToken(userID: String) async throws -> AppleTokenRecord? {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appleToken)) FROM apple_tokens WHERE user_id = \(bind: userID)
                """).first()?.appleToken()
        }
    }

    /// Forgets an account's Apple token.
    public func deleteAppleToken(userID: String) async throws {
        try await write { sql in
            try await sql.raw("DELETE FROM apple_tokens WHERE user_id = \(bind: userID)").run()
        }
    }

    /// Apple's `consent-revoked`: one transaction deleting the person's sessions and Apple tokens.
    /// Returns false when there is no such account.
    public func revokeConsent(sub: String) async throws -> Bool {
        try await transaction { sql in
            guard let user = try await Self.findUser(sql, sub: sub) else { return false }
            try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: user.id)").run()
            try await sql.raw("DELETE FROM apple_tokens WHERE user_id = \(bind: user.id)").run()
            return true
        }
    }
}
