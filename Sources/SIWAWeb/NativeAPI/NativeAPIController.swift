import AppleSignIn
import Foundation
import Hummingbird
import JOSE
import Logging
import SIWAStore

/// The iOS app's credential (SPEC §7, §13): `POST /auth/apple/native` (an access token and a refresh token),
/// `POST /auth/apple/native/refresh`, and the bearer API `GET`/`DELETE /api/me`, `POST /api/sign_out`.
struct NativeAPIController: Sendable {
    let dependencies: SIWADependencies

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .get("/api/me", use: me)
            .delete("/api/me", use: deleteMe)
            .post("/api/sign_out", use: signOut)
            .limited(by: dependencies.rateLimit)
            .post("/auth/apple/native/nonce", use: issueNonce)
            .post("/auth/apple/native", use: signIn)
            .post("/auth/apple/native/refresh", use: refresh)
    }

    struct Credential: Decodable, Sendable {
        struct FullName: Decodable, Sendable { var givenName: String?; var familyName: String? }
        var identityToken: String?
        var authorizationCode: String?
        var nonce: String?
        var fullName: FullName?
        var email: String?
    }

    struct UserView: Encodable, Sendable {
        var id: String
        var name: String?
        var email: String?
        var isPrivateEmail: Bool
        init(_ account: UserAccount) {
            id = account.id
            name = account.displayName
            email = account.email
            isPrivateEmail = account.isPrivateEmail
        }
    }

    /// `token`: the access token (a bearer, `expiresIn` seconds); `refreshToken`: spent by the next
    /// `POST /auth/apple/native/refresh`, which answers the same shape.
    struct SignInAnswer: Encodable, Sendable {
        var token: String
        var expiresIn: Int64
        var refreshToken: String
        var user: UserView
    }

    static let invalidToken = WebError(.unauthorized, kind: "invalid_token", title: "Invalid token",
                                       message: "The identity token was not accepted.", retryPath: nil)

    struct NonceAnswer: Encodable, Sendable { var nonce: String; var expiresIn: Int64 }

    /// `POST /auth/apple/native/nonce` (SPEC §7): a single-use nonce for the app's next Apple request.
    func issueNonce(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard !dependencies.configuration.nativeClientIDs.isEmpty else { throw Self.notConfigured }
        // An app sends neither Sec-Fetch header; a browser always does. A page's `no-cors` POST
        // (`text/plain`, no preflight) from each of its visitors must not take a slot of the global cap
        // (SPEC §9), so a browser's request gets a nonce only from this site's own pages.
        if Self.isCrossSiteBrowserRequest(request.headers) { throw Self.browserRequest }
        let now = dependencies.now()
        try await dependencies.signInCap.admit(context.origin, database: dependencies.database, now: now, context: context)
        let nonce = NativeNonce.generate()
        try await dependencies.database.sessions.insertPendingAuthorization(nonce.pendingAuthorization(now: now))
        return .json(NonceAnswer(nonce: nonce.raw, expiresIn: NativeNonce.lifetime))
    }

    /// A browser's request that is not this site's own (SPEC §9): `Sec-Fetch-Site` other than
    /// `same-origin`, or any `Sec-Fetch-Mode` (a native app sends neither).
    static func isCrossSiteBrowserRequest(_ headers: HTTPFields) -> Bool {
        if headers[.secFetchMode] != nil { return true }
        if let site = headers[.secFetchSite], site.lowercased() != "same-origin" { return true }
        return false
    }

    static let browserRequest = WebError(.forbidden, kind: "browser_request", title: "Not for browsers",
                                         message: "Nonces are issued to the native app, not to a web page.", retryPath: nil)

    static let notConfigured = WebError(.unauthorized, kind: "invalid_token", title: "Not configured",
                                        message: "This service accepts no app tokens (APPLE_NATIVE_CLIENT_IDS is empty).", retryPath: nil)

    func signIn(_ request: Request, context: AppRequestContext) async throws -> Response {
        let configuration = dependencies.configuration
        let logger = context.logger
        var request = request
        let body = try await request.collectBody(upTo: FormBody.limit)
        let credential: Credential
        do {
            credential = try JSONDecoder().decode(Credential.self, from: Data(buffer: body))
        } catch {
            throw Self.missingFields
        }
        // All three are required (SPEC §7): a captured identity token alone must never become a session.
        guard let identityToken = credential.identityToken, !identityToken.isEmpty,
              let code = credential.authorizationCode, !code.isEmpty,
              let rawNonce = credential.nonce, NativeNonce.isWellFormed(rawNonce)
        else { throw Self.missingFields }
        guard !configuration.nativeClientIDs.isEmpty else { throw Self.notConfigured }

        // The nonce first, consumed whatever happens next: one credential, one attempt.
        let now = dependencies.now()
        guard let issued = try await dependencies.database.sessions.consumePendingAuthorization(
            state: NativeNonce(raw: rawNonce).state, now: now),
            issued.bindingHash == NativeNonce.bindingMarker, issued.expiresAt > now
        else {
            logger.notice("native sign-in with a nonce that is unknown, used or expired")
            throw Self.invalidNonce
        }
        let claims: IdentityTokenClaims
        do {
            // The app passes the raw nonce; the token carries its SHA-256 (Apple's native convention).
            claims = try await dependencies.identityTokens.verify(
                identityToken, audiences: Set(configuration.nativeClientIDs), nonce: .sha256Hex(of: rawNonce), code: nil)
        } catch let error as IdentityTokenError {
            if case .jws(.keysUnavailable) = error {
                throw WebError(.badGateway, kind: "apple_keys_unavailable", title: "Apple is not answering",
                               message: "Apple's keys could not be fetched; try again.", retryPath: nil)
            }
            logger.notice("native identity token rejected", metadata: ["reason": .string(error.description)])
            throw Self.invalidToken
        }
        let bundleID = claims.aud

        let givenName = NameField.clean(credential.fullName?.givenName)
        let familyName = NameField.clean(credential.fullName?.familyName)
        let email = credential.email.flatMap { NameField.clean($0) }
        if givenName != nil || familyName != nil || email != nil {
            let raw = (try? String(decoding: JSONEncoder().encode(["givenName": givenName, "familyName": familyName, "email": email]), as: UTF8.self)) ?? ""
            try await dependencies.saveUserInfo(sub: claims.sub, givenName: givenName, familyName: familyName, email: email,
                                                rawJSON: raw, source: "native")
        }

        // The code proves the app holds a fresh authorization: Apple's answer must name the same person.
        let tokens: AppleTokenResponse
        do {
            tokens = try await dependencies.metrics.timeAppleCall("token") {
                try await dependencies.apple.exchangeCode(code, clientID: bundleID, redirectURI: nil)
            }
        } catch {
            var failure = AppleFailure.exchange(error, logger: logger)
            failure.retryPath = nil
            throw failure
        }
        guard let exchangedToken = tokens.idToken,
              let exchanged = try? await dependencies.identityTokens.verify(exchangedToken, audiences: [bundleID], nonce: .notChecked, code: nil),
              exchanged.sub == claims.sub
        else {
            logger.notice("native sign-in: the exchanged token does not name the identity token's person")
            throw Self.invalidToken
        }
        let refreshToken = tokens.refreshToken

        let signIn = VerifiedSignIn(claims: claims, clientID: bundleID, refreshToken: refreshToken,
                                    givenName: givenName, familyName: familyName)
        switch try await dependencies.complete(signIn, sessionKind: .api, userAgent: request.headers[.userAgent], logger: logger) {
        case .signedIn(let account, let created, let session):
            dependencies.metrics.signIn(created ? "new_account" : "returning", channel: "native")
            return .json(SignInAnswer(token: session.token, expiresIn: session.lifetime, refreshToken: session.refreshToken ?? "",
                                      user: UserView(account)))
        case .profileRequired:
            dependencies.metrics.signIn("profile_required", channel: "native")
            throw WebError(.conflict, kind: "profile_required", title: "Name required",
                           message: "This is a new account and no name is known: ask the person for their name and send it as fullName.",
                           retryPath: nil)
        }
    }

    struct RefreshRequest: Decodable, Sendable { var refreshToken: String? }

    /// `POST /auth/apple/native/refresh` `{"refreshToken"}` (SPEC §13): spends it for a new pair. A spent
    /// token presented again ends its whole family (RFC 9700 §4.14.2): every access and refresh token of
    /// that sign-in, on every instance within a second; it is refused like an unknown one.
    func refresh(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: FormBody.limit)
        guard let presented = (try? JSONDecoder().decode(RefreshRequest.self, from: Data(buffer: body)))?.refreshToken
        else { throw Self.missingRefreshToken }
        guard BearerSecret.isWellFormed(presented) else { throw Self.invalidRefreshToken }
        let now = dependencies.now()
        let (access, refresh) = (BearerSecret.generate(), BearerSecret.generate())
        switch try await dependencies.database.sessions.refreshAppSession(
            presentedHash: BearerSecret.hash(presented), newAccessHash: BearerSecret.hash(access), newRefreshHash: BearerSecret.hash(refresh),
            accessExpiresAt: now + Int64(dependencies.configuration.appAccessTokenLifetime), now: now) {
        case .rotated(let session, let account):
            dependencies.metrics.sessionRefreshed()
            return .json(SignInAnswer(token: access, expiresIn: session.expiresAt - now, refreshToken: refresh, user: UserView(account)))
        case .reused(let userID, _):
            dependencies.metrics.sessionsEnded(.reuseDetected)
            context.logger.warning("a spent refresh token was presented again: its app session ended (RFC 9700 §4.14.2)",
                                   metadata: ["user": .string(userID)])
            throw Self.invalidRefreshToken
        case .invalid:
            throw Self.invalidRefreshToken
        }
    }

    /// `POST /api/sign_out` with the bearer (SPEC §13): ends that app session, its refresh tokens included.
    func signOut(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard case .token(let token) = PresentedBearer(request.headers),
              try await dependencies.database.sessions.endAppSession(accessTokenHash: BearerSecret.hash(token), now: dependencies.now())
        else { throw Self.unauthorized }
        dependencies.metrics.sessionsEnded(.signOut)
        context.logger.info("app signed out")
        return .json(["status": "signed_out"])
    }

    func me(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let session = try await dependencies.apiSession(for: request) else { throw Self.unauthorized }
        return .json(UserView(session.account))
    }

    func deleteMe(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let session = try await dependencies.apiSession(for: request) else { throw Self.unauthorized }
        do {
            try await dependencies.deleteAccount(session.account, revoke: true, logger: context.logger)
        } catch let refusal as UnreadableAppleTokens {
            throw WebError.unreadableTokens(refusal, retryPath: nil)
        }
        context.logger.info("account deleted through the API", metadata: ["user": .string(session.account.id)])
        return .json(["status": "deleted"])
    }

    static let missingFields = WebError(.badRequest, kind: "invalid_request", title: "Invalid request",
                                        message: "The body must be JSON with identityToken, authorizationCode and nonce (from POST /auth/apple/native/nonce).",
                                        retryPath: nil)
    static let invalidNonce = WebError(.unauthorized, kind: "invalid_nonce", title: "Invalid nonce",
                                       message: "The nonce is unknown, already used or expired: ask POST /auth/apple/native/nonce for a new one.",
                                       retryPath: nil)

    static let missingRefreshToken = WebError(.badRequest, kind: "invalid_request", title: "Invalid request",
                                              message: "The body must be JSON with refreshToken.", retryPath: nil)
    /// Unknown, spent, or past its session's end (RFC 6749 §5.2's `invalid_grant`, as a 401 like every
    /// refused token here): the app signs in with Apple again.
    static let invalidRefreshToken = WebError(.unauthorized, kind: "invalid_grant", title: "Invalid refresh token",
                                              message: "The refresh token is unknown, already used or expired: sign in again.",
                                              retryPath: nil)

    static let unauthorized = WebError(.unauthorized, kind: "unauthorized", title: "Unauthorized",
                                       message: "A valid bearer token is required.", retryPath: nil,
                                       headers: [.wwwAuthenticate: "Bearer"])
}
