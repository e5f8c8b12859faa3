internal import COpenSSL

/// Limits on RSA moduli accepted from configuration and from JWKS documents.
enum RSALimits {
    /// Below this, RS256 is too weak to trust (RFC 7518 §3.3 requires 2048 bits).
    static let minimumBits = 2048
    /// Above this, a hostile JWKS could make every verification expensive.
    static let maximumBits = 8192
}

/// An RSA private key for RS256 (the emulator signs Apple-style identity tokens with one).
///
/// Owns one `EVP_PKEY`, freed in `deinit`. The key is never mutated after `init`, and
/// OpenSSL 3 allows concurrent use of a `const EVP_PKEY`, so `@unchecked Sendable` is sound.
public final class RSAPrivateKey: @unchecked Sendable {
    let key: OpaquePointer
    /// The matching public key.
    public let publicKey: RSAPublicKey

    /// Takes ownership of `key` after checking it is an RSA key of acceptable size.
    private init(owning key: OpaquePointer) throws {
        do {
            guard EVP_PKEY_is_a(key, "RSA") == 1 else {
                throw JOSEError.invalidKey("expected an RSA key, found \(OpenSSL.keyTypeName(key))")
            }
            publicKey = try RSAPublicKey(modulus: OpenSSL.bigNumberParameter(key, "n"),
                                         exponent: OpenSSL.bigNumberParameter(key, "e"))
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.key = key
    }

    /// A new random key of `bits` bits (2048 to 8192), public exponent 65537.
    public static func generate(bits: Int = 2048) throws -> RSAPrivateKey {
        guard bits >= RSALimits.minimumBits, bits <= RSALimits.maximumBits else {
            throw JOSEError.invalidKey("RSA keys must have \(RSALimits.minimumBits) to \(RSALimits.maximumBits) bits, asked for \(bits)")
        }
        guard let key = siwa_generate_rsa_key(UInt32(bits)) else { throw OpenSSL.failure("generating an RSA key") }
        return try RSAPrivateKey(owning: key)
    }

    /// Reads a PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1 (`BEGIN RSA PRIVATE KEY`) PEM.
    /// Other key types, small keys and encrypted PEMs throw ``JOSEError/invalidKey(_:)``.
    public convenience init(pem: String) throws {
        try self.init(owning: OpenSSL.readPrivateKey(pem: pem))
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// The key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`).
    public func pkcs8PEM() throws -> String {
        try OpenSSL.pkcs8PEM(key)
    }

    /// Signs `message` with RSASSA-PKCS1-v1_5 / SHA-256 (JWS "RS256").
    public func signRS256(_ message: some Collection<UInt8>) throws -> [UInt8] {
        try OpenSSL.digestSign(key, Array(message))
    }
}

/// An RSA public key for checking RS256 signatures (Apple's identity tokens).
///
/// Owns one `EVP_PKEY`, freed in `deinit`; immutable after `init` and safe for concurrent
/// use in OpenSSL 3, hence `@unchecked Sendable`.
public final class RSAPublicKey: @unchecked Sendable {
    let key: OpaquePointer
    /// An RS256 verify context for `key`, set up once and only ever copied (see
    /// `OpenSSL.digestVerify(template:signature:message:)`); nil if OpenSSL would not make one,
    /// and then each check initializes its own context. Freed in `deinit`.
    private let verifyTemplate: OpaquePointer?
    /// The modulus, big-endian, without leading zero bytes.
    public let modulus: [UInt8]
    /// The public exponent, big-endian, without leading zero bytes.
    public let exponent: [UInt8]

    /// A key from big-endian unsigned modulus and exponent. Moduli under 2048 bits (or over
    /// 8192) and exponents that are not odd and greater than 1 throw ``JOSEError/invalidKey(_:)``.
    public init(modulus: [UInt8], exponent: [UInt8]) throws {
        let modulus = Array(modulus.drop { $0 == 0 })
        let exponent = Array(exponent.drop { $0 == 0 })
        let bits = modulus.first.map { modulus.count * 8 - $0.leadingZeroBitCount } ?? 0
        guard bits >= RSALimits.minimumBits else {
            throw JOSEError.invalidKey("RSA modulus has \(bits) bits, at least \(RSALimits.minimumBits) required")
        }
        guard bits <= RSALimits.maximumBits else {
            throw JOSEError.invalidKey("RSA modulus has \(bits) bits, at most \(RSALimits.maximumBits) accepted")
        }
        guard let last = exponent.last, last & 1 == 1, exponent != [1], exponent.count <= modulus.count else {
            throw JOSEError.invalidKey("RSA public exponent must be odd and greater than 1")
        }
        guard modulus.last.map({ $0 & 1 == 1 }) == true else {
            throw JOSEError.invalidKey("RSA modulus must be odd")
        }
        key = try OpenSSL.rsaPublicKey(modulus: modulus, exponent: exponent)
        verifyTemplate = OpenSSL.verifyTemplate(key)
        self.modulus = modulus
        self.exponent = exponent
    }

    /// A key from a JWK with `kty` "RSA" and base64url `n`, `e`.
    /// An `alg` other than RS256 or a `use` other than "sig" is rejected.
    public convenience init(jwk: JWK) throws {
        guard jwk.kty == "RSA" else { throw JOSEError.invalidKey("expected a JWK with kty RSA, found \(jwk.kty)") }
        if let alg = jwk.alg, alg != "RS256" { throw JOSEError.unsupportedAlgorithm(alg) }
        if let use = jwk.use, use != "sig" { throw JOSEError.invalidKey("JWK use is \(use), not sig") }
        guard let n = jwk.n, let e = jwk.e else { throw JOSEError.invalidKey("RSA JWK without n or e") }
        try self.init(modulus: Base64URL.decode(n), exponent: Base64URL.decode(e))
    }

    deinit {
        EVP_MD_CTX_free(verifyTemplate)
        EVP_PKEY_free(key)
    }

    /// The key as SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    public func pem() throws -> String {
        try OpenSSL.writeToString("PEM_write_bio_PUBKEY") { bio in
            PEM_write_bio_PUBKEY(bio, key)
        }
    }

    /// The key as a JWK, the way Apple publishes it: kty RSA, kid, use sig, alg RS256, n, e.
    public func jwk(kid: String) -> JWK {
        JWK(kty: "RSA", kid: kid, use: "sig", alg: "RS256",
            n: Base64URL.encode(modulus), e: Base64URL.encode(exponent))
    }

    /// Whether `signature` is a valid RS256 (RSASSA-PKCS1-v1_5 / SHA-256) signature of `message`.
    public func isValidRS256Signature(_ signature: some Collection<UInt8>, for message: some Collection<UInt8>) -> Bool {
        let signature = Array(signature)
        // PKCS#1 signatures are exactly as long as the modulus.
        guard signature.count == modulus.count else { return false }
        if let verifyTemplate {
            return OpenSSL.digestVerify(template: verifyTemplate, signature: signature, message: Array(message))
        }
        return OpenSSL.digestVerify(key, signature: signature, message: Array(message))
    }
}
