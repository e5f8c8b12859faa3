import SQLKit

/// What an operator reads and records (`siwa admin`, `siwa transfer`): people and everything stored about
/// them, the audit of admin actions, the record of the sealing key, and moving accounts to a new team.
public struct OperationsRepository: StoreRoom {
    let core: StoreCore
}

// What `siwa admin` reads and changes. Nothing here returns a secret or the hash of one: sessions and OIDC
// tokens are described by kind, client and times; Apple tokens and outbox items by client id and times.

/// A session as an administrator sees it (never its token's hash).
public struct AdminSession: Sendable, Equatable {
    public var kind: SessionKind
    public var createdAt: Int64
    public var expiresAt: Int64
    public var lastSeenAt: Int64
}

/// A stored Apple refresh token, without the token: which client it belongs to and when it was written and checked.
public struct AdminAppleToken: Sendable, Equatable {
    public var clientID: String
    public var createdAt: Int64
    public var updatedAt: Int64
    public var validatedAt: Int64?
}

/// An OpenID authorization code the person granted (without the code's hash, nonce or PKCE challenge).
public struct AdminOIDCCode: Sendable, Equatable {
    public var clientID: String
    public var redirectURI: String
    public var scope: String
    public var authTime: Int64
    public var createdAt: Int64
    public var expiresAt: Int64
    public var consumedAt: Int64?
}

/// An OpenID access token issued for the person (without its hash).
public struct AdminOIDCAccessToken: Sendable, Equatable {
    public var clientID: String
    public var scope: String
    public var createdAt: Int64
    public var expiresAt: Int64
}

/// A sign-in parked for a name (`PROFILE_FALLBACK=ask`), without its token hash or sealed Apple token.
public struct AdminPendingProfile: Sendable, Equatable {
    public var email: String?
    public var clientID: String
    public var createdAt: Int64
    public var expiresAt: Int64
}

/// A server-to-server notification from Apple about the person.
public struct AdminNotification: Sendable, Equatable {
    /// Apple's `jti` (an event id, not a credential).
    public var jti: String
    public var eventType: String
    public var receivedAt: Int64
}

/// Everything stored about one person (GDPR art. 15), without secrets or their hashes.
public struct PersonRecord: Sendable, Equatable {
    public var account: UserAccount
    /// The one-time `user` JSON Apple sent (the name fallback), when kept.
    public var appleUserInfo: AppleUserInfo?
    public var sessions: [AdminSession]
    public var appleTokens: [AdminAppleToken]
    public var oidcCodes: [AdminOIDCCode]
    public var oidcAccessTokens: [AdminOIDCAccessToken]
    public var pendingProfiles: [AdminPendingProfile]
    public var notifications: [AdminNotification]
    /// Revocations of the person's Apple tokens that Apple has not accepted yet, oldest first, found by
    /// Apple `sub`: today those queued when an earlier account of the same Apple ID was deleted.
    public var pendingRevocations: [OutboxEntry]
}

extension OperationsRepository {
    /// Accounts whose email is `email`, compared without regard to ASCII case, oldest first. Two Apple IDs
    /// may share an address (and a relay address is per team), so this may find several; sign-in never
    /// uses it.
    public func accounts(email: String) async throws -> [UserAccount] {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT \(unsafeRaw: Columns.userList) FROM users WHERE LOWER(email) = LOWER(\(bind: email))
                ORDER BY created_at, id
                """).all().map { try $0.userAccount() }
        }
    }

    /// Everything stored about the account `userID`, read in one transaction (one snapshot); nil when there
    /// is no such account.
    public func personRecord(userID: String) async throws -> PersonRecord? {
        try await transaction { sql -> PersonRecord? in
            guard let account = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: userID)
                """).first()?.userAccount()
            else { return nil }
            let info = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appleUserInfo)) FROM apple_user_info WHERE apple_sub = \(bind: account.appleSub)
                """).first()?.appleUserInfo()
            let sessions = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.session)) FROM sessions WHERE user_id = \(bind: userID)
                ORDER BY created_at, kind
                """).all().map { row in
                let session = try row.sessionRecord()
                return AdminSession(kind: session.kind, createdAt: session.createdAt, expiresAt: session.expiresAt,
                                    lastSeenAt: session.lastSeenAt)
            }
            let tokens = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appleToken)) FROM apple_tokens WHERE user_id = \(bind: userID)
                ORDER BY client_id
                """).all().map { row in
                let token = try row.appleToken()
                return AdminAppleToken(clientID: token.clientID, createdAt: token.createdAt, updatedAt: token.updatedAt,
                                       validatedAt: token.validatedAt)
            }
            let codes = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.oidcCode)) FROM oidc_codes WHERE user_id = \(bind: userID)
                ORDER BY created_at, client_id
                """).all().map { row in
                let code = try row.oidcCode()
                return AdminOIDCCode(clientID: code.clientID, redirectURI: code.redirectURI, scope: code.scope, authTime: code.authTime,
                                     createdAt: code.createdAt, expiresAt: code.expiresAt, consumedAt: code.consumedAt)
            }
            let accessTokens = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.oidcAccessToken)) FROM oidc_access_tokens WHERE user_id = \(bind: userID)
                ORDER BY created_at, client_id
                """).all().map { row in
                let token = try row.oidcAccessToken()
                return AdminOIDCAccessToken(clientID: token.clientID, scope: token.scope, createdAt: token.createdAt, expiresAt: token.expiresAt)
            }
            let profiles = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.pendingProfile)) FROM pending_profiles WHERE apple_sub = \(bind: account.appleSub)
                ORDER BY created_at
                """).all().map { row in
                let profile = try row.pendingProfile()
                return AdminPendingProfile(email: profile.email, clientID: profile.clientID, createdAt: profile.createdAt,
                                           expiresAt: profile.expiresAt)
            }
            let notifications = try await sql.raw("""
                SELECT jti, event_type, received_at FROM processed_notifications WHERE apple_sub = \(bind: account.appleSub)
                ORDER BY received_at, jti
                """).all().map { row in
                AdminNotification(jti: try row.decode(column: "jti", as: String.self),
                                  eventType: try row.decode(column: "event_type", as: String.self),
                                  receivedAt: try row.decode(column: "received_at", as: Int64.self))
            }
            let revocations = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.outboxEntry)) FROM revocation_outbox
                WHERE apple_sub = \(bind: account.appleSub) AND completed_at IS NULL
                ORDER BY created_at, id
                """).all().map { try $0.outboxEntry() }
            return PersonRecord(account: account, appleUserInfo: info, sessions: sessions, appleTokens: tokens, oidcCodes: codes,
                                oidcAccessTokens: accessTokens, pendingProfiles: profiles, notifications: notifications,
                                pendingRevocations: revocations)
        }
    }

}
