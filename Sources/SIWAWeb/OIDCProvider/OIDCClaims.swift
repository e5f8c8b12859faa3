import Foundation
import JOSE
import SIWAStore

/// The claims of an ID token, and of the UserInfo answer (which leaves out the token's own fields).
/// Built from siwa's account — never from Apple's tokens, and `sub` is siwa's user id, not Apple's `sub`.
struct OIDCClaims: Codable, Equatable, Sendable {
    var iss: String?
    var sub: String
    var aud: String?
    var exp: Int64?
    var iat: Int64?
    var auth_time: Int64?
    var nonce: String?
    var azp: String?
    var at_hash: String?
    var email: String?
    var email_verified: Bool?
    var is_private_email: Bool?
    var name: String?
    var given_name: String?
    var family_name: String?
    /// The siwa web session the person signed in with (OpenID Back-Channel Logout 1.0 §2.1): opaque, the same
    /// for every ID token of that session, another for another session.
    var sid: String?

    /// `sub` and what `scopes` allow: `email`, `email_verified`, `is_private_email` (email); `name`,
    /// `given_name`, `family_name` from the stored name (profile) — every time, though Apple sent it once.
    static func person(_ account: UserAccount, scopes: [String]) -> OIDCClaims {
        var claims = OIDCClaims(sub: account.id)
        if scopes.contains("email"), let email = account.email {
            claims.email = email
            claims.email_verified = account.emailVerified
            claims.is_private_email = account.isPrivateEmail
        }
        if scopes.contains("profile") {
            claims.name = account.displayName
            claims.given_name = UserAccount.trimmed(account.givenName)
            claims.family_name = UserAccount.trimmed(account.familyName)
        }
        return claims
    }

    /// The ID token (OIDC Core §2, §3.1.3.6): `at_hash` is the left half of the access token's SHA-256.
    static func idToken(_ account: UserAccount, code: OIDCAuthorizationCode, issuer: String, accessToken: String,
                        now: Int64, lifetime: Int64) -> OIDCClaims {
        idToken(account, clientID: code.clientID, scope: code.scope, authTime: code.authTime, nonce: code.nonce, sid: code.sid,
                issuer: issuer, accessToken: accessToken, now: now, lifetime: lifetime)
    }

    /// The ID token of a refresh (OIDC Core §12.2): the same `sub`, `auth_time` and `sid` as the first, no `nonce`.
    static func idToken(_ account: UserAccount, refreshed token: OIDCRefreshToken, scope: String, issuer: String, accessToken: String,
                        now: Int64, lifetime: Int64) -> OIDCClaims {
        idToken(account, clientID: token.clientID, scope: scope, authTime: token.authTime, nonce: nil, sid: token.sid,
                issuer: issuer, accessToken: accessToken, now: now, lifetime: lifetime)
    }

    private static func idToken(_ account: UserAccount, clientID: String, scope: String, authTime: Int64, nonce: String?,
                                sid: String?, issuer: String, accessToken: String, now: Int64, lifetime: Int64) -> OIDCClaims {
        var claims = person(account, scopes: scope.split(separator: " ").map(String.init))
        claims.iss = issuer
        claims.aud = clientID
        claims.azp = clientID
        claims.iat = now
        claims.exp = now + lifetime
        claims.auth_time = authTime
        claims.nonce = nonce
        claims.sid = sid
        claims.at_hash = Base64URL.encode(SHA256.hash(Array(accessToken.utf8)).prefix(16))
        return claims
    }
}
