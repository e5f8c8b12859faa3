import Foundation
import JOSE
import Logging
import SIWAStore

/// What `siwa admin oidc rotate-key` did.
public struct OIDCKeyRotation: Sendable, Equatable {
    public struct Superseded: Sendable, Equatable {
        public var kid: String
        /// Until when it stays in the JWKS (now, when withdrawn).
        public var publishedUntil: Int64
    }

    /// The new key's `kid`.
    public var kid: String
    /// From when it signs, on every instance.
    public var signsFrom: Int64
    /// The keys it replaces.
    public var superseded: [Superseded]
    /// Whether the others were withdrawn at once (a leaked key) rather than left published.
    public var withdrewOthers: Bool
}

extension SIWADependencies {
    /// Stores `OIDC_SIGNING_KEY_PATH`'s key (sealed with TOKEN_ENCRYPTION_KEY) when the table does not know
    /// its `kid`: on the first start with the table it signs from the start; later (the file was replaced: a
    /// rotation the old way) it signs from now, and the keys it replaces stay published until the ID tokens
    /// they signed have expired. A key the table knows, even one long retired, is left as it is. Returns
    /// whether it stored the key. Two instances starting together store it once.
    @discardableResult
    public func adoptConfiguredOIDCKey(logger: Logger) async throws -> Bool {
        guard let ring = oidcKeys else { return false }
        let configured = ring.configured
        let stored = try await database.oidc.oidcSigningKeys()
        guard !stored.contains(where: { $0.kid == configured.current.kid }) else { return false }
        let time = now()
        let signsFrom = stored.isEmpty ? 0 : time
        let record = try Self.signingKeyRecord(configured.currentPrivateKey, kid: configured.current.kid, cipher: cipher,
                                               createdAt: time, signsFrom: signsFrom)
        let added = try await database.oidc.addOIDCSigningKey(record, supersededUntil: ring.publishedUntil(signingEndsAt: signsFrom), now: time)
        if added {
            logger.notice(stored.isEmpty ? "stored the OIDC signing key" : "stored a new OIDC signing key from OIDC_SIGNING_KEY_PATH: it signs from now",
                          metadata: ["kid": "\(configured.current.kid)"])
        }
        return added
    }

    /// A new RSA key (2048 bits) for the OpenID provider, stored for every instance: it signs from
    /// `signsIn` seconds from now (before then it is only published, so that relying parties that cache the
    /// JWKS know it before they see a token it signed), and the keys it replaces stay published until the
    /// ID tokens they may sign meanwhile have expired. `withdrawOthers` (a leaked key) makes it sign at once
    /// and takes every other key out of the JWKS now: tokens they signed stop verifying.
    public func rotateOIDCSigningKey(signsIn: Int64, withdrawOthers: Bool) async throws -> OIDCKeyRotation {
        guard let ring = oidcKeys else { throw OIDCProviderOff() }
        let key = try RSAPrivateKey.generate()
        let kid = OIDCSigningKeys.thumbprint(key.publicKey)
        let time = now()
        let signsFrom = withdrawOthers ? time : time + max(0, signsIn)
        let before = try await database.oidc.oidcSigningKeys(publishedAt: time)
        let record = try Self.signingKeyRecord(key, kid: kid, cipher: cipher, createdAt: time, signsFrom: signsFrom)
        let until = ring.publishedUntil(signingEndsAt: signsFrom)
        _ = try await database.oidc.addOIDCSigningKey(record, supersededUntil: until, withdrawOthers: withdrawOthers, now: time)
        let superseded = before.map { old in
            OIDCKeyRotation.Superseded(kid: old.kid, publishedUntil: withdrawOthers ? time : (old.publishedUntil ?? until))
        }
        return OIDCKeyRotation(kid: kid, signsFrom: signsFrom, superseded: superseded, withdrewOthers: withdrawOthers)
    }

    static func signingKeyRecord(_ key: RSAPrivateKey, kid: String, cipher: TokenCipher, createdAt: Int64, signsFrom: Int64) throws -> OIDCSigningKeyRecord {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let jwk = String(decoding: try encoder.encode(key.publicKey.jwk(kid: kid)), as: UTF8.self)
        return OIDCSigningKeyRecord(kid: kid, publicJWK: jwk, privateKey: try cipher.seal(try key.pkcs8PEM(), for: .oidcSigningKey(kid: kid)),
                                    createdAt: createdAt, signsFrom: signsFrom)
    }
}

/// A key rotation asked of a site without the OpenID provider.
public struct OIDCProviderOff: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the OpenID provider is off (OIDC_CLIENTS_FILE is not set): it has no signing key to rotate" }
}
