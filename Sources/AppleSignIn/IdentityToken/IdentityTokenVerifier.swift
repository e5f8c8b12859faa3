import Foundation
import JOSE

/// What nonce an identity token must carry.
public enum ExpectedNonce: Sendable, Equatable {
    /// The token's `nonce` must equal this value (the web flow sends the nonce as is).
    case exact(String)
    /// The token's `nonce` must equal the lowercase hex SHA-256 of this value (the iOS convention:
    /// the app sends the hash to Apple and the raw nonce to us).
    case sha256Hex(of: String)
    /// No nonce check (e.g. a token returned by the code exchange, already bound by the code).
    case notChecked
}

/// Verifies Apple identity tokens: every check of SPEC §4.4.
///
/// RS256 only (`none`, HS256, ES256 … are rejected before any key lookup); `kid` from the
/// ``JWKSCache``; `iss` is Apple; `aud` is one of `audiences`; `exp > now − leeway`;
/// `iat ≤ now + leeway`; the nonce; and `c_hash`, when the token has one and a code is given.
public struct IdentityTokenVerifier: Sendable {
    /// Apple's key cache.
    public let keys: JWKSCache
    /// Seconds of clock skew tolerated on `exp` and `iat`.
    public let leeway: Int64
    private let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - keys: Apple's key cache.
    ///   - leeway: seconds of clock skew tolerated on `exp` and `iat`; default 60.
    ///   - now: the clock in Unix seconds, injectable for tests.
    public init(keys: JWKSCache, leeway: Int64 = 60, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.keys = keys
        self.leeway = leeway
        self.now = now
    }

    /// Verifies `token` and returns its claims.
    /// - Parameters:
    ///   - audiences: accepted client ids (`APPLE_CLIENT_ID`, or the native bundle ids).
    ///   - nonce: the nonce the token must carry.
    ///   - code: the authorization code the token arrived with, to check `c_hash` against.
    /// - Throws: ``IdentityTokenError``.
    public func verify(_ token: String, audiences: Set<String>, nonce: ExpectedNonce, code: String?) async throws -> IdentityTokenClaims {
        let jws: CompactJWS
        let key: RSAPublicKey
        do {
            jws = try AppleJWS.parse(token)
            key = try await AppleJWS.key(for: jws, in: keys)
        } catch let error as AppleJWSError {
            throw IdentityTokenError.jws(error)
        }
        guard jws.isValidRS256(for: key) else { throw IdentityTokenError.jws(.invalidSignature) }

        let claims: IdentityTokenClaims
        do {
            claims = try JSONDecoder().decode(IdentityTokenClaims.self, from: Data(jws.payload))
        } catch DecodingError.keyNotFound(let key, _) {
            throw IdentityTokenError.missingClaim(key.stringValue)
        } catch {
            throw IdentityTokenError.jws(.malformed("claims are not the JSON Apple sends (\(AppleJWS.describe(error)))"))
        }

        guard claims.iss == AppleIdentity.issuer else { throw IdentityTokenError.jws(.wrongIssuer(claims.iss)) }
        guard audiences.contains(claims.aud) else { throw IdentityTokenError.jws(.wrongAudience(claims.aud)) }
        let t = now()
        guard claims.exp > t - leeway else { throw IdentityTokenError.jws(.expired) }
        guard claims.iat <= t + leeway else { throw IdentityTokenError.jws(.issuedInFuture) }
        guard !claims.sub.isEmpty else { throw IdentityTokenError.missingClaim("sub") }

        switch nonce {
        case .notChecked:
            break
        case let .exact(expected):
            guard let actual = claims.nonce else { throw IdentityTokenError.missingNonce }
            guard ConstantTime.equals(Array(actual.utf8), Array(expected.utf8)) else { throw IdentityTokenError.nonceMismatch }
        case let .sha256Hex(of: raw):
            guard let actual = claims.nonce else { throw IdentityTokenError.missingNonce }
            let expected = SHA256.hexDigest(Array(raw.utf8))
            guard ConstantTime.equals(Array(actual.lowercased().utf8), Array(expected.utf8)) else {
                throw IdentityTokenError.nonceMismatch
            }
        }

        if let code, let cHash = claims.cHash {
            guard ConstantTime.equals(Array(cHash.utf8), Array(Self.cHash(forCode: code).utf8)) else {
                throw IdentityTokenError.cHashMismatch
            }
        }
        return claims
    }

    /// The `c_hash` of an authorization code: base64url of the left 16 bytes of SHA-256(code)
    /// (OpenID Connect Core §3.3.2.11 for an RS256 token).
    public static func cHash(forCode code: String) -> String {
        Base64URL.encode(SHA256.hash(Array(code.utf8)).prefix(16))
    }
}
