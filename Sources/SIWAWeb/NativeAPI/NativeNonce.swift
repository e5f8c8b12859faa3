import JOSE
import SIWAStore

/// A nonce the server issues to the iOS app (SPEC §7). It is kept as a pending authorization — the
/// same ten-minute life, single use, sweeper and sign-in cap — under a state that no web sign-in
/// can have, keyed by the SHA-256 hex the identity token carries. Only the hash is stored.
struct NativeNonce {
    static let statePrefix = "native."
    /// In place of a browser binding: marks the row as a native nonce.
    static let bindingMarker = "native"
    static let lifetime: Int64 = 600

    /// What the app receives (256 random bits, base64url).
    let raw: String

    static func generate() -> NativeNonce { NativeNonce(raw: SecureRandom.token(byteCount: 32)) }

    /// What Apple puts in the identity token's `nonce` claim: the lowercase hex SHA-256 of `raw`.
    var hashHex: String { SHA256.hexDigest(Array(raw.utf8)) }

    var state: String { Self.statePrefix + hashHex }

    func pendingAuthorization(now: Int64) -> PendingAuthorization {
        PendingAuthorization(state: state, nonce: hashHex, bindingHash: Self.bindingMarker,
                             createdAt: now, expiresAt: now + Self.lifetime, consumedAt: nil)
    }

    /// Ours are 43 base64url characters; anything longer is refused before touching the database.
    static func isWellFormed(_ value: String) -> Bool { !value.isEmpty && value.utf8.count <= 128 }
}
