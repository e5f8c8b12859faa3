import JOSE
import SIWAStore

/// Random bearer secrets (sessions, API tokens, browser bindings) and how they are kept at rest:
/// only their SHA-256 is stored, so a database leak does not hand out live sessions.
enum BearerSecret {
    /// 256 random bits, base64url.
    static func generate() -> String { SecureRandom.token(byteCount: 32) }

    /// The stored form of a secret.
    static func hash(_ secret: String) -> String { SHA256.hexDigest(secret.utf8) }

    /// Whether a presented cookie/bearer value looks like one of ours (43 base64url characters);
    /// anything else is rejected before touching the database.
    static func isWellFormed(_ value: String) -> Bool {
        value.utf8.count == 43 && value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x5F
        }
    }
}

/// Encrypts Apple refresh tokens (and the OpenID provider's private keys) at rest with AES-256-GCM
/// (TOKEN_ENCRYPTION_KEY). The place a secret is stored (its account and client id, its pending profile, its
/// outbox item, or its signing key's `kid`) is bound as associated data, so a ciphertext copied onto another
/// row does not open.
///
/// Sealed text is `v2:` + base64(nonce ‖ ciphertext ‖ tag). Before, it was the bare base64 under one constant
/// associated data for every row; such rows are re-sealed once at start-up (``SIWADependencies/resealLegacyTokens(logger:)``)
/// and otherwise refused: accepting the old form wherever a token is read would let any old ciphertext (a
/// leftover row, a backup) still be moved between accounts.
///
/// Key rotation: with TOKEN_ENCRYPTION_KEY_PREVIOUS set, what opens only with that key is still read, while
/// everything is sealed with the current key; `siwa admin reseal` (``SIWADependencies/resealStoredSecrets(now:)``)
/// moves the rest. The text does not say which key sealed it: the current key is tried first, then the
/// previous one (AES-GCM's tag tells a wrong key apart with certainty).
struct TokenCipher: Sendable {
    let key: AESGCMKey
    /// TOKEN_ENCRYPTION_KEY_PREVIOUS: only ever opens.
    let previousKey: AESGCMKey?

    init(key: AESGCMKey, previousKey: AESGCMKey? = nil) {
        self.key = key
        self.previousKey = previousKey
    }

    /// Marks the bound form; base64 never contains `:`, so an old ciphertext never starts with it.
    static let prefix = "v2:"
    /// The one associated data of every ciphertext written before binding.
    static let legacyContext = "siwa apple refresh token v1"

    enum Failure: Error, CustomStringConvertible {
        case legacyFormat
        var description: String { "the token was sealed by an older version and not re-sealed yet" }
    }

    /// Which key a stored ciphertext opens with, and what it holds.
    enum Opened {
        /// TOKEN_ENCRYPTION_KEY: nothing to do.
        case current(String)
        /// TOKEN_ENCRYPTION_KEY_PREVIOUS: to be sealed again with the current key.
        case previous(String)
    }

    func seal(_ token: String, for place: SealedTokenPlace) throws -> String {
        Self.prefix + Base64.encode(try key.seal(Array(token.utf8), authenticating: Self.associatedData(place)))
    }

    func open(_ sealed: String, from place: SealedTokenPlace) throws -> String {
        switch try openTelling(sealed, from: place) {
        case .current(let token), .previous(let token): return token
        }
    }

    /// Opens with the current key, else with the previous one, and says which did.
    func openTelling(_ sealed: String, from place: SealedTokenPlace) throws -> Opened {
        guard sealed.hasPrefix(Self.prefix) else { throw Failure.legacyFormat }
        let box = try Base64.decode(String(sealed.dropFirst(Self.prefix.count)))
        let associatedData = Self.associatedData(place)
        do {
            return .current(String(decoding: try key.open(box, authenticating: associatedData), as: UTF8.self))
        } catch {
            guard let previousKey else { throw error }
            return .previous(String(decoding: try previousKey.open(box, authenticating: associatedData), as: UTF8.self))
        }
    }

    /// Moves a token from one place to another (an account's token into the revocation outbox, a pending
    /// profile's into the new account).
    func reseal(_ sealed: String, from: SealedTokenPlace, to: SealedTokenPlace) throws -> String {
        try seal(try open(sealed, from: from), for: to)
    }

    /// Opens a ciphertext of the old, unbound form (with either key); only the start-up re-seal calls this.
    func openLegacy(_ sealed: String) throws -> String {
        switch try openLegacyTelling(sealed) {
        case .current(let token), .previous(let token): return token
        }
    }

    /// ``openLegacy(_:)``, saying which key opened it.
    func openLegacyTelling(_ sealed: String) throws -> Opened {
        let box = try Base64.decode(sealed)
        let associatedData = Array(Self.legacyContext.utf8)
        do {
            return .current(String(decoding: try key.open(box, authenticating: associatedData), as: UTF8.self))
        } catch {
            guard let previousKey else { throw error }
            return .previous(String(decoding: try previousKey.open(box, authenticating: associatedData), as: UTF8.self))
        }
    }

    /// `siwa apple refresh token v2`, the kind of place and its keys, NUL-separated (none of them contains NUL:
    /// they are our UUIDs, SHA-256 hex, configured client ids and JWK thumbprints).
    static func associatedData(_ place: SealedTokenPlace) -> [UInt8] {
        let parts: [String]
        switch place {
        case .account(let userID, let clientID): parts = ["account", userID, clientID]
        case .pendingProfile(let tokenHash): parts = ["pending-profile", tokenHash]
        case .revocation(let id): parts = ["revocation", id]
        case .oidcSigningKey(let kid): parts = ["oidc-signing-key", kid]
        }
        return Array((["siwa apple refresh token v2"] + parts).joined(separator: "\u{0}").utf8)
    }
}

/// CSRF tokens for state-changing forms: an HMAC of the session (or pending profile) hash under a
/// key derived from TOKEN_ENCRYPTION_KEY. Nothing to store, and a token is useless for another session.
///
/// Made with the current key; one made with TOKEN_ENCRYPTION_KEY_PREVIOUS is still accepted, so that a
/// form a page showed before the key changed (an account page left open across the restart) still works.
struct CSRFTokens: Sendable, CustomStringConvertible {
    /// Never the key, whatever prints the value.
    var description: String { "CSRFTokens(key redacted)" }

    private let key: HMACSHA256.Key
    private let previousKey: HMACSHA256.Key?

    init(secret: AESGCMKey, previous: AESGCMKey? = nil) {
        self.key = Self.derive(secret)
        self.previousKey = previous.map(Self.derive)
    }

    private static func derive(_ secret: AESGCMKey) -> HMACSHA256.Key {
        HMACSHA256.Key(HMACSHA256.authenticationCode(key: secret.bytes, data: Array("siwa csrf v1".utf8)))
    }

    func token(for sessionHash: String) -> String {
        Base64URL.encode(key.authenticationCode(Array(sessionHash.utf8)))
    }

    func isValid(_ presented: String?, for sessionHash: String) -> Bool {
        guard let presented, let bytes = try? Base64URL.decode(presented) else { return false }
        let data = Array(sessionHash.utf8)
        return key.isValid(bytes, data: data) || (previousKey?.isValid(bytes, data: data) ?? false)
    }
}
