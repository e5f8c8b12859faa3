/// A failure of the checks identity tokens and notifications share: the JWS (RS256 only, a key from
/// Apple's key set, the signature) and the claims `iss`, `aud`, `iat` and `exp`. ``JWKSCache`` throws it
/// as is; ``IdentityTokenError`` and ``NotificationError`` carry it as `.jws(_)` beside their own failures.
public enum AppleJWSError: Error, Equatable, Sendable, CustomStringConvertible {
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
    /// `exp` is more than the leeway in the past (for a notification also: `iat` older than its maximum age).
    case expired
    /// `iat` is more than the leeway in the future.
    case issuedInFuture

    /// What was being verified, which the words of a description name.
    public enum Subject: Sendable {
        case identityToken, notification
    }

    /// Safe to log and to show: values taken from the token (its `alg` and `kid` are read before anything is
    /// verified, and may be up to the token's size) are escaped and cut by ``LogSafe``.
    public func description(for subject: Subject) -> String {
        let noun = subject == .identityToken ? "identity token" : "notification"
        return switch self {
        case let .malformed(reason):
            subject == .identityToken ? "malformed identity token: \(LogSafe.text(reason))" : "notification token is malformed: \(LogSafe.text(reason))"
        case let .unsupportedAlgorithm(alg): "\(noun) algorithm \"\(LogSafe.text(alg, limit: 32))\" is not accepted (RS256 only)"
        case let .unknownKey(kid): "no Apple public key with kid \"\(LogSafe.text(kid, limit: 64))\""
        case let .keysUnavailable(reason): "Apple's public keys are unavailable: \(LogSafe.text(reason))"
        case .invalidSignature: "\(noun) signature is invalid"
        case let .wrongIssuer(iss): "\(noun) issuer \"\(LogSafe.text(iss, limit: 64))\" is not \(AppleIdentity.issuer)"
        case let .wrongAudience(aud):
            "\(noun) audience \"\(LogSafe.text(aud, limit: 64))\" is not \(subject == .identityToken ? "an accepted" : "a configured") client id"
        case .expired: subject == .identityToken ? "identity token has expired" : "notification is too old or expired"
        case .issuedInFuture: "\(noun) is issued in the future"
        }
    }

    /// In an identity token's words (the key set's failures read the same for both).
    public var description: String { description(for: .identityToken) }
}
