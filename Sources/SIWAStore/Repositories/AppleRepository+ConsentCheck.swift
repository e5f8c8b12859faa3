import Foundation
import SQLKit

/// The daily consent check: which people are due, claimed by one instance at a time, and recorded.
extension AppleRepository {
    /// Records that the person's Apple consent was checked (their refresh tokens validated) at `now`, whoever
    /// claimed them. The consent check itself uses ``markConsentChecked(userID:now:holder:)``.
    public func markConsentChecked(userID: String, now: Int64) async throws {
        try await transaction { sql in
            try await sql.raw("""
                UPDATE users SET consent_checked_at = \(bind: now), consent_claimed_until = NULL, consent_claimed_by = NULL
                WHERE id = \(bind: userID)
                """).run()
            try await sql.raw("UPDATE apple_tokens SET validated_at = \(bind: now) WHERE user_id = \(bind: userID)").run()
        }
    }

    /// Records that `holder`'s consent check of the person is done at `now` (their refresh tokens validated),
    /// ending the claim. Only the claim's holder records it: false (nothing changed) when another instance
    /// claimed the person after this claim ran out, or the claim was handed back.
    public func markConsentChecked(userID: String, now: Int64, holder: String) async throws -> Bool {
        try await transaction { sql in
            let marked = try await sql.raw("""
                UPDATE users SET consent_checked_at = \(bind: now), consent_claimed_until = NULL, consent_claimed_by = NULL
                WHERE id = \(bind: userID) AND consent_claimed_by = \(bind: holder)
                RETURNING id
                """).first() != nil
            if marked {
                try await sql.raw("UPDATE apple_tokens SET validated_at = \(bind: now) WHERE user_id = \(bind: userID)").run()
            }
            return marked
        }
    }

    /// Accounts with a stored Apple token whose consent was last checked before `before` (never-checked first),
    /// each with all of its tokens (one per client id, in client id order); at most `limit` accounts.
    public func usersDueForConsentCheck(before: Int64, limit: Int) async throws -> [(UserAccount, [AppleTokenRecord])] {
        let columns = Columns.list(Columns.user, table: "u", prefix: "u_") + ", "
            + Columns.list(Columns.appleToken, table: "t", prefix: "t_")
        let rows = try await withSQL { sql in
            // The limit counts accounts, not tokens: a person's tokens are never split across two batches.
            try await sql.raw("""
                SELECT \(unsafeRaw: columns) FROM (
                    SELECT \(unsafeRaw: Columns.userList) FROM users
                    WHERE COALESCE(consent_checked_at, 0) < \(bind: before)
                      AND EXISTS (SELECT 1 FROM apple_tokens WHERE apple_tokens.user_id = users.id)
                    ORDER BY COALESCE(consent_checked_at, 0), id
                    LIMIT \(bind: max(0, limit))
                ) u JOIN apple_tokens t ON t.user_id = u.id
                ORDER BY COALESCE(u.consent_checked_at, 0), u.id, t.client_id
                """).all().map { row in
                Pair(user: try row.userAccount(prefix: "u_"), token: try row.appleToken(prefix: "t_"))
            }
        }
        return Self.groupedByUser(rows)
    }

    /// Claims up to `limit` accounts due for their consent check (last checked before `before`, with a
    /// stored Apple token, and no other instance's claim still running at `now`) for `holder` — a token
    /// naming this claim, unique to it — until `claimUntil`, and returns them with all their tokens. Instances
    /// claiming at once get different people (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite's single
    /// writer). A claimer that dies leaves its claims to expire, after which the people are due again; so
    /// does one still waiting for Apple, which is why the holder renews its claim before each call
    /// (``renewConsentClaim(userID:holder:until:)``) and only the holder ends it:
    /// ``markConsentChecked(userID:now:holder:)`` records the check, ``releaseConsentClaim(userID:holder:until:)``
    /// hands the person back (0: at once; later: not before then).
    public func claimUsersForConsentCheck(before: Int64, now: Int64, claimUntil: Int64, limit: Int, holder: String) async throws
        -> [(UserAccount, [AppleTokenRecord])] {
        guard limit > 0 else { return [] }
        let skipLocked = dialect.forUpdateSkipLocked
        let columns = Columns.list(Columns.user, table: "u", prefix: "u_") + ", "
            + Columns.list(Columns.appleToken, table: "t", prefix: "t_")
        let rows = try await transaction { sql -> [Pair] in
            let claimed = try await sql.raw("""
                UPDATE users SET consent_claimed_until = \(bind: claimUntil), consent_claimed_by = \(bind: holder)
                WHERE id IN (
                    SELECT id FROM users
                    WHERE COALESCE(consent_checked_at, 0) < \(bind: before)
                      AND COALESCE(consent_claimed_until, 0) <= \(bind: now)
                      AND EXISTS (SELECT 1 FROM apple_tokens WHERE apple_tokens.user_id = users.id)
                    ORDER BY COALESCE(consent_checked_at, 0), id
                    LIMIT \(bind: limit)\(unsafeRaw: skipLocked)
                )
                AND COALESCE(consent_claimed_until, 0) <= \(bind: now)
                RETURNING id
                """).all().map { try $0.decode(column: "id", as: String.self) }
            guard !claimed.isEmpty else { return [] }
            return try await sql.raw("""
                SELECT \(unsafeRaw: columns) FROM users u JOIN apple_tokens t ON t.user_id = u.id
                WHERE u.id IN (\(binds: claimed))
                ORDER BY COALESCE(u.consent_checked_at, 0), u.id, t.client_id
                """).all().map { row in
                Pair(user: try row.userAccount(prefix: "u_"), token: try row.appleToken(prefix: "t_"))
            }
        }
        return Self.groupedByUser(rows)
    }

    /// Extends `holder`'s claim on the person to `until`. False when `holder` no longer holds it: another
    /// instance claimed the person after the claim ran out, or the claim was ended. A claim that ran out but
    /// that nobody took since is still the holder's, so it is renewed. The consent check asks just before
    /// each call to Apple and calls only on true.
    public func renewConsentClaim(userID: String, holder: String, until: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE users SET consent_claimed_until = \(bind: until)
                WHERE id = \(bind: userID) AND consent_claimed_by = \(bind: holder)
                RETURNING id
                """).first() != nil
        }
    }

    /// Hands `holder`'s consent-check claim back: due again for any instance from `until` (0: at once; a later
    /// time keeps everybody from retrying a transient failure before then). False (nothing changed) when
    /// `holder` no longer holds the claim.
    @discardableResult
    public func releaseConsentClaim(userID: String, holder: String, until: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE users SET consent_claimed_until = \(bind: until), consent_claimed_by = NULL
                WHERE id = \(bind: userID) AND consent_claimed_by = \(bind: holder)
                RETURNING id
                """).first() != nil
        }
    }

    /// Rows of (account, token), ordered by account, as one entry per account with all its tokens.
    private static func groupedByUser(_ rows: [Pair]) -> [(UserAccount, [AppleTokenRecord])] {
        var due: [(UserAccount, [AppleTokenRecord])] = []
        for pair in rows {
            if let last = due.last, last.0.id == pair.user.id {
                due[due.count - 1].1.append(pair.token)
            } else {
                due.append((pair.user, [pair.token]))
            }
        }
        return due
    }
}
