internal import COpenSSL

/// A P-256 (secp256r1) private key, e.g. Apple's `.p8` key for signing client secrets.
///
/// Owns one `EVP_PKEY`, freed in `deinit`. The key is never mutated after `init`, and
/// OpenSSL 3 allows concurrent use of a `const EVP_PKEY` from many threads (each
/// operation makes its own context), so `@unchecked Sendable` is sound.
public final class P256PrivateKey: @unchecked Sendable {
    let key: OpaquePointer
    /// The matching public key.
    public let publicKey: P256PublicKey

    /// Takes ownership of `key` after checking it is a P-256 key.
    private init(owning key: OpaquePointer) throws {
        do {
            try P256PublicKey.requireP256(key)
            publicKey = try P256PublicKey(x: OpenSSL.bigNumberParameter(key, "qx", width: 32),
                                          y: OpenSSL.bigNumberParameter(key, "qy", width: 32))
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.key = key
    }

    /// Reads a PKCS#8 PEM (`BEGIN PRIVATE KEY`, Apple's `.p8`) or SEC1 PEM
    /// (`BEGIN EC PRIVATE KEY`). RSA keys, other curves and encrypted PEMs throw
    /// ``JOSEError/invalidKey(_:)`` saying what was found.
    public convenience init(pkcs8PEM: String) throws {
        try self.init(owning: OpenSSL.readPrivateKey(pem: pkcs8PEM))
    }

    /// A new random P-256 key.
    public static func generate() throws -> P256PrivateKey {
        guard let key = siwa_generate_p256_key() else { throw OpenSSL.failure("generating a P-256 key") }
        return try P256PrivateKey(owning: key)
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// The key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`), the `.p8` format.
    public func pkcs8PEM() throws -> String {
        try OpenSSL.pkcs8PEM(key)
    }

    /// Signs `message` with ECDSA P-256 / SHA-256 and returns the JWS form (RFC 7518 §3.4):
    /// 64 bytes, R then S, each left-padded to 32 bytes (never DER, never shortened).
    public func signES256(_ message: some Collection<UInt8>) throws -> [UInt8] {
        let der = try OpenSSL.digestSign(key, Array(message))
        return try ECDSASignature.raw(fromDER: der)
    }
}

/// A P-256 public key, e.g. for checking ES256 tokens.
///
/// Owns one `EVP_PKEY`, freed in `deinit`; immutable after `init` and safe for concurrent
/// use in OpenSSL 3, hence `@unchecked Sendable`.
public final class P256PublicKey: @unchecked Sendable {
    let key: OpaquePointer
    /// The x coordinate, 32 big-endian bytes.
    public let x: [UInt8]
    /// The y coordinate, 32 big-endian bytes.
    public let y: [UInt8]

    /// A key from its affine coordinates (32 big-endian bytes each). The point must be on
    /// the curve, else ``JOSEError/invalidKey(_:)``.
    public init(x: [UInt8], y: [UInt8]) throws {
        guard x.count == 32, y.count == 32 else {
            throw JOSEError.invalidKey("P-256 coordinates are 32 bytes each, found \(x.count) and \(y.count)")
        }
        // SEC1 uncompressed point: 0x04 || X || Y.
        let point: [UInt8] = [0x04] + x + y
        let key = try OpenSSL.ecPublicKey(group: "prime256v1", point: point)
        // fromdata already decodes the point with an on-curve check; the public check
        // below also rejects the point at infinity and makes the guarantee explicit.
        guard OpenSSL.checkPublicKey(key) else {
            EVP_PKEY_free(key)
            throw JOSEError.invalidKey("the point is not on the P-256 curve")
        }
        self.key = key
        self.x = x
        self.y = y
    }

    /// Reads a SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`) holding a P-256 key.
    public convenience init(pem: String) throws {
        let key = try OpenSSL.withReadBIO(pem) { bio in
            guard let key = siwa_pem_read_public_key(bio) else {
                throw JOSEError.invalidKey("no readable public key in PEM: \(OpenSSL.drainErrors())")
            }
            return key
        }
        defer { EVP_PKEY_free(key) }
        try Self.requireP256(key)
        try self.init(x: OpenSSL.bigNumberParameter(key, "qx", width: 32),
                      y: OpenSSL.bigNumberParameter(key, "qy", width: 32))
    }

    /// A key from a JWK with `kty` "EC", `crv` "P-256" and base64url `x`, `y`.
    /// An `alg` other than ES256 or a `use` other than "sig" is rejected.
    public convenience init(jwk: JWK) throws {
        guard jwk.kty == "EC" else { throw JOSEError.invalidKey("expected a JWK with kty EC, found \(jwk.kty)") }
        guard jwk.crv == "P-256" else {
            throw JOSEError.invalidKey("expected a P-256 JWK, found curve \(jwk.crv ?? "none")")
        }
        if let alg = jwk.alg, alg != "ES256" { throw JOSEError.unsupportedAlgorithm(alg) }
        if let use = jwk.use, use != "sig" { throw JOSEError.invalidKey("JWK use is \(use), not sig") }
        guard let x = jwk.x, let y = jwk.y else { throw JOSEError.invalidKey("EC JWK without x or y") }
        try self.init(x: Base64URL.decode(x), y: Base64URL.decode(y))
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// The key as SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    public func pem() throws -> String {
        try OpenSSL.writeToString("PEM_write_bio_PUBKEY") { bio in
            PEM_write_bio_PUBKEY(bio, key)
        }
    }

    /// The key as a JWK: kty EC, crv P-256, x, y, and `kid` when given.
    public func jwk(kid: String?) -> JWK {
        JWK(kty: "EC", kid: kid, crv: "P-256", x: Base64URL.encode(x), y: Base64URL.encode(y))
    }

    /// Whether `signature` (the 64-byte raw R || S JWS form) is a valid ES256 signature of
    /// `message`. Any other length, including DER, is `false`.
    public func isValidES256Signature(_ signature: some Collection<UInt8>, for message: some Collection<UInt8>) -> Bool {
        guard let der = ECDSASignature.der(fromRaw: Array(signature)) else { return false }
        return OpenSSL.digestVerify(key, signature: der, message: Array(message))
    }

    /// Throws unless `key` is an EC key on P-256, naming what it found instead.
    static func requireP256(_ key: OpaquePointer) throws {
        guard EVP_PKEY_is_a(key, "EC") == 1 else {
            throw JOSEError.invalidKey("expected a P-256 key, found \(OpenSSL.keyTypeName(key))")
        }
        let group = OpenSSL.groupName(key) ?? "an unknown curve"
        guard group == "prime256v1" || group == "P-256" else {
            throw JOSEError.invalidKey("expected a P-256 key, found EC curve \(group)")
        }
    }
}

/// Conversions between DER ECDSA signatures (OpenSSL) and raw R || S (JWS).
enum ECDSASignature {
    static let coordinateCount = 32

    /// DER `ECDSA-Sig-Value` → 64 bytes R || S, each left-padded to 32 bytes.
    static func raw(fromDER der: [UInt8]) throws -> [UInt8] {
        let signature: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            // d2i reads at most `buffer.count` bytes and advances `cursor`; we discard it.
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else { throw OpenSSL.failure("decoding the ECDSA signature") }
        defer { ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: 2 * coordinateCount)
        let ok = raw.withUnsafeMutableBufferPointer { buffer in
            // Each BN_bn2binpad writes exactly 32 bytes into its own half of the 64-byte
            // buffer, or fails if the number does not fit.
            BN_bn2binpad(ECDSA_SIG_get0_r(signature), buffer.baseAddress!, Int32(coordinateCount)) == Int32(coordinateCount)
                && BN_bn2binpad(ECDSA_SIG_get0_s(signature), buffer.baseAddress! + coordinateCount, Int32(coordinateCount)) == Int32(coordinateCount)
        }
        guard ok else { throw OpenSSL.failure("encoding the ECDSA signature") }
        return raw
    }

    /// 64 bytes R || S → DER, or nil when the length is wrong.
    static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 2 * coordinateCount else { return nil }
        defer { OpenSSL.clearErrors() }
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let (r, s) = raw.withUnsafeBufferPointer { buffer in
            // Each half is exactly 32 readable bytes of the 64-byte buffer.
            (BN_bin2bn(buffer.baseAddress!, Int32(coordinateCount), nil),
             BN_bin2bn(buffer.baseAddress! + coordinateCount, Int32(coordinateCount), nil))
        }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        // On success ECDSA_SIG_set0 takes ownership of r and s.
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            // The buffer has the exact length i2d reported for this signature.
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }
}
