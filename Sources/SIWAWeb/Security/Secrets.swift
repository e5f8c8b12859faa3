import JOSE

/// Random bearer secrets (sessions, API tokens, browser bindings) and how they are kept at rest:
/// only their SHA-256 is stored, so a database leak does not hand out live sessions.
enum BearerSecret {
    /// 256 random bits, base64url.
    static func generate() -> String { SecureRandom.token(byteCount: 32) }

    /// The stored form of a secret.
    static func hash(_ secret: String) -> String { SHA256.hexDigest(Array(secret.utf8)) }

    /// Whether a presented cookie/bearer value looks like one of ours (43 base64url characters);
    /// anything else is rejected before touching the database.
    static func isWellFormed(_ value: String) -> Bool {
        value.utf8.count == 43 && value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x5F
        }
    }
}

/// Encrypts Apple refresh tokens at rest with AES-256-GCM (TOKEN_ENCRYPTION_KEY). The user id is
/// bound as associated data, so a ciphertext copied onto another account's row does not open.
struct TokenCipher: Sendable {
    let key: AESGCMKey

    func seal(_ token: String, context: String) throws -> String {
        Base64.encode(try key.seal(Array(token.utf8), authenticating: Array(context.utf8)))
    }

    func open(_ sealed: String, context: String) throws -> String {
        let bytes = try key.open(try Base64.decode(sealed), authenticating: Array(context.utf8))
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// CSRF tokens for state-changing forms: an HMAC of the session (or pending profile) hash under a
/// key derived from TOKEN_ENCRYPTION_KEY. Nothing to store, and a token is useless for another session.
struct CSRFTokens: Sendable {
    private let key: [UInt8]

    init(secret: AESGCMKey) {
        self.key = HMACSHA256.authenticationCode(key: secret.bytes, data: Array("siwa csrf v1".utf8))
    }

    func token(for sessionHash: String) -> String {
        Base64URL.encode(HMACSHA256.authenticationCode(key: key, data: Array(sessionHash.utf8)))
    }

    func isValid(_ presented: String?, for sessionHash: String) -> Bool {
        guard let presented, let bytes = try? Base64URL.decode(presented) else { return false }
        return HMACSHA256.isValid(bytes, key: key, data: Array(sessionHash.utf8))
    }
}
