import AppleSignIn
import Foundation
import Hummingbird
import JOSE
import Logging
import SIWAStore

/// What a verified sign-in knows about the person, whichever way it arrived (web, profile form, app).
struct VerifiedSignIn: Sendable {
    var sub: String
    var transferSub: String?
    var email: String?
    var emailVerified: Bool
    var isPrivateEmail: Bool
    var clientID: String
    var refreshToken: String?
    /// The name from this request (the one-time `user` JSON, the form, or the app).
    var givenName: String?
    var familyName: String?

    init(sub: String, transferSub: String? = nil, email: String?, emailVerified: Bool, isPrivateEmail: Bool,
         clientID: String, refreshToken: String?, givenName: String?, familyName: String?) {
        self.sub = sub
        self.transferSub = transferSub
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.clientID = clientID
        self.refreshToken = refreshToken
        self.givenName = givenName
        self.familyName = familyName
    }

    /// From verified id_token claims: the email is trusted only from there.
    init(claims: IdentityTokenClaims, clientID: String, refreshToken: String?, givenName: String?, familyName: String?) {
        self.init(sub: claims.sub, transferSub: claims.transferSub, email: claims.email,
                  emailVerified: claims.emailVerified ?? false, isPrivateEmail: claims.isPrivateEmail ?? false,
                  clientID: clientID, refreshToken: refreshToken, givenName: givenName, familyName: familyName)
    }

    var hasName: Bool { !(givenName ?? "").isEmpty || !(familyName ?? "").isEmpty }
}

/// The end of a sign-in: the account by `sub` only, a name from this request or the fallback table,
/// and a session — or, when a new account has no name anywhere, `.profileRequired`.
enum SignInResult {
    case signedIn(account: UserAccount, created: Bool, session: IssuedSession)
    case profileRequired
}

/// The secrets of a new session, handed to the browser or app once (only their hashes are stored).
struct IssuedSession: Sendable {
    /// The web session's cookie value, or the app's access token.
    let token: String
    /// Seconds the token is accepted: the cookie's `Max-Age`, the app's `expiresIn`.
    let lifetime: Int64
    /// The app's first refresh token; nil for web sessions.
    let refreshToken: String?
}

extension SIWADependencies {
    /// `ending`: the session the request carries, if any; it ends in the transaction that starts the new one.
    /// `userAgent`: the signing-in browser's or app's, shown on the account page's list of sessions.
    /// A web session lives `SESSION_LIFETIME_SECONDS` with an idle deadline; an app sign-in starts a refresh
    /// token family (`APP_REFRESH_TOKEN_LIFETIME_SECONDS`) and its first access token (SPEC §13).
    func complete(_ signIn: VerifiedSignIn, sessionKind: SessionKind, ending: String? = nil, userAgent: String? = nil,
                  logger: Logger) async throws -> SignInResult {
        let sessionToken = BearerSecret.generate()
        let now = now()
        let expiresAt: Int64
        var idleExpiresAt: Int64?
        var refreshToken: String?
        var grant: AppRefreshGrant?
        switch sessionKind {
        case .web:
            expiresAt = now + Int64(configuration.sessionLifetime)
            idleExpiresAt = configuration.sessionTouch.idleDeadline(now: now, expiresAt: expiresAt)
        case .api:
            let familyEnd = now + Int64(configuration.appRefreshTokenLifetime)
            expiresAt = min(now + Int64(configuration.appAccessTokenLifetime), familyEnd)
            let token = BearerSecret.generate()
            refreshToken = token
            grant = AppRefreshGrant(tokenHash: BearerSecret.hash(token), familyID: UUID().uuidString.lowercased(), expiresAt: familyEnd)
        }
        // Sealed inside the store's transaction, once the account id is known (new, existing or transferred).
        var sealRefreshToken: (@Sendable (_ userID: String) throws -> String)?
        if let token = signIn.refreshToken {
            let (cipher, clientID) = (cipher, signIn.clientID)
            sealRefreshToken = { userID in try cipher.seal(token, for: .account(userID: userID, clientID: clientID)) }
        }
        // A new account without a name in this request takes the one-time `user` JSON of an earlier
        // attempt that did not finish (the fallback table); with no name anywhere, nil: ask or recover.
        guard let (account, created) = try await database.accounts.completeSignInUsingStoredName(NewSignIn(
            appleSub: signIn.sub, email: signIn.email, emailVerified: signIn.emailVerified,
            isPrivateEmail: signIn.isPrivateEmail, givenName: signIn.givenName, familyName: signIn.familyName,
            transferFromSub: signIn.transferSub, clientID: signIn.clientID, sealRefreshToken: sealRefreshToken,
            sessionTokenHash: BearerSecret.hash(sessionToken), sessionKind: sessionKind,
            sessionExpiresAt: expiresAt, endingSessionHash: ending.map(BearerSecret.hash),
            sessionIdleExpiresAt: idleExpiresAt, sessionUserAgent: userAgent, appRefresh: grant, now: now
        )) else {
            return .profileRequired
        }
        metrics.sessionStarted(sessionKind)
        logger.info("signed in", metadata: ["user": .string(account.id), "new": .stringConvertible(created), "kind": .string(sessionKind.rawValue)])
        return .signedIn(account: account, created: created,
                         session: IssuedSession(token: sessionToken, lifetime: min(idleExpiresAt ?? expiresAt, expiresAt) - now,
                                                refreshToken: refreshToken))
    }

    /// Writes the one-time `user` data to the fallback table before anything else can fail.
    func saveUserInfo(sub: String, givenName: String?, familyName: String?, email: String?, rawJSON: String, source: String) async throws {
        try await database.accounts.saveAppleUserInfo(AppleUserInfo(
            appleSub: sub, givenName: givenName, familyName: familyName, email: email,
            rawJSON: rawJSON, source: source, receivedAt: now()
        ))
    }

    /// Deletes the account and everything about it in one transaction, queuing an Apple revocation for each of
    /// its tokens (web and app) in the same transaction so they survive restarts (SPEC §5). `revoke: false` for
    /// Apple's own account-delete notification, where Apple already knows. Nil when there is no such account.
    ///
    /// A token that cannot be opened (sealed with a key this configuration does not have, or not for this
    /// account) is never dropped silently (SPEC §14): the deletion is refused with ``UnreadableAppleTokens``
    /// and nothing is deleted, unless `droppingUnreadable` (an operator's explicit choice), when `logger`
    /// hears of each such token.
    @discardableResult
    package func deleteAccount(_ account: UserAccount, revoke: Bool, droppingUnreadable: Bool = false,
                               logger: Logger = Logger(label: "siwa")) async throws -> AccountDeletion? {
        let (now, cipher) = (now(), cipher)
        var revocations: RevocationForToken?
        if revoke {
            revocations = { token in
                let id = UUID().uuidString
                do {
                    // Re-sealed for its outbox item: the account row it was bound to is about to go.
                    let sealed = try cipher.reseal(token.refreshToken, from: .account(userID: token.userID, clientID: token.clientID),
                                                   to: .revocation(id: id))
                    return RevocationItem(id: id, clientID: token.clientID, token: sealed, tokenTypeHint: "refresh_token",
                                          createdAt: now, attempts: 0, nextAttemptAt: now, lastError: nil, completedAt: nil)
                } catch {
                    logger.error("stored Apple token does not open; it cannot be revoked", metadata: [
                        "user": .string(token.userID), "client": .string(token.clientID), "error": .string(String(describing: error)),
                        "deletion": .string(droppingUnreadable ? "goes on: dropping unreadable tokens as asked" : "refused"),
                    ])
                    return nil
                }
            }
        }
        let ending = await sessionsAbout(toEnd: account.id)
        let deleted = try await database.accounts.deleteAccount(userID: account.id, revocations: revocations, droppingUnreadable: droppingUnreadable)
        if deleted != nil { metrics.sessionsEnded(.revoked, count: ending) }
        if revoke && deleted != nil { revocationSignal.notify() }
        return deleted
    }

    /// How many sessions (web, app) `userID` has, read just before a deletion or a revoked consent ends them
    /// all, for `siwa_sessions_ended_total{reason="revoked"}`; 0 when it cannot be read (a metric never fails
    /// the change it counts).
    func sessionsAbout(toEnd userID: String) async -> Int {
        (try? await database.sessions.personSessions(userID: userID, now: now()).count) ?? 0
    }

    /// ``sessionsAbout(toEnd:)`` for the person Apple's notification names by `sub`.
    func sessionsAbout(sub: String) async -> Int {
        guard let account = try? await database.accounts.user(sub: sub) else { return 0 }
        return await sessionsAbout(toEnd: account.id)
    }
}
