import Foundation
import SQLKit

/// Accounts and what makes them: sign-in (creating, finding, transferring an account), the one-time
/// name Apple sends (`apple_user_info`), profiles waiting for a name, and deleting an account.
public struct AccountRepository: StoreRoom {
    let core: StoreCore
}

extension AccountRepository {
    /// The account whose Apple `sub` is `sub`.
    public func user(sub: String) async throws -> UserAccount? {
        try await withSQL { sql in try await Self.findUser(sql, sub: sub) }
    }

    /// The account with our id `id`.
    public func user(id: String) async throws -> UserAccount? {
        try await withSQL { sql in
            try await sql.raw("SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: id)")
                .first()?.userAccount()
        }
    }

    /// One transaction: finds the account by sub (or migrates it from `transferFromSub`), creates it when
    /// absent (name from `NewSignIn`; the caller guarantees a name for new accounts), fills a missing name,
    /// updates the email flags and `last_sign_in_at`, upserts the `apple_tokens` row of (account, `clientID`)
    /// when `sealRefreshToken != nil` (sealed for the account's id; tokens of other client ids stay), and
    /// inserts the session. Returns the account and whether it was created. Never matches by email.
    public func completeSignIn(_ s: NewSignIn) async throws -> (UserAccount, Bool) {
        guard let result = try await completeSignIn(s, nameFromFallbackTable: false) else {
            throw StoreError.conflict("the account for this Apple ID changed during sign-in")
        }
        return result
    }

    /// Like ``completeSignIn(_:)``, for a sign-in that may bring no name: a new account then takes its name
    /// from the `apple_user_info` fallback table (the one-time `user` JSON of an earlier attempt), and when
    /// there is no name there either, nothing is written and the result is nil (the caller asks the person,
    /// or shows the recovery page). One transaction, where looking first would cost a second round trip.
    public func completeSignInUsingStoredName(_ s: NewSignIn) async throws -> (UserAccount, Bool)? {
        try await completeSignIn(s, nameFromFallbackTable: true)
    }

    private func completeSignIn(_ s: NewSignIn, nameFromFallbackTable: Bool) async throws -> (UserAccount, Bool)? {
        let lock = dialect.forUpdate
        let touchesWithReturning = dialect.touchesAccountWithReturning
        let endsASession = s.endingSessionHash.map { $0 != s.sessionTokenHash } ?? false
        // The browser's previous session ends here: caches of sessions hear of it like any sign-out.
        defer { if endsASession { sessionsEnded() } }
        return try await transaction { [sessionChannel] sql -> (UserAccount, Bool)? in
            var s = s
            var created = false
            var account: UserAccount?
            // Whether the account's sign-in times are written already.
            var touched = false
            if touchesWithReturning {
                account = try await Self.touchUser(sql, sub: s.appleSub, now: s.now)
                touched = account != nil
            } else {
                account = try await Self.findUser(sql, sub: s.appleSub, lock: lock)
            }
            if account == nil, let oldSub = s.transferFromSub, oldSub != s.appleSub {
                account = try await Self.transfer(sql, from: oldSub, to: s.appleSub, now: s.now)
            }
            if account == nil, nameFromFallbackTable, UserAccount.trimmed(s.givenName) == nil, UserAccount.trimmed(s.familyName) == nil {
                let stored = try await sql.raw("""
                    SELECT \(unsafeRaw: Columns.list(Columns.appleUserInfo)) FROM apple_user_info WHERE apple_sub = \(bind: s.appleSub)
                    """).first()?.appleUserInfo()
                s.givenName = stored?.givenName
                s.familyName = stored?.familyName
                if UserAccount.trimmed(s.givenName) == nil, UserAccount.trimmed(s.familyName) == nil { return nil }
            }
            if account == nil {
                let id = UUID().uuidString.lowercased()
                // ON CONFLICT DO NOTHING: a concurrent first sign-in of the same person may have inserted it;
                // then the SELECT below (after that transaction's commit) finds theirs.
                account = try await sql.raw("""
                    INSERT INTO users (id, apple_sub, email, email_verified, is_private_email, email_disabled,
                                       given_name, family_name, created_at, updated_at, last_sign_in_at)
                    VALUES (\(bind: id), \(bind: s.appleSub), \(bind: s.email), \(bind: s.emailVerified),
                            \(bind: s.isPrivateEmail), \(bind: false), \(bind: UserAccount.trimmed(s.givenName)),
                            \(bind: UserAccount.trimmed(s.familyName)), \(bind: s.now), \(bind: s.now), \(bind: s.now))
                    ON CONFLICT (apple_sub) DO NOTHING
                    RETURNING \(unsafeRaw: Columns.userList)
                    """).first()?.userAccount()
                created = account != nil
                if account == nil {
                    account = try await Self.findUser(sql, sub: s.appleSub, lock: lock)
                }
            }
            guard var user = account else {
                throw StoreError.conflict("the account for this Apple ID changed during sign-in")
            }
            if !created {
                let stored = user
                if user.hasNoName {
                    user.givenName = UserAccount.trimmed(s.givenName)
                    user.familyName = UserAccount.trimmed(s.familyName)
                }
                // The verified id_token is the source of truth for email; it may omit it (then keep ours).
                if let email = s.email {
                    user.email = email
                    user.emailVerified = s.emailVerified
                    user.isPrivateEmail = s.isPrivateEmail
                }
                user.lastSignInAt = s.now
                user.updatedAt = s.now
                if user.hasSameProfile(as: stored) {
                    // Most sign-ins are returning people with nothing new. Naming `email` in the SET list
                    // would rewrite its index entry for the same value (on SQLite one more WAL page per
                    // sign-in), so only the times are written, unless `touchUser` has written them.
                    if !touched {
                        try await sql.raw("""
                            UPDATE users SET updated_at = \(bind: s.now), last_sign_in_at = \(bind: s.now)
                            WHERE id = \(bind: user.id)
                            """).run()
                    }
                } else {
                    try await sql.raw("""
                        UPDATE users SET email = \(bind: user.email), email_verified = \(bind: user.emailVerified),
                            is_private_email = \(bind: user.isPrivateEmail), given_name = \(bind: user.givenName),
                            family_name = \(bind: user.familyName), updated_at = \(bind: s.now),
                            last_sign_in_at = \(bind: s.now)
                        WHERE id = \(bind: user.id)
                        """).run()
                }
            }
            if let seal = s.sealRefreshToken {
                // One token per client id: a web sign-in and an app sign-in each keep theirs (both are revoked at
                // deletion). The same client's older token is replaced without a revoke: at Apple, revoking a
                // token ends the person's authorization for that client, which would void the new token too.
                let token = try seal(user.id)
                try await sql.raw("""
                    INSERT INTO apple_tokens (user_id, client_id, refresh_token, created_at, updated_at, validated_at)
                    VALUES (\(bind: user.id), \(bind: s.clientID), \(bind: token), \(bind: s.now), \(bind: s.now), \(bind: s.now))
                    ON CONFLICT (user_id, client_id) DO UPDATE SET refresh_token = excluded.refresh_token,
                        updated_at = excluded.updated_at, validated_at = excluded.validated_at
                    """).run()
            }
            if let ending = s.endingSessionHash, ending != s.sessionTokenHash {
                try await sql.raw("DELETE FROM sessions WHERE token_hash = \(bind: ending)").run()
                try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            }
            try await Self.insertSession(sql, SessionRecord(
                tokenHash: s.sessionTokenHash, userID: user.id, kind: s.sessionKind,
                createdAt: s.now, expiresAt: s.sessionExpiresAt, lastSeenAt: s.now,
                idleExpiresAt: s.sessionIdleExpiresAt, userAgent: s.sessionUserAgent, familyID: s.appRefresh?.familyID
            ))
            if let grant = s.appRefresh {
                try await Self.insertRefreshGrant(sql, grant, userID: user.id, userAgent: s.sessionUserAgent, now: s.now)
            }
            return (user, created)
        }
    }

    /// Sets the flag Apple's `email-disabled` / `email-enabled` notifications carry. False when no such account.
    public func setEmailDisabled(sub: String, disabled: Bool, now: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE users SET email_disabled = \(bind: disabled), updated_at = \(bind: now)
                WHERE apple_sub = \(bind: sub) RETURNING id
                """).first() != nil
        }
    }

}

// MARK: - Helpers shared by the use cases

extension StoreRoom {

    /// The account of `sub` with its sign-in times set to `now` (the row as it now is), or nil. The
    /// `UPDATE` also locks the row for the rest of the transaction.
    static func touchUser(_ sql: any SQLDatabase, sub: String, now: Int64) async throws -> UserAccount? {
        try await sql.raw("""
            UPDATE users SET updated_at = \(bind: now), last_sign_in_at = \(bind: now)
            WHERE apple_sub = \(bind: sub)
            RETURNING \(unsafeRaw: Columns.userList)
            """).first()?.userAccount()
    }

    static func findUser(_ sql: any SQLDatabase, sub: String, lock: String = "") async throws -> UserAccount? {
        try await sql.raw("""
            SELECT \(unsafeRaw: Columns.userList) FROM users WHERE apple_sub = \(bind: sub)\(unsafeRaw: lock)
            """).first()?.userAccount()
    }

    /// Team transfer: the account (and what else names its sub, ``moveSubRows(_:from:to:)``) moves to the new sub.
    static func transfer(_ sql: any SQLDatabase, from oldSub: String, to newSub: String, now: Int64) async throws -> UserAccount? {
        let moved = try await sql.raw("""
            UPDATE users SET apple_sub = \(bind: newSub), updated_at = \(bind: now)
            WHERE apple_sub = \(bind: oldSub)
            RETURNING \(unsafeRaw: Columns.userList)
            """).first()?.userAccount()
        if moved != nil { try await moveSubRows(sql, from: oldSub, to: newSub) }
        return moved
    }

    /// With an account that moves to a new sub (team transfer, in its transaction): its fallback row, unless
    /// the new sub already has one, and its pending revocations, so that `siwa admin people export` still
    /// finds them under the person.
    static func moveSubRows(_ sql: any SQLDatabase, from oldSub: String, to newSub: String) async throws {
        try await sql.raw("""
            UPDATE apple_user_info SET apple_sub = \(bind: newSub)
            WHERE apple_sub = \(bind: oldSub)
              AND NOT EXISTS (SELECT 1 FROM apple_user_info other WHERE other.apple_sub = \(bind: newSub))
            """).run()
        try await sql.raw("""
            UPDATE revocation_outbox SET apple_sub = \(bind: newSub) WHERE apple_sub = \(bind: oldSub) AND completed_at IS NULL
            """).run()
    }
}

/// A tuple is not a `Sendable` closure result the compiler can check through `withSQL`'s generic; this is.
struct Pair: Sendable {
    let user: UserAccount
    let token: AppleTokenRecord
}
