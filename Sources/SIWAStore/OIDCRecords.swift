import Foundation

/// An authorization code siwa's OpenID Provider issued (SPEC §11). Only the code's SHA-256 is stored.
public struct OIDCAuthorizationCode: Sendable, Equatable {
    public var codeHash: String
    public var clientID: String
    /// Byte for byte the `redirect_uri` of the authorization request; the token request must repeat it.
    public var redirectURI: String
    public var userID: String
    /// Space-separated granted scopes (`openid`, and `email`/`profile` when asked for).
    public var scope: String
    public var nonce: String?
    /// PKCE `code_challenge` (always S256), nil when the client sent none.
    public var codeChallenge: String?
    /// When the person signed in at siwa (the session's start): the ID token's `auth_time`.
    public var authTime: Int64
    public var createdAt: Int64
    public var expiresAt: Int64
    public var consumedAt: Int64?
    /// The ID token's `sid`: names the siwa web session the code was issued in (opaque, never its token's
    /// hash); nil for codes stored before sessions were named.
    public var sid: String?

    public init(codeHash: String, clientID: String, redirectURI: String, userID: String, scope: String, nonce: String?,
                codeChallenge: String?, authTime: Int64, createdAt: Int64, expiresAt: Int64, consumedAt: Int64? = nil,
                sid: String? = nil) {
        self.codeHash = codeHash
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.userID = userID
        self.scope = scope
        self.nonce = nonce
        self.codeChallenge = codeChallenge
        self.authTime = authTime
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.consumedAt = consumedAt
        self.sid = sid
    }
}

/// An access token for the UserInfo endpoint (opaque; only its SHA-256 is stored), remembering the code
/// it was issued for so that a replayed code can revoke it.
public struct OIDCAccessToken: Sendable, Equatable {
    public var tokenHash: String
    public var userID: String
    public var clientID: String
    public var scope: String
    public var codeHash: String
    public var createdAt: Int64
    public var expiresAt: Int64

    public init(tokenHash: String, userID: String, clientID: String, scope: String, codeHash: String, createdAt: Int64, expiresAt: Int64) {
        self.tokenHash = tokenHash
        self.userID = userID
        self.clientID = clientID
        self.scope = scope
        self.codeHash = codeHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// What presenting an authorization code at the token endpoint did.
public enum OIDCCodeRedemption: Sendable, Equatable {
    /// First use: the code is now consumed, and the access token the caller made was stored with it.
    case issued(OIDCAuthorizationCode, UserAccount)
    /// First use, but the caller refused it (wrong client, redirect URI, PKCE verifier, or expired):
    /// consumed all the same, nothing issued.
    case refused(OIDCAuthorizationCode)
    /// A code used before: every access token issued with it was deleted (`revoked` of them).
    case replayed(revoked: Int)
    /// No such code (never issued, swept, or its account deleted).
    case unknown
}

/// A refresh token siwa's OpenID Provider issued to a confidential client that asked for `offline_access`
/// (SPEC §11). Only its SHA-256 is stored. A *family* is the refresh tokens of one authorization code, each
/// spent by the refresh that issues the next, and the access tokens issued beside them; it is named by the
/// hash of that code, which its access tokens carry as their `codeHash`.
public struct OIDCRefreshToken: Sendable, Equatable {
    public var tokenHash: String
    /// The hash of the authorization code the family started from.
    public var familyID: String
    public var userID: String
    public var clientID: String
    /// The scopes granted with the code; every token of the family keeps them (RFC 6749 §6).
    public var scope: String
    /// The ID token's `auth_time`, kept through the family.
    public var authTime: Int64
    public var createdAt: Int64
    /// The family's absolute end (`OIDC_REFRESH_TOKEN_LIFETIME_SECONDS` after the code's exchange); rotation keeps it.
    public var expiresAt: Int64
    /// When a refresh spent it; a spent token presented again ends its family.
    public var spentAt: Int64?
    /// The code's `sid`, kept through the family so that refreshed ID tokens name the same siwa session.
    public var sid: String?

    public init(tokenHash: String, familyID: String, userID: String, clientID: String, scope: String, authTime: Int64,
                createdAt: Int64, expiresAt: Int64, spentAt: Int64? = nil, sid: String? = nil) {
        self.tokenHash = tokenHash
        self.familyID = familyID
        self.userID = userID
        self.clientID = clientID
        self.scope = scope
        self.authTime = authTime
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.spentAt = spentAt
        self.sid = sid
    }
}

/// What the token endpoint stores for one grant: an access token, and a refresh token when one is issued.
public struct OIDCTokenGrant: Sendable, Equatable {
    public var access: OIDCAccessToken
    public var refresh: OIDCRefreshToken?

    public init(access: OIDCAccessToken, refresh: OIDCRefreshToken? = nil) {
        self.access = access
        self.refresh = refresh
    }
}

/// What presenting a refresh token at the token endpoint did.
public enum OIDCRefreshOutcome: Sendable, Equatable {
    /// Spent (the record as it was presented); the new access and refresh tokens are stored.
    case rotated(OIDCRefreshToken, UserAccount)
    /// Living, but the caller refused it (another client, a wider scope): nothing changed.
    case refused(OIDCRefreshToken)
    /// Already spent: the whole family, its refresh and access tokens, ended (RFC 9700 §4.14.2).
    case reused(OIDCRefreshToken)
    /// Unknown (never issued, its family ended, its account deleted) or past the family's end.
    case invalid
}
