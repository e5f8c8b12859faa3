/// A JSON Web Key (RFC 7517) with the members used for EC P-256 and RSA signing keys.
/// Absent members are omitted when encoding.
public struct JWK: Codable, Sendable, Equatable {
    /// Key type: "EC" or "RSA".
    public var kty: String
    /// Key id, matched against a JWS header's `kid`.
    public var kid: String?
    /// Intended use; "sig" for signing keys.
    public var use: String?
    /// Intended algorithm, e.g. "RS256".
    public var alg: String?
    /// RSA modulus, base64url.
    public var n: String?
    /// RSA public exponent, base64url.
    public var e: String?
    /// EC curve, "P-256".
    public var crv: String?
    /// EC x coordinate, base64url.
    public var x: String?
    /// EC y coordinate, base64url.
    public var y: String?

    public init(
        kty: String, kid: String? = nil, use: String? = nil, alg: String? = nil,
        n: String? = nil, e: String? = nil, crv: String? = nil, x: String? = nil, y: String? = nil
    ) {
        self.kty = kty
        self.kid = kid
        self.use = use
        self.alg = alg
        self.n = n
        self.e = e
        self.crv = crv
        self.x = x
        self.y = y
    }
}

/// A JWK Set document (RFC 7517 §5), e.g. Apple's `/auth/keys`.
public struct JWKSet: Codable, Sendable, Equatable {
    /// The keys, in document order.
    public var keys: [JWK]

    public init(keys: [JWK]) {
        self.keys = keys
    }
}
