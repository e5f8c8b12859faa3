import Foundation
import JOSE
import Logging
import SIWAStore

/// The provider's signing keys as every instance sees them: the rows of `oidc_signing_keys` (SPEC §11), read
/// again at most every ``refreshInterval`` seconds when the provider is used, so that a rotation by
/// `siwa admin oidc rotate-key` reaches every instance without a restart.
///
/// Which key signs is decided at each use from the rows' times, not from when they were read: a key added to
/// sign from a later moment (the rotation's default) is in every instance's JWKS first and signs on all of
/// them from that same second. A key added to sign at once reaches the instances within ``refreshInterval``.
///
/// The key at `OIDC_SIGNING_KEY_PATH` is stored at start-up when the table does not know it yet
/// (``SIWADependencies/adoptConfiguredOIDCKey(logger:)``): the first start, or a rotation done the old way by
/// replacing the file. It also signs when no stored key can (its private half does not open).
public actor OIDCKeyRing {
    /// How long a read of the table serves, by default: the bound on how late an instance starts signing
    /// with a key added to sign at once.
    public static let defaultRefreshInterval: Int64 = 10
    /// Clocks of instances may disagree by this much.
    static let clockSkew: Int64 = 60

    /// The keys of `OIDC_SIGNING_KEY_PATH` (and its `.previous`).
    public nonisolated let configured: OIDCSigningKeys
    public nonisolated let refreshInterval: Int64
    let database: SIWADatabase
    let cipher: TokenCipher
    let now: @Sendable () -> Int64
    let logger: Logger

    private var snapshot: OIDCKeySet?
    private var loadedAt: Int64 = 0
    private var loading: Task<OIDCKeySet, any Error>?
    /// Private keys opened and parsed so far, by `kid` (a key's private half never changes).
    private var privateKeys: [String: RSAPrivateKey] = [:]
    /// Keys whose private half did not open, logged once each.
    private var unreadable: Set<String> = []

    init(configured: OIDCSigningKeys, database: SIWADatabase, cipher: TokenCipher, refreshInterval: Int64,
         logger: Logger, now: @escaping @Sendable () -> Int64) {
        self.configured = configured
        self.database = database
        self.cipher = cipher
        self.refreshInterval = refreshInterval
        self.logger = logger
        self.now = now
    }

    /// Until when a key that stops signing at `end` stays published: until every ID token it may have signed
    /// has expired, counting an instance that learns of its successor one refresh late and clocks that
    /// disagree.
    public nonisolated func publishedUntil(signingEndsAt end: Int64) -> Int64 {
        end + OIDCProviderController.idTokenLifetime + refreshInterval + Self.clockSkew
    }

    /// The keys now: the last read of the table while it is fresh, else a new read. When the database does
    /// not answer, the last read serves (and the next use tries again after ``refreshInterval``); with no
    /// read yet, the error is thrown.
    public func keySet() async throws -> OIDCKeySet {
        let time = now()
        if let snapshot, time >= loadedAt, time - loadedAt < refreshInterval { return snapshot }
        if let loading { return try await loading.value }
        let task = Task { try await self.load() }
        loading = task
        defer { loading = nil }
        do {
            let set = try await task.value
            snapshot = set
            loadedAt = time
            return set
        } catch {
            guard let snapshot else { throw error }
            logger.warning("OIDC signing keys could not be read again; the last read serves", metadata: ["error": "\(error)"])
            loadedAt = time
            return snapshot
        }
    }

    private func load() async throws -> OIDCKeySet {
        let time = now()
        let rows = try await database.oidc.oidcSigningKeys(publishedAt: time)
        var keys: [OIDCKeySet.Key] = []
        for row in rows {
            guard let jwk = try? JSONDecoder().decode(JWK.self, from: Data(row.publicJWK.utf8)),
                  let publicKey = try? RSAPublicKey(jwk: jwk)
            else {
                if unreadable.insert(row.kid).inserted {
                    logger.error("an OIDC signing key's public half is not an RSA JWK: left out", metadata: ["kid": "\(row.kid)"])
                }
                continue
            }
            keys.append(OIDCKeySet.Key(kid: row.kid, publicKey: publicKey, privateKey: privateKey(of: row),
                                       signsFrom: row.signsFrom, publishedUntil: row.publishedUntil))
        }
        return OIDCKeySet(keys: keys, configured: configured)
    }

    /// The row's private key, opened once and kept; nil when the row has none or it does not open (a database
    /// restored under another TOKEN_ENCRYPTION_KEY): such a key never signs, and the next one that can does.
    private func privateKey(of row: OIDCSigningKeyRecord) -> RSAPrivateKey? {
        if let known = privateKeys[row.kid] { return known }
        guard let sealed = row.privateKey else { return nil }
        do {
            let key = try RSAPrivateKey(pem: try cipher.open(sealed, from: .oidcSigningKey(kid: row.kid)))
            guard OIDCSigningKeys.thumbprint(key.publicKey) == row.kid else {
                throw JOSEError.invalidKey("the private key does not match its kid")
            }
            privateKeys[row.kid] = key
            return key
        } catch {
            if unreadable.insert(row.kid).inserted {
                logger.error("an OIDC signing key does not open with TOKEN_ENCRYPTION_KEY (or its previous key): it will not sign",
                             metadata: ["kid": "\(row.kid)", "error": "\(error)"])
            }
            return nil
        }
    }
}

/// The signing keys at one read of the table: which signs at a given second, and what the JWKS lists.
public struct OIDCKeySet: Sendable {
    public struct Key: Sendable {
        public let kid: String
        public let publicKey: RSAPublicKey
        /// Nil: published only (past its signing, or its private half did not open).
        let privateKey: RSAPrivateKey?
        public let signsFrom: Int64
        public let publishedUntil: Int64?

        func isPublished(at now: Int64) -> Bool { publishedUntil.map { $0 > now } ?? true }
    }

    /// Newest added first (the table's order).
    public let keys: [Key]
    /// `OIDC_SIGNING_KEY_PATH`'s keys: the signer when no stored key can sign, and its `.previous`, published.
    let configured: OIDCSigningKeys

    /// The key that signs at `now`: the newest added whose time has come and which can sign; else the
    /// configured key.
    public func signer(at now: Int64) -> (kid: String, key: RSAPrivateKey) {
        for key in keys where key.signsFrom <= now && key.isPublished(at: now) {
            if let privateKey = key.privateKey { return (key.kid, privateKey) }
        }
        return (configured.current.kid, configured.currentPrivateKey)
    }

    /// The JWKS at `now`: the signing key first, then every other published key (those yet to sign and those
    /// whose tokens may still be valid), then the configured `.previous` key.
    public func jwks(at now: Int64) -> JWKSet {
        let signing = signer(at: now).kid
        var published: [JWK] = []
        var seen: Set<String> = [signing]
        if let stored = keys.first(where: { $0.kid == signing }) {
            published.append(stored.publicKey.jwk(kid: signing))
        } else {
            published.append(configured.current.publicKey.jwk(kid: signing))
        }
        for key in keys where key.isPublished(at: now) && seen.insert(key.kid).inserted {
            published.append(key.publicKey.jwk(kid: key.kid))
        }
        if let previous = configured.previous, seen.insert(previous.kid).inserted {
            published.append(previous.publicKey.jwk(kid: previous.kid))
        }
        return JWKSet(keys: published)
    }
}
