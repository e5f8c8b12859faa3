import Foundation
import JOSE
import SIWAStore

/// The RSA key at `OIDC_SIGNING_KEY_PATH` and, when present, the one at `PATH.previous` (published only), as
/// configured (SPEC §11).
///
/// The keys that sign are the database's (``OIDCKeyRing``): this key is stored there at the first start, and
/// `siwa admin oidc rotate-key` adds new ones for every instance without a restart. Replacing the file (and
/// restarting) still rotates: a key the database does not know is stored at start-up and signs from then on.
public struct OIDCSigningKeys: Sendable {
    public struct Key: Sendable {
        public let kid: String
        public let publicKey: RSAPublicKey
    }

    /// Signs every new ID token.
    public let current: Key
    let currentPrivateKey: RSAPrivateKey
    /// Only published: tokens it signed stay verifiable until they expire.
    public let previous: Key?

    public init(current: RSAPrivateKey, previous: RSAPublicKey?) {
        self.currentPrivateKey = current
        self.current = Key(kid: Self.thumbprint(current.publicKey), publicKey: current.publicKey)
        self.previous = previous.map { Key(kid: Self.thumbprint($0), publicKey: $0) }
    }

    /// The JWKS document: the current key first.
    public var jwks: JWKSet {
        JWKSet(keys: [current.publicKey.jwk(kid: current.kid)] + (previous.map { [$0.publicKey.jwk(kid: $0.kid)] } ?? []))
    }

    /// The RFC 7638 JWK thumbprint (SHA-256, base64url): the same key always has the same `kid`, across
    /// restarts and instances, with nothing to configure.
    static func thumbprint(_ key: RSAPublicKey) -> String {
        let canonical = "{\"e\":\"\(Base64URL.encode(key.exponent))\",\"kty\":\"RSA\",\"n\":\"\(Base64URL.encode(key.modulus))\"}"
        return Base64URL.encode(SHA256.hash(Array(canonical.utf8)))
    }

    /// The file beside the key holding the key it replaced.
    public static func previousPath(for path: String) -> String { path + ".previous" }

    /// Reads `path` (RSA private key, PKCS#8 or PKCS#1 PEM) and, when present, `path.previous`. With
    /// `generate`, a missing key is created (demo mode). Errors name `setting`.
    public static func load(path: String, generate: Bool, setting: String = "OIDC_SIGNING_KEY_PATH") throws -> OIDCSigningKeys {
        let current: RSAPrivateKey
        if let pem = try? String(contentsOfFile: path, encoding: .utf8) {
            current = try parse(pem, path: path, setting: setting)
        } else if generate {
            current = try RSAPrivateKey.generate()
            try writeSecret(try current.pkcs8PEM(), to: path, setting: setting)
        } else {
            throw ConfigurationError(setting, "cannot be read: \(path) (create one with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out \(path)`)")
        }
        var previous: RSAPublicKey?
        let previousPath = previousPath(for: path)
        if let pem = try? String(contentsOfFile: previousPath, encoding: .utf8) {
            previous = try parse(pem, path: previousPath, setting: setting).publicKey
        }
        return OIDCSigningKeys(current: current, previous: previous)
    }

    private static func parse(_ pem: String, path: String, setting: String) throws -> RSAPrivateKey {
        do {
            return try RSAPrivateKey(pem: pem)
        } catch {
            throw ConfigurationError(setting, "is not an RSA private key (PEM, 2048 bits or more) at \(path): \(error)")
        }
    }

    private static func writeSecret(_ contents: String, to path: String, setting: String) throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        do {
            try PrivateFile.createDirectory(atPath: directory)
            try PrivateFile.write(Data(contents.utf8), toPath: path, replacing: false)
        } catch {
            throw ConfigurationError(setting, "cannot be written at \(path): \(error.localizedDescription)")
        }
    }
}
