import JOSE

/// The RSA keys the emulator signs identity tokens and notifications with, newest first.
struct SigningKeyRing: Sendable {
    struct SigningKey: Sendable {
        let kid: String
        let key: RSAPrivateKey
    }

    private(set) var keys: [SigningKey] = []

    init(count: Int) throws {
        for _ in 0..<max(1, count) { keys.insert(SigningKey(kid: Self.makeKeyID(), key: try RSAPrivateKey.generate()), at: 0) }
    }

    /// The key tokens are signed with now.
    var current: SigningKey { keys[0] }

    /// What `/auth/keys` publishes, newest first.
    var jwks: JWKSet { JWKSet(keys: keys.map { $0.key.publicKey.jwk(kid: $0.kid) }) }

    /// Signs with a new key from now on and keeps listing the older ones, up to `maximumPublished` in all.
    mutating func rotate(maximumPublished: Int) throws -> String {
        let key = SigningKey(kid: Self.makeKeyID(), key: try RSAPrivateKey.generate())
        keys.insert(key, at: 0)
        let limit = max(2, maximumPublished)
        if keys.count > limit { keys.removeLast(keys.count - limit) }
        return key.kid
    }

    private static func makeKeyID() -> String {
        let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return SecureRandom.bytes(count: 8).map { String(letters[Int($0) % letters.count]) }.joined()
    }
}
