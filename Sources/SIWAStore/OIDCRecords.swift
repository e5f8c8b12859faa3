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

    public init(codeHash: String, clientID: String, redirectURI: String, userID: String, scope: String, nonce: String?,
                codeChallenge: String?, authTime: Int64, createdAt: Int64, expiresAt: Int64, consumedAt: Int64? = nil) {
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
