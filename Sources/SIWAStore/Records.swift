import Foundation

// The rows the store reads and writes, as plain values. Times are Unix seconds; ciphertexts are base64 text
// produced and read by the caller (the store never sees a plaintext token).

/// A person's account, found by Apple's `sub` only (never by email).
public struct UserAccount: Sendable, Equatable {
    public var id: String
    public var appleSub: String
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    /// Set by Apple's `email-disabled` notification: the relay address no longer forwards.
    public var emailDisabled: Bool
    public var givenName: String?
    public var familyName: String?
    public var createdAt: Int64
    public var updatedAt: Int64
    public var lastSignInAt: Int64
    public var consentCheckedAt: Int64?

    public init(
        id: String, appleSub: String, email: String?, emailVerified: Bool, isPrivateEmail: Bool,
        emailDisabled: Bool, givenName: String?, familyName: String?,
        createdAt: Int64, updatedAt: Int64, lastSignInAt: Int64, consentCheckedAt: Int64?
    ) {
        self.id = id
        self.appleSub = appleSub
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.emailDisabled = emailDisabled
        self.givenName = givenName
        self.familyName = familyName
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastSignInAt = lastSignInAt
        self.consentCheckedAt = consentCheckedAt
    }

    /// "Given Family", trimmed; nil when both parts are empty.
    public var displayName: String? {
        switch (Self.trimmed(givenName), Self.trimmed(familyName)) {
        case (nil, nil): return nil
        case (let given?, nil): return given
        case (nil, let family?): return family
        case (let given?, let family?): return given + " " + family
        }
    }

    /// `value` without leading and trailing white space and newlines, exactly as Foundation's
    /// `trimmingCharacters(in: .whitespacesAndNewlines)` trims (a test compares them) without its cost on
    /// every sign-in; nil when nothing is left.
    public static func trimmed(_ value: String?) -> String? {
        guard let scalars = value?.unicodeScalars,
              let first = scalars.firstIndex(where: { !whitespace.contains($0.value) }),
              let last = scalars.lastIndex(where: { !whitespace.contains($0.value) })
        else { return nil }
        if first == scalars.startIndex && last == scalars.index(before: scalars.endIndex) { return value }
        return String(scalars[first...last])
    }

    /// Foundation's `.whitespacesAndNewlines`, read once (it holds only Basic Multilingual Plane scalars).
    private static let whitespace: Set<UInt32> = Set((0...0xFFFF).filter { value in
        Unicode.Scalar(value).map { CharacterSet.whitespacesAndNewlines.contains($0) } ?? false
    })

    /// True when the account has neither a given nor a family name.
    public var hasNoName: Bool { displayName == nil }

    /// Whether the name and email fields a sign-in may update are those of `other`.
    func hasSameProfile(as other: UserAccount) -> Bool {
        email == other.email && emailVerified == other.emailVerified && isPrivateEmail == other.isPrivateEmail
            && givenName == other.givenName && familyName == other.familyName
    }
}

/// The fallback table's row: Apple's one-time `user` JSON, kept so a name is never lost.
public struct AppleUserInfo: Sendable, Equatable {
    public var appleSub: String
    public var givenName: String?
    public var familyName: String?
    public var email: String?
    public var rawJSON: String
    /// `web` (form_post `user`) or `native` (the iOS app's `fullName`).
    public var source: String
    public var receivedAt: Int64

    public init(
        appleSub: String, givenName: String?, familyName: String?, email: String?,
        rawJSON: String, source: String, receivedAt: Int64
    ) {
        self.appleSub = appleSub
        self.givenName = givenName
        self.familyName = familyName
        self.email = email
        self.rawJSON = rawJSON
        self.source = source
        self.receivedAt = receivedAt
    }
}

/// A sign-in started at `/auth/apple`, waiting for Apple's callback.
public struct PendingAuthorization: Sendable, Equatable {
    public var state: String
    public var nonce: String
    /// Hash of the browser-binding cookie value.
    public var bindingHash: String
    public var createdAt: Int64
    public var expiresAt: Int64
    public var consumedAt: Int64?
    /// Where the callback sends the person (the gateway's `rd`); nil: the account page.
    public var returnTo: String?

    public init(state: String, nonce: String, bindingHash: String, createdAt: Int64, expiresAt: Int64, consumedAt: Int64? = nil,
                returnTo: String? = nil) {
        self.state = state
        self.nonce = nonce
        self.bindingHash = bindingHash
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.consumedAt = consumedAt
        self.returnTo = returnTo
    }
}

/// How a session is carried; stored as its raw value in `sessions.kind`.
public enum SessionKind: String, Sendable, Equatable {
    /// A browser's cookie.
    case web
    /// An app's bearer token.
    case api
}

/// A session; only the hash of its token is stored.
public struct SessionRecord: Sendable, Equatable {
    public var tokenHash: String
    public var userID: String
    public var kind: SessionKind
    public var createdAt: Int64
    /// The absolute end (SPEC §13): it never moves.
    public var expiresAt: Int64
    /// Last use, moved by a touch (at most once per ``SessionTouch/interval``).
    public var lastSeenAt: Int64
    /// The idle deadline, moved forward by each touch; nil when there is none (idle timeout 0, app tokens,
    /// and sessions from before the setting until their first touch).
    public var idleExpiresAt: Int64?
    /// The sign-in's `User-Agent`, shortened to ``SessionRecord/userAgentLimit`` characters; nil when none was sent.
    public var userAgent: String?
    /// The app session (refresh token family) an access token belongs to; nil for web sessions and for app
    /// bearers issued before refresh tokens (they live their 90 days alone).
    public var familyID: String?
    /// Not a column: true when the read that returned this record moved its idle deadline (the caller then
    /// re-sends the cookie with its new expiry).
    public var wasTouched = false

    public static let userAgentLimit = 512

    public init(tokenHash: String, userID: String, kind: SessionKind, createdAt: Int64, expiresAt: Int64, lastSeenAt: Int64,
                idleExpiresAt: Int64? = nil, userAgent: String? = nil, familyID: String? = nil) {
        self.tokenHash = tokenHash
        self.userID = userID
        self.kind = kind
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.lastSeenAt = lastSeenAt
        self.idleExpiresAt = idleExpiresAt
        self.userAgent = userAgent.map { String($0.prefix(Self.userAgentLimit)) }
        self.familyID = familyID
    }

    /// When the session stops being valid: the earlier of its absolute end and its idle deadline.
    public var validUntil: Int64 { min(expiresAt, idleExpiresAt ?? .max) }
}

/// How a used session moves forward (SPEC §13): its idle deadline `idleTimeout` seconds after the touch
/// (never past the absolute end), at most once per ``interval``: an hour, or a tenth of the idle timeout
/// when that is shorter. `idleTimeout` 0: no idle deadline; last use is still recorded hourly.
public struct SessionTouch: Sendable, Equatable {
    public let idleTimeout: Int64
    public let interval: Int64

    public init(idleTimeout: Int64) {
        self.idleTimeout = max(0, idleTimeout)
        self.interval = idleTimeout > 0 ? max(1, min(3_600, idleTimeout / 10)) : 3_600
    }

    /// Whether a use of `session` at `now` moves it.
    public func isDue(_ session: SessionRecord, now: Int64) -> Bool { now - session.lastSeenAt >= interval }

    /// The idle deadline of a session used at `now` that ends at `expiresAt`.
    public func idleDeadline(now: Int64, expiresAt: Int64) -> Int64? {
        idleTimeout > 0 ? min(now + idleTimeout, expiresAt) : nil
    }
}

/// Where a sealed secret is stored: an Apple refresh token, or the private half of an OpenID signing key.
/// The caller binds this place into the ciphertext (as AES-GCM associated data), so a ciphertext copied into
/// another place does not open.
public enum SealedTokenPlace: Sendable, Hashable {
    /// An `apple_tokens` row: one per person and client id.
    case account(userID: String, clientID: String)
    /// A `pending_profiles` row (a verified sign-in waiting for a name; no account exists yet).
    case pendingProfile(tokenHash: String)
    /// A `revocation_outbox` item (the account is gone).
    case revocation(id: String)
    /// An `oidc_signing_keys` row: the provider's RSA private key (PKCS#8 PEM).
    case oidcSigningKey(kid: String)
}

/// The tables holding sealed secrets (TOKEN_ENCRYPTION_KEY), which `siwa admin reseal` walks.
public enum SealedTokenTable: String, Sendable, CaseIterable {
    case appleTokens = "apple_tokens"
    case pendingProfiles = "pending_profiles"
    case revocationOutbox = "revocation_outbox"
    case oidcSigningKeys = "oidc_signing_keys"
}

/// A stored ciphertext and where it is stored (the start-up re-seal reads and rewrites these).
public struct SealedToken: Sendable, Equatable {
    public var place: SealedTokenPlace
    /// Ciphertext, as the caller wrote it.
    public var ciphertext: String

    public init(place: SealedTokenPlace, ciphertext: String) {
        self.place = place
        self.ciphertext = ciphertext
    }
}

/// Apple's refresh token for an account and one client id (encrypted by the caller).
public struct AppleTokenRecord: Sendable, Equatable {
    public var userID: String
    /// The `client_id` the token was issued to (Services ID or bundle id): revoke and refresh must use it.
    public var clientID: String
    /// Ciphertext, base64.
    public var refreshToken: String
    public var createdAt: Int64
    public var updatedAt: Int64
    public var validatedAt: Int64?

    public init(userID: String, clientID: String, refreshToken: String, createdAt: Int64, updatedAt: Int64, validatedAt: Int64?) {
        self.userID = userID
        self.clientID = clientID
        self.refreshToken = refreshToken
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.validatedAt = validatedAt
    }
}

/// A token waiting to be revoked at Apple (the revocation outbox).
public struct RevocationItem: Sendable, Equatable {
    public var id: String
    public var clientID: String
    /// Ciphertext, base64.
    public var token: String
    public var tokenTypeHint: String
    public var createdAt: Int64
    public var attempts: Int
    public var nextAttemptAt: Int64
    public var lastError: String?
    public var completedAt: Int64?
    /// Apple's `sub` of the person whose token this is (`siwa admin people export` lists the item under
    /// it); nil when not known (items written before it was kept) and once the revocation is done. An
    /// account's deletion fills it in itself.
    public var appleSub: String?

    public init(
        id: String, clientID: String, token: String, tokenTypeHint: String, createdAt: Int64,
        attempts: Int = 0, nextAttemptAt: Int64, lastError: String? = nil, completedAt: Int64? = nil, appleSub: String? = nil
    ) {
        self.id = id
        self.clientID = clientID
        self.token = token
        self.tokenTypeHint = tokenTypeHint
        self.createdAt = createdAt
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.completedAt = completedAt
        self.appleSub = appleSub
    }
}

/// Everything the callback writes after a successful code exchange.
public struct NewSignIn: Sendable {
    public var appleSub: String
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    /// Used only when creating the account, or filling an account that has no name.
    public var givenName: String?
    public var familyName: String?
    /// Team transfer: an existing account with this sub is migrated to `appleSub`.
    public var transferFromSub: String?
    public var clientID: String
    /// Seals Apple's refresh token for the account it is stored under, given that account's id; nil leaves any
    /// stored token alone. The store calls it inside the sign-in transaction, once the id is known (a new
    /// account's, a concurrent first sign-in's, a transferred one's), so the caller can bind the id into the
    /// ciphertext while the store itself never sees a plaintext token or a key. Throwing rolls the sign-in back.
    public var sealRefreshToken: (@Sendable (_ userID: String) throws -> String)?
    public var sessionTokenHash: String
    public var sessionKind: SessionKind
    public var sessionExpiresAt: Int64
    /// The session the signing-in browser still carries, ended in the same transaction that starts the
    /// new one (a sign-in always starts a fresh session); nil when there is none.
    public var endingSessionHash: String?
    /// The new session's idle deadline (web), nil for none.
    public var sessionIdleExpiresAt: Int64?
    /// The signing-in browser's or app's `User-Agent`.
    public var sessionUserAgent: String?
    /// An app sign-in's first refresh token, which starts its family; nil for web sessions.
    public var appRefresh: AppRefreshGrant?
    public var now: Int64

    public init(
        appleSub: String, email: String?, emailVerified: Bool, isPrivateEmail: Bool,
        givenName: String? = nil, familyName: String? = nil, transferFromSub: String? = nil,
        clientID: String, sealRefreshToken: (@Sendable (_ userID: String) throws -> String)?,
        sessionTokenHash: String, sessionKind: SessionKind, sessionExpiresAt: Int64, endingSessionHash: String? = nil,
        sessionIdleExpiresAt: Int64? = nil, sessionUserAgent: String? = nil, appRefresh: AppRefreshGrant? = nil, now: Int64
    ) {
        self.appleSub = appleSub
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.givenName = givenName
        self.familyName = familyName
        self.transferFromSub = transferFromSub
        self.clientID = clientID
        self.sealRefreshToken = sealRefreshToken
        self.sessionTokenHash = sessionTokenHash
        self.sessionKind = sessionKind
        self.sessionExpiresAt = sessionExpiresAt
        self.endingSessionHash = endingSessionHash
        self.sessionIdleExpiresAt = sessionIdleExpiresAt
        self.sessionUserAgent = sessionUserAgent
        self.appRefresh = appRefresh
        self.now = now
    }
}

/// A verified sign-in parked while the person types a name (`PROFILE_FALLBACK=ask`).
public struct PendingProfile: Sendable, Equatable {
    /// Hash of the token carried by the profile form.
    public var tokenHash: String
    public var appleSub: String
    public var email: String?
    public var emailVerified: Bool
    public var isPrivateEmail: Bool
    public var clientID: String
    /// Ciphertext, base64.
    public var refreshToken: String?
    public var createdAt: Int64
    public var expiresAt: Int64
    /// The gateway's `rd` of the sign-in that led here; nil: the account page.
    public var returnTo: String?

    public init(
        tokenHash: String, appleSub: String, email: String?, emailVerified: Bool, isPrivateEmail: Bool,
        clientID: String, refreshToken: String?, createdAt: Int64, expiresAt: Int64, returnTo: String? = nil
    ) {
        self.returnTo = returnTo
        self.tokenHash = tokenHash
        self.appleSub = appleSub
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.clientID = clientID
        self.refreshToken = refreshToken
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}
