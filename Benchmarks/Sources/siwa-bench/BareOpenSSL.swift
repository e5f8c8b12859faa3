import CBareOpenSSL

/// A key for the C ceiling loops, freed in `deinit`. Immutable after `init`, and OpenSSL 3 allows
/// concurrent use of a const EVP_PKEY, hence `@unchecked Sendable`.
final class BareKey: @unchecked Sendable {
    private let key: OpaquePointer

    /// - Parameter isPrivate: a private key PEM (PKCS#8), else a public one (SubjectPublicKeyInfo).
    init(pem: String, isPrivate: Bool) throws {
        guard let key = bare_key_from_pem(pem, isPrivate ? 1 : 0) else { throw BenchError("OpenSSL did not read the PEM key") }
        self.key = key
    }

    deinit { bare_key_free(key) }

    /// How many of `iterations` RS256 checks of `signature` over `message` succeeded.
    func verifyRS256(signature: [UInt8], message: [UInt8], iterations: Int) -> Int {
        bare_rs256_verify_times(key, signature, signature.count, message, message.count, iterations)
    }

    /// Signs `message` with SHA-256 `iterations` times; returns the count and the last (DER) signature.
    func signSHA256(message: [UInt8], iterations: Int) -> (count: Int, signature: [UInt8]) {
        var output = [UInt8](repeating: 0, count: 1024)
        var length = 0
        let count = bare_sha256_sign_times(key, message, message.count, iterations, &output, output.count, &length)
        return (count, Array(output.prefix(length)))
    }

    static var openSSLVersion: String { String(cString: bare_openssl_version()) }
}

/// A benchmark set-up or sanity check that failed: the run stops rather than print a misleading number.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
