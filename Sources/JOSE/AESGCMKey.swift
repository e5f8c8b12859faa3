internal import COpenSSL

/// An AES-256-GCM key, used to encrypt Apple tokens at rest.
///
/// Sealed box layout: 12-byte random nonce || ciphertext || 16-byte tag. A fresh random
/// nonce per seal keeps nonce reuse negligible for well under 2^32 messages per key.
public struct AESGCMKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    static let nonceCount = 12
    static let tagCount = 16

    /// The 32 raw key bytes.
    public let bytes: [UInt8]

    /// Wraps 32 raw key bytes; any other length throws ``JOSEError/invalidKey(_:)``.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == 32 else {
            throw JOSEError.invalidKey("an AES-256-GCM key is 32 bytes, found \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// Never the key bytes, whatever prints or reflects the value (a configuration or a service logged whole).
    public var description: String { "AESGCMKey(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    /// A new random key.
    public static func generate() -> AESGCMKey {
        // 32 random bytes always satisfy the length check.
        try! AESGCMKey(bytes: SecureRandom.bytes(count: 32))
    }

    /// Encrypts and authenticates `plaintext`, also authenticating (not encrypting) `aad`.
    public func seal(
        _ plaintext: some Collection<UInt8>,
        authenticating aad: some Collection<UInt8> = [UInt8]()
    ) throws -> [UInt8] {
        let nonce = SecureRandom.bytes(count: Self.nonceCount)
        let (ciphertext, tag) = try Self.seal(key: bytes, nonce: nonce, plaintext: Array(plaintext), aad: Array(aad))
        return nonce + ciphertext + tag
    }

    /// Checks and decrypts a sealed box made by ``seal(_:authenticating:)`` with the same `aad`.
    /// A wrong key, altered bytes or a different `aad` throw ``JOSEError/invalidSignature``.
    public func open(
        _ sealed: some Collection<UInt8>,
        authenticating aad: some Collection<UInt8> = [UInt8]()
    ) throws -> [UInt8] {
        let box = Array(sealed)
        guard box.count >= Self.nonceCount + Self.tagCount else {
            // Too short to hold a nonce and a tag: as untrustworthy as a bad tag.
            throw JOSEError.invalidSignature
        }
        let nonce = Array(box[..<Self.nonceCount])
        let ciphertext = Array(box[Self.nonceCount..<(box.count - Self.tagCount)])
        let tag = Array(box[(box.count - Self.tagCount)...])
        return try Self.open(key: bytes, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: Array(aad))
    }

    /// AES-256-GCM encryption with an explicit nonce. Internal so known-answer tests can
    /// use fixed nonces; production sealing always draws a random one.
    static func seal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8]) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard plaintext.count < Int(Int32.max) - 32, aad.count < Int(Int32.max) else {
            throw JOSEError.inputTooLarge(limit: Int(Int32.max) - 32)
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_EncryptInit_ex(context, FetchedAlgorithm.aes256GCM.algorithm, nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(context, siwa_ctrl_gcm_set_ivlen(), Int32(nonce.count), nil) == 1,
              EVP_EncryptInit_ex(context, nil, nil, key, nonce) == 1
        else { throw OpenSSL.failure("AES-GCM encrypt init") }

        var length: Int32 = 0
        if !aad.isEmpty {
            // A NULL output buffer tells OpenSSL these bytes are additional authenticated data.
            guard EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1 else {
                throw OpenSSL.failure("AES-GCM aad")
            }
        }
        // GCM is a stream mode: output is never longer than input (plus a spare block for safety).
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + 16)
        var written: Int32 = 0
        if !plaintext.isEmpty {
            guard EVP_EncryptUpdate(context, &ciphertext, &length, plaintext, Int32(plaintext.count)) == 1 else {
                throw OpenSSL.failure("AES-GCM encrypt")
            }
            written = length
        }
        let finalOK = ciphertext.withUnsafeMutableBufferPointer { buffer in
            // `written` <= plaintext.count, so the tail has at least 16 spare bytes.
            EVP_EncryptFinal_ex(context, buffer.baseAddress! + Int(written), &length)
        }
        guard finalOK == 1 else { throw OpenSSL.failure("AES-GCM encrypt final") }
        written += length
        var tag = [UInt8](repeating: 0, count: tagCount)
        // `tag` holds the 16 bytes requested.
        guard EVP_CIPHER_CTX_ctrl(context, siwa_ctrl_gcm_get_tag(), Int32(tagCount), &tag) == 1 else {
            throw OpenSSL.failure("AES-GCM get tag")
        }
        return (Array(ciphertext.prefix(Int(written))), tag)
    }

    /// AES-256-GCM decryption with an explicit nonce; see ``seal(key:nonce:plaintext:aad:)``.
    static func open(key: [UInt8], nonce: [UInt8], ciphertext: [UInt8], tag: [UInt8], aad: [UInt8]) throws -> [UInt8] {
        guard ciphertext.count < Int(Int32.max) - 32, aad.count < Int(Int32.max) else {
            throw JOSEError.inputTooLarge(limit: Int(Int32.max) - 32)
        }
        guard tag.count == tagCount else { throw JOSEError.invalidSignature }
        guard let context = EVP_CIPHER_CTX_new() else { throw OpenSSL.failure("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        guard EVP_DecryptInit_ex(context, FetchedAlgorithm.aes256GCM.algorithm, nil, nil, nil) == 1,
              EVP_CIPHER_CTX_ctrl(context, siwa_ctrl_gcm_set_ivlen(), Int32(nonce.count), nil) == 1,
              EVP_DecryptInit_ex(context, nil, nil, key, nonce) == 1
        else { throw OpenSSL.failure("AES-GCM decrypt init") }

        var length: Int32 = 0
        if !aad.isEmpty {
            guard EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1 else {
                throw OpenSSL.failure("AES-GCM aad")
            }
        }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var written: Int32 = 0
        if !ciphertext.isEmpty {
            guard EVP_DecryptUpdate(context, &plaintext, &length, ciphertext, Int32(ciphertext.count)) == 1 else {
                throw OpenSSL.failure("AES-GCM decrypt")
            }
            written = length
        }
        var expectedTag = tag
        // OpenSSL only reads the 16 tag bytes here (it copies them into the context).
        guard EVP_CIPHER_CTX_ctrl(context, siwa_ctrl_gcm_set_tag(), Int32(tagCount), &expectedTag) == 1 else {
            throw OpenSSL.failure("AES-GCM set tag")
        }
        let finalOK = plaintext.withUnsafeMutableBufferPointer { buffer in
            // `written` <= ciphertext.count, so the tail has at least 16 spare bytes.
            EVP_DecryptFinal_ex(context, buffer.baseAddress! + Int(written), &length)
        }
        guard finalOK == 1 else {
            // A failed final step in GCM decryption means the tag did not match.
            OpenSSL.clearErrors()
            throw JOSEError.invalidSignature
        }
        written += length
        return Array(plaintext.prefix(Int(written)))
    }
}
