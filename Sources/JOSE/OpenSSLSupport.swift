internal import COpenSSL

/// Small helpers shared by the key, digest and cipher types. This file and its siblings are
/// the only Swift code in the package that handles OpenSSL pointers.
enum OpenSSL {
    /// Drains this thread's OpenSSL error queue into one line.
    ///
    /// Every call into OpenSSL here is synchronous on one thread, so the queue read right
    /// after a failure belongs to that failure.
    static func drainErrors() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            // ERR_error_string_n always NUL-terminates within the given length.
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "no OpenSSL error reported" : messages.joined(separator: "; ")
    }

    /// A ``JOSEError/cryptoFailure(_:)`` for the failed step, with OpenSSL's error text.
    static func failure(_ step: String) -> JOSEError {
        .cryptoFailure("\(step): \(drainErrors())")
    }

    /// Forgets errors from an expected failure (e.g. a bad signature), so they are not
    /// blamed on a later, unrelated call on this thread.
    static func clearErrors() {
        ERR_clear_error()
    }

    /// Calls `body` with a pointer to the bytes, never nil even when empty: some OpenSSL
    /// entry points treat a NULL buffer as "no argument" rather than "zero bytes". The bytes are read in
    /// place when the collection is contiguous (an array, a slice of one, a native string's UTF-8), else
    /// copied once.
    static func withBytes<R>(_ bytes: some Collection<UInt8>, _ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
        if let result = try bytes.withContiguousStorageIfAvailable({ try withBytes(in: $0, body) }) { return result }
        return try Array(bytes).withUnsafeBufferPointer { try withBytes(in: $0, body) }
    }

    private static func withBytes<R>(in buffer: UnsafeBufferPointer<UInt8>, _ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
        guard let base = buffer.baseAddress, !buffer.isEmpty else {
            var placeholder: UInt8 = 0
            // The pointer is valid for the duration of the closure; length 0 means it is never read.
            return try withUnsafePointer(to: &placeholder) { try body($0, 0) }
        }
        return try body(base, buffer.count)
    }

    /// Runs `body` with a read-only memory BIO over the UTF-8 bytes of `text`.
    static func withReadBIO<R>(_ text: String, _ body: (OpaquePointer) throws -> R) throws -> R {
        let bytes = Array(text.utf8)
        guard bytes.count < Int(Int32.max) else { throw JOSEError.inputTooLarge(limit: Int(Int32.max)) }
        return try withBytes(bytes) { pointer, count in
            // BIO_new_mem_buf does not copy: the BIO must not outlive `pointer`, which the
            // free below guarantees.
            guard let bio = BIO_new_mem_buf(pointer, Int32(count)) else { throw failure("BIO_new_mem_buf") }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }

    /// Runs `write` against a fresh memory BIO and returns what it wrote, as text (PEM).
    static func writeToString(_ step: String, _ write: (OpaquePointer) -> Int32) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw failure("BIO_new") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw failure(step) }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = siwa_bio_get_mem_data(bio, &data)
        guard length > 0, let data else { throw failure(step) }
        // The memory BIO owns `data` and keeps it valid until BIO_free; copy it out first.
        let bytes = UnsafeRawBufferPointer(start: data, count: length)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Reads a BIGNUM parameter of a key (e.g. "n", "e", "qx") as big-endian bytes,
    /// left-padded to `width` when given (leading zeros are part of fixed-width encodings).
    static func bigNumberParameter(_ key: OpaquePointer, _ name: String, width: Int? = nil) throws -> [UInt8] {
        var number: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(key, name, &number) == 1, let number else {
            throw failure("reading key parameter \(name)")
        }
        defer { BN_free(number) }
        let natural = (Int(BN_num_bits(number)) + 7) / 8
        let count = max(width ?? natural, natural)
        var bytes = [UInt8](repeating: 0, count: count)
        // BN_bn2binpad writes exactly `count` bytes, which the array holds.
        guard BN_bn2binpad(number, &bytes, Int32(count)) == Int32(count) else {
            throw failure("encoding key parameter \(name)")
        }
        return bytes
    }

    /// The OpenSSL key type of `key`, for error messages ("EC", "RSA", "ED25519", …).
    static func keyTypeName(_ key: OpaquePointer) -> String {
        guard let name = EVP_PKEY_get0_type_name(key) else { return "unknown" }
        return String(cString: name)
    }

    /// The curve of an EC key ("prime256v1", "secp384r1", …), or nil for other key types.
    static func groupName(_ key: OpaquePointer) -> String? {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &buffer, buffer.count, &length) == 1 else {
            clearErrors()
            return nil
        }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// An EC public key on `group` (e.g. "prime256v1") from a SEC1 point encoding.
    /// Returns an owned EVP_PKEY the caller must free.
    static func ecPublicKey(group: String, point: [UInt8]) throws -> OpaquePointer {
        guard let builder = OSSL_PARAM_BLD_new() else { throw failure("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        let groupName = Array(group.utf8CString)
        return try groupName.withUnsafeBufferPointer { name in
            try withBytes(point) { pointer, count in
                // The builder stores references to `name` and `pointer`; both stay valid
                // until keyFromParameters returns, and it copies them (OSSL_PARAM_BLD_to_param).
                guard OSSL_PARAM_BLD_push_utf8_string(builder, siwa_name_group(), name.baseAddress, 0) == 1,
                      OSSL_PARAM_BLD_push_octet_string(builder, siwa_name_public_key(), pointer, count) == 1
                else { throw failure("building EC key parameters") }
                return try keyFromParameters(type: siwa_name_key_type_ec(), builder: builder)
            }
        }
    }

    /// An RSA public key from big-endian modulus and exponent bytes.
    /// Returns an owned EVP_PKEY the caller must free.
    static func rsaPublicKey(modulus: [UInt8], exponent: [UInt8]) throws -> OpaquePointer {
        guard let builder = OSSL_PARAM_BLD_new() else { throw failure("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard let n = BN_bin2bn(modulus, Int32(modulus.count), nil) else { throw failure("BN_bin2bn") }
        defer { BN_free(n) }
        guard let e = BN_bin2bn(exponent, Int32(exponent.count), nil) else { throw failure("BN_bin2bn") }
        defer { BN_free(e) }
        // push_BN keeps references to n and e, copied by keyFromParameters before they are freed.
        guard OSSL_PARAM_BLD_push_BN(builder, siwa_name_rsa_n(), n) == 1,
              OSSL_PARAM_BLD_push_BN(builder, siwa_name_rsa_e(), e) == 1
        else { throw failure("building RSA key parameters") }
        return try keyFromParameters(type: siwa_name_key_type_rsa(), builder: builder)
    }

    /// Turns the parameters pushed on `builder` into a public key of `type`.
    /// `type` must have static storage (see the shim's siwa_name_* functions).
    private static func keyFromParameters(type: UnsafePointer<CChar>, builder: OpaquePointer) throws -> OpaquePointer {
        guard let parameters = OSSL_PARAM_BLD_to_param(builder) else { throw failure("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(parameters) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { throw failure("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else { throw failure("EVP_PKEY_fromdata_init") }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_fromdata(context, &key, siwa_selection_public_key(), parameters) == 1, let key else {
            throw JOSEError.invalidKey("OpenSSL rejected the \(String(cString: type)) public key: \(drainErrors())")
        }
        return key
    }

    /// Checks a public key's components (for EC: the point is on the curve and not infinity).
    static func checkPublicKey(_ key: OpaquePointer) -> Bool {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context) }
        let valid = EVP_PKEY_public_check(context) == 1
        if !valid { clearErrors() }
        return valid
    }

    /// Signs `message` with SHA-256 and `key`; returns OpenSSL's signature encoding
    /// (DER for ECDSA, raw for RSA PKCS#1 v1.5).
    static func digestSign(_ key: OpaquePointer, _ message: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw failure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            throw failure("EVP_DigestSignInit")
        }
        return try withBytes(message) { pointer, count in
            var length = 0
            guard EVP_DigestSign(context, nil, &length, pointer, count) == 1 else { throw failure("EVP_DigestSign") }
            var signature = [UInt8](repeating: 0, count: length)
            // `length` is the maximum size OpenSSL reported; it writes at most that many bytes.
            guard EVP_DigestSign(context, &signature, &length, pointer, count) == 1 else {
                throw failure("EVP_DigestSign")
            }
            return Array(signature.prefix(length))
        }
    }

    /// Verifies a SHA-256 signature in OpenSSL's encoding; any failure is simply `false`.
    static func digestVerify(_ key: OpaquePointer, signature: [UInt8], message: [UInt8]) -> Bool {
        defer { clearErrors() }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return withBytes(signature) { signaturePointer, signatureCount in
            withBytes(message) { messagePointer, messageCount in
                // Only 1 means valid; 0 is a bad signature and negative values are errors.
                EVP_DigestVerify(context, signaturePointer, signatureCount, messagePointer, messageCount) == 1
            }
        }
    }

    /// A digest-verify context for SHA-256 and `key`, initialized once to be copied by
    /// ``digestVerify(template:signature:message:)``; nil if OpenSSL refuses. The caller owns it
    /// (EVP_MD_CTX_free) and must not use it other than as a copy source after this returns.
    static func verifyTemplate(_ key: OpaquePointer) -> OpaquePointer? {
        defer { clearErrors() }
        guard let context = EVP_MD_CTX_new() else { return nil }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            EVP_MD_CTX_free(context)
            return nil
        }
        return context
    }

    /// As ``digestVerify(_:signature:message:)``, but starting from a copy of a context made by
    /// ``verifyTemplate(_:)`` for the same key.
    ///
    /// EVP_DigestVerifyInit fetches the signature, key-management and digest implementations by
    /// name on every call, under OpenSSL's global locks: about 4 µs, as much as a fifth of an RS256
    /// check (perf, scripts/bench). Copying an initialized context (EVP_MD_CTX_copy_ex, which dups
    /// the provider's RSA context: reference counts and a memcpy of the SHA-256 state) skips all
    /// of that. The copy only reads the template, so threads may copy it concurrently, as
    /// EVP_DigestVerifyFinal itself does with a caller's context. Each copy is used once, so
    /// EVP_MD_CTX_FLAG_FINALISE lets the final step skip its own defensive copy.
    static func digestVerify(template: OpaquePointer, signature: [UInt8], message: [UInt8]) -> Bool {
        defer { clearErrors() }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_MD_CTX_copy_ex(context, template) == 1 else { return false }
        EVP_MD_CTX_set_flags(context, EVP_MD_CTX_FLAG_FINALISE)
        return withBytes(signature) { signaturePointer, signatureCount in
            withBytes(message) { messagePointer, messageCount in
                // Only 1 means valid; 0 is a bad signature and negative values are errors.
                EVP_DigestVerify(context, signaturePointer, signatureCount, messagePointer, messageCount) == 1
            }
        }
    }

    /// Reads the first private key in a PEM text; encrypted PEMs fail rather than prompt.
    static func readPrivateKey(pem: String) throws -> OpaquePointer {
        try withReadBIO(pem) { bio in
            guard let key = siwa_pem_read_private_key(bio) else {
                throw JOSEError.invalidKey("no readable private key in PEM: \(drainErrors())")
            }
            return key
        }
    }

    /// Writes a private key as PKCS#8 PEM ("BEGIN PRIVATE KEY"), unencrypted.
    static func pkcs8PEM(_ key: OpaquePointer) throws -> String {
        try writeToString("PEM_write_bio_PKCS8PrivateKey") { bio in
            PEM_write_bio_PKCS8PrivateKey(bio, key, nil, nil, 0, nil, nil)
        }
    }
}
