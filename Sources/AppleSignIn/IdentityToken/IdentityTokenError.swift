/// Why an identity token was rejected.
public enum IdentityTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A failure of the JWS or of the claims identity tokens share with notifications.
    case jws(AppleJWSError)
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
        if case .jws(.keysUnavailable) = self { return 503 }
        return 401
    }

    /// Safe to log and to show: values taken from the token are escaped and cut by ``LogSafe``.
    public var description: String {
        switch self {
        case let .jws(error): error.description(for: .identityToken)
        case .missingNonce: "identity token has no nonce"
        case .nonceMismatch: "identity token nonce does not match"
        case .cHashMismatch: "identity token c_hash does not match the authorization code"
        case let .missingClaim(name): "identity token has no \"\(LogSafe.text(name, limit: 64))\" claim"
        }
    }
}
