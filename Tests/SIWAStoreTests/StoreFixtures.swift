import Foundation
import Logging
import SIWAStore
import SIWATestSupport

// Shared by the suites of SIWAStoreTests: one per repository (AccountRepositoryTests, …), each case on SQLite and
// PostgreSQL, and the container's own (SIWADatabaseTests: schema, open, ping, close). The private database of
// each test is SIWATestSupport's `TestDatabase` (`withDatabase(backend) { test in … }`).

let testLogger = TestDatabase.quietLogger

func randomID(_ prefix: String = "") -> String { prefix + UUID().uuidString.lowercased() }

func signIn(
    sub: String, email: String? = nil, given: String? = "Ada", family: String? = "Lovelace",
    refreshToken: String? = nil, clientID: String = Fixture.webClientID, transferFrom: String? = nil, now: Int64 = 1_000,
    session: String = randomID("s-")
) -> NewSignIn {
    var seal: (@Sendable (String) throws -> String)?
    if let refreshToken {
        // The store treats the ciphertext as opaque text: tests store a recognisable one, whatever the account.
        seal = { _ in refreshToken }
    }
    return NewSignIn(
        appleSub: sub, email: email, emailVerified: email != nil, isPrivateEmail: email?.hasSuffix("privaterelay.appleid.com") ?? false,
        givenName: given, familyName: family, transferFromSub: transferFrom,
        clientID: clientID, sealRefreshToken: seal,
        sessionTokenHash: session, sessionKind: .web, sessionExpiresAt: now + 3_600, now: now
    )
}

/// An OpenID authorization code for `userID`, issued at `now` to the relying party `rp`, valid a minute.
func oidcCode(userID: String, now: Int64 = 1_000) -> OIDCAuthorizationCode {
    OIDCAuthorizationCode(codeHash: randomID("code-"), clientID: "rp", redirectURI: "https://rp.example/cb", userID: userID,
                          scope: "openid email", nonce: "n", codeChallenge: nil, authTime: now - 5, createdAt: now, expiresAt: now + 60)
}

/// The access token the token endpoint would issue for `code` at `now`, valid an hour.
func oidcAccessToken(for code: OIDCAuthorizationCode, now: Int64 = 1_000) -> OIDCAccessToken {
    OIDCAccessToken(tokenHash: randomID("at-"), userID: code.userID, clientID: code.clientID, scope: code.scope,
                    codeHash: code.codeHash, createdAt: now, expiresAt: now + 3_600)
}

/// Two people. Ada: a web session, an app session, an Apple token for each client, OIDC codes (one
/// exchanged, one not) and the access token of the exchanged one, the fallback row and a notification.
/// Grace: a web session, an Apple token and an unused OIDC code; she must stay untouched by what is done
/// to Ada.
func populatedWithTwoPeople(_ db: SIWADatabase) async throws -> (ada: UserAccount, grace: UserAccount) {
    let sub = randomID("sub-")
    let (ada, _) = try await db.accounts.completeSignIn(signIn(sub: sub, email: "Ada@Example.com", refreshToken: "sealed-web", session: "web-hash-ada"))
    var app = signIn(sub: sub, refreshToken: "sealed-app", clientID: Fixture.nativeClientID, now: 1_100, session: "app-hash-ada")
    app.sessionKind = .api
    _ = try await db.accounts.completeSignIn(app)
    try await db.accounts.saveAppleUserInfo(AppleUserInfo(appleSub: sub, givenName: "Ada", familyName: "Lovelace", email: "ada@example.com",
                                                          rawJSON: #"{"name":{"firstName":"Ada"}}"#, source: "web", receivedAt: 999))
    _ = try await db.apple.recordNotification(jti: randomID("jti-"), eventType: "email-disabled", sub: sub, now: 1_200)
    let used = oidcCode(userID: ada.id)
    try await db.oidc.insertOIDCCode(used)
    _ = try await db.oidc.redeemOIDCCode(codeHash: used.codeHash, now: 1_010) { c, _ in oidcAccessToken(for: c) }
    try await db.oidc.insertOIDCCode(oidcCode(userID: ada.id))
    let (grace, _) = try await db.accounts.completeSignIn(signIn(sub: randomID("sub-"), email: "grace@example.com", given: "Grace",
                                                                 refreshToken: "sealed-grace", session: "web-hash-grace"))
    try await db.oidc.insertOIDCCode(oidcCode(userID: grace.id))
    return (ada, grace)
}

/// One of the OpenID provider's signing keys, added at `createdAt`; its private half `sealed-KID` unless given.
func signingKey(_ kid: String, createdAt: Int64, signsFrom: Int64? = nil, privateKey: String? = nil) -> OIDCSigningKeyRecord {
    OIDCSigningKeyRecord(kid: kid, publicJWK: #"{"kty":"RSA","kid":"\#(kid)"}"#, privateKey: privateKey ?? "sealed-" + kid,
                         createdAt: createdAt, signsFrom: signsFrom ?? createdAt)
}

/// Whether `error` is the store's ``StoreError/conflict(_:)`` (a unique key refused the write).
func isConflict(_ error: any Error) -> Bool {
    if case .conflict = error as? StoreError { return true }
    return false
}

extension UserAccount {
    func with(lastSignIn: Int64) -> UserAccount {
        var copy = self
        copy.lastSignInAt = lastSignIn
        copy.updatedAt = lastSignIn
        return copy
    }
}
