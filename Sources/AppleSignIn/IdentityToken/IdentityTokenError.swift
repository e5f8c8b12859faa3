/// Why an identity token was rejected. Each case names one check of SPEC §4.4.
public enum IdentityTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a compact JWS, or its header/claims are not the JSON Apple sends.
    case malformed(String)
    /// The header's `alg` is not RS256 (Apple signs only RS256; `none`, HS256 and others are attacks).
    case unsupportedAlgorithm(String)
    /// Apple's key set has no key with this `kid`, even after a refetch.
    case unknownKey(String)
    /// Apple's key set could not be fetched and no cached key applies.
    case keysUnavailable(String)
    case invalidSignature
    case wrongIssuer(String)
    case wrongAudience(String)
    /// `exp` is more than the leeway in the past.
    case expired
    /// `iat` is more than the leeway in the future.
    case issuedInFuture
    /// A nonce was expected but the token has none.
    case missingNonce
    case nonceMismatch
    /// `c_hash` does not match the authorization code it came with.
    case cHashMismatch
    /// A claim every Apple identity token carries is absent.
    case missingClaim(String)

    /// The status a web page or API should answer with: 401 for a token that does not verify,
    /// 503 when Apple's keys cannot be had (the token may be fine; try again later).
    public var httpStatus: Int {
        if case .keysUnavailable = self { return 503 }
        return 401
    }

    /// Safe to log and to show: values taken from the token (its `alg` and `kid` are read before anything is
    /// verified, and may be up to the token's size) are escaped and cut by ``LogSafe``.
    public var description: String {
        switch self {
        case let .malformed(reason): "malformed identity token: \(LogSafe.text(reason))"
        case let .unsupportedAlgorithm(alg): "identity token algorithm \"\(LogSafe.text(alg, limit: 32))\" is not accepted (RS256 only)"
        case let .unknownKey(kid): "no Apple public key with kid \"\(LogSafe.text(kid, limit: 64))\""
        case let .keysUnavailable(reason): "Apple's public keys are unavailable: \(LogSafe.text(reason))"
        case .invalidSignature: "identity token signature is invalid"
        case let .wrongIssuer(iss): "identity token issuer \"\(LogSafe.text(iss, limit: 64))\" is not \(AppleIdentity.issuer)"
        case let .wrongAudience(aud): "identity token audience \"\(LogSafe.text(aud, limit: 64))\" is not an accepted client id"
        case .expired: "identity token has expired"
        case .issuedInFuture: "identity token is issued in the future"
        case .missingNonce: "identity token has no nonce"
        case .nonceMismatch: "identity token nonce does not match"
        case .cHashMismatch: "identity token c_hash does not match the authorization code"
        case let .missingClaim(name): "identity token has no \"\(LogSafe.text(name, limit: 64))\" claim"
        }
    }
}
