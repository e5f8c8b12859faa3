import SQLKit

/// The OpenID provider's signing keys, shared by every instance through the database, so that a rotation
/// (`siwa admin oidc rotate-key`) reaches them all without a restart. A key's private half is sealed by the
/// caller (with TOKEN_ENCRYPTION_KEY, bound to its `kid`); its public half is kept in clear, as published.
///
/// A row is never deleted: once a key is no longer published its private half is wiped and the row stays
/// as a tombstone, so that an instance still configured with that key's file does not take it up again.
let oidcSigningKeysMigration = Migration(version: 9, name: "openid provider signing keys", statements: [
    """
    CREATE TABLE oidc_signing_keys (
        kid TEXT PRIMARY KEY,
        public_jwk TEXT NOT NULL,
        private_key TEXT NULL,
        created_at BIGINT NOT NULL,
        signs_from BIGINT NOT NULL,
        published_until BIGINT NULL
    )
    """,
])

/// One of the provider's signing keys (SPEC §11).
public struct OIDCSigningKeyRecord: Sendable, Equatable {
    /// The RFC 7638 thumbprint of the public key: the `kid` of its JWK and of the tokens it signs.
    public var kid: String
    /// The public key as its JWK (JSON), as published.
    public var publicJWK: String
    /// The private key, sealed by the caller; nil once the key is past its publication (or withdrawn).
    public var privateKey: String?
    public var createdAt: Int64
    /// From when it signs, unless a key added after it signs by then (the newest added key whose time has
    /// come signs; a later `signs_from` lets every instance and relying party see it in the JWKS first).
    public var signsFrom: Int64
    /// Until when it is published: nil while no newer key was added; then until the ID tokens it may
    /// still sign have expired.
    public var publishedUntil: Int64?

    public init(kid: String, publicJWK: String, privateKey: String?, createdAt: Int64, signsFrom: Int64, publishedUntil: Int64? = nil) {
        self.kid = kid
        self.publicJWK = publicJWK
        self.privateKey = privateKey
        self.createdAt = createdAt
        self.signsFrom = signsFrom
        self.publishedUntil = publishedUntil
    }

    /// Whether the JWKS lists it at `now`.
    public func isPublished(at now: Int64) -> Bool { publishedUntil.map { $0 > now } ?? true }
}

extension Columns {
    static let oidcSigningKey = ["kid", "public_jwk", "private_key", "created_at", "signs_from", "published_until"]
}

extension SQLRow {
    func oidcSigningKey() throws -> OIDCSigningKeyRecord {
        OIDCSigningKeyRecord(
            kid: try decode(column: "kid", as: String.self),
            publicJWK: try decode(column: "public_jwk", as: String.self),
            privateKey: try decode(column: "private_key", as: String?.self),
            createdAt: try decode(column: "created_at", as: Int64.self),
            signsFrom: try decode(column: "signs_from", as: Int64.self),
            publishedUntil: try decode(column: "published_until", as: Int64?.self))
    }
}

extension OIDCRepository {
    /// The signing keys, newest added first (ties: the later `signs_from`, then the `kid`, so every instance
    /// orders them alike). With `publishedAt`, only those published then; without, every row (tombstones too).
    public func oidcSigningKeys(publishedAt now: Int64? = nil) async throws -> [OIDCSigningKeyRecord] {
        try await withSQL { sql in
            var filter: SQLQueryString = ""
            if let now { filter = "WHERE published_until IS NULL OR published_until > \(bind: now)" }
            return try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.oidcSigningKey)) FROM oidc_signing_keys \(filter)
                ORDER BY created_at DESC, signs_from DESC, kid DESC
                """).all().map { try $0.oidcSigningKey() }
        }
    }

    /// Adds `key` in one transaction; false (and nothing changed) when its `kid` is already stored, a
    /// tombstone included.
    ///
    /// The keys published until further notice (`published_until` NULL) are superseded: they stay published
    /// until `supersededUntil`, or, with `withdrawOthers` (a key that leaked), every other key stops being
    /// published at `now` and its private half is wiped at once. Keys past their publication lose their
    /// private half.
    public func addOIDCSigningKey(_ key: OIDCSigningKeyRecord, supersededUntil: Int64, withdrawOthers: Bool = false, now: Int64) async throws -> Bool {
        try await transaction { sql in
            guard try await sql.raw("""
                INSERT INTO oidc_signing_keys (kid, public_jwk, private_key, created_at, signs_from, published_until)
                VALUES (\(bind: key.kid), \(bind: key.publicJWK), \(bind: key.privateKey), \(bind: key.createdAt),
                        \(bind: key.signsFrom), \(bind: key.publishedUntil))
                ON CONFLICT (kid) DO NOTHING
                RETURNING kid
                """).first() != nil
            else { return false }
            if withdrawOthers {
                try await sql.raw("""
                    UPDATE oidc_signing_keys SET published_until = \(bind: now), private_key = NULL
                    WHERE kid <> \(bind: key.kid) AND (published_until IS NULL OR published_until > \(bind: now))
                    """).run()
            } else {
                try await sql.raw("""
                    UPDATE oidc_signing_keys SET published_until = \(bind: supersededUntil)
                    WHERE kid <> \(bind: key.kid) AND published_until IS NULL
                    """).run()
            }
            try await sql.raw("""
                UPDATE oidc_signing_keys SET private_key = NULL
                WHERE private_key IS NOT NULL AND published_until IS NOT NULL AND published_until <= \(bind: now)
                """).run()
            return true
        }
    }
}
