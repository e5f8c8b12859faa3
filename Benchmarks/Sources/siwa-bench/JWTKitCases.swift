import Foundation
import JWTKit

// jwt-kit's side, in a file of its own: JWTKit and our JOSE both name a type `JWK`.

/// vapor/jwt-kit 5.8.0 verifying Apple identity tokens with the keys of a JWKS document.
struct JWTKitVerifier: Sendable {
    let keys: JWTKeyCollection
    let audience: String

    init(jwksJSON: String, audience: String) async throws {
        keys = JWTKeyCollection()
        try await keys.add(jwksJSON: jwksJSON)
        self.audience = audience
    }

    /// jwt-kit's full check of an Apple token (signature, `iss`, `exp`, `aud`) plus the nonce, which
    /// jwt-kit leaves to the caller; returns the `sub`.
    func verify(_ token: String, nonce: String) async throws -> String {
        let payload = try await keys.verify(token, as: AppleIdentityToken.self, expectedAudience: audience)
        guard payload.nonce == nonce else { throw JWTKitBenchError.nonceMismatch }
        return payload.subject.value
    }
}

/// vapor/jwt-kit 5.8.0 signing Apple client secrets with a P-256 key.
struct JWTKitClientSecretSigner: Sendable {
    /// The client secret's claims (Apple: "Creating a client secret").
    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim
        var sub: SubjectClaim

        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    let keys: JWTKeyCollection
    let keyID: String

    init(pkcs8PEM: String, keyID: String) async throws {
        keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: pkcs8PEM), kid: JWKIdentifier(string: keyID))
        self.keyID = keyID
    }

    func sign(teamID: String, clientID: String, issuedAt: Date, lifetime: TimeInterval) async throws -> String {
        let claims = Claims(iss: IssuerClaim(value: teamID), iat: IssuedAtClaim(value: issuedAt),
                            exp: ExpirationClaim(value: issuedAt.addingTimeInterval(lifetime)),
                            aud: AudienceClaim(value: "https://appleid.apple.com"), sub: SubjectClaim(value: clientID))
        return try await keys.sign(claims, kid: JWKIdentifier(string: keyID))
    }
}

enum JWTKitBenchError: Error {
    case nonceMismatch
}
