import CurlHTTP
import Foundation
import HTTPTypes
import Hummingbird
import JOSE
import Logging
import NIOCore
import SIWAStore

/// siwa as a small OpenID Provider (SPEC §11): discovery, JWKS, the authorization endpoint (code flow with
/// PKCE), the token endpoint and UserInfo. The person signs in with Apple through siwa's own sign-in; the
/// relying party only ever sees siwa's tokens, with siwa's user id as `sub`.
struct OIDCProviderController: Sendable {
    let dependencies: SIWADependencies
    let provider: OIDCProviderConfiguration

    /// A code lives at most 60 seconds (SPEC §11); relying parties exchange it at once.
    static let codeLifetime: Int64 = 60
    /// Access tokens (UserInfo) and ID tokens live at most an hour.
    static let accessTokenLifetime: Int64 = 3600
    static let idTokenLifetime: Int64 = 3600

    enum Path {
        static let discovery = "/.well-known/openid-configuration"
        static let authorize = "/oidc/authorize"
        static let token = "/oidc/token"
        static let userInfo = "/oidc/userinfo"
        static let jwks = "/oidc/jwks"
        static let endSession = "/oidc/logout"
    }

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .get(RouterPath(Path.discovery), use: discovery)
            .get(RouterPath(Path.jwks), use: jwks)
            .post(RouterPath(Path.token), use: token)
            .get(RouterPath(Path.userInfo), use: userInfo)
            .post(RouterPath(Path.userInfo), use: userInfo)
            // Each authorization request may store a code: limited per client like the sign-in routes.
            .limited(by: dependencies.rateLimit)
            .get(RouterPath(Path.authorize), use: authorize)
            .post(RouterPath(Path.authorize), use: authorize)
            // Each checks a signature and may end a session: limited as well.
            .get(RouterPath(Path.endSession), use: logout)
            .post(RouterPath(Path.endSession), use: logout)
    }

    // MARK: Discovery and keys

    struct Discovery: Encodable {
        var issuer: String
        var authorization_endpoint: String
        var token_endpoint: String
        var userinfo_endpoint: String
        var jwks_uri: String
        /// RP-Initiated Logout 1.0 (OIDCProviderController+Logout.swift).
        var end_session_endpoint: String
        var response_types_supported = ["code"]
        var response_modes_supported = ["query"]
        var grant_types_supported = ["authorization_code", "refresh_token"]
        var subject_types_supported = ["public"]
        var id_token_signing_alg_values_supported = ["RS256"]
        var scopes_supported = OIDCAuthorizationRequest.supportedScopes
        var token_endpoint_auth_methods_supported = ["client_secret_basic", "client_secret_post", "none"]
        var code_challenge_methods_supported = ["S256"]
        var prompt_values_supported = ["none", "login", "consent", "select_account"]
        var claims_supported = ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "azp", "at_hash", "email",
                                "email_verified", "is_private_email", "name", "given_name", "family_name", "sid"]
        var claims_parameter_supported = false
        var request_parameter_supported = false
        // Its default is true (OIDC Discovery §3): say it is not.
        var request_uri_parameter_supported = false
    }

    func discovery(_ request: Request, context: AppRequestContext) async throws -> Response {
        let issuer = provider.issuer
        return Self.publicJSON(Discovery(
            issuer: issuer, authorization_endpoint: issuer + Path.authorize, token_endpoint: issuer + Path.token,
            userinfo_endpoint: issuer + Path.userInfo, jwks_uri: issuer + Path.jwks, end_session_endpoint: issuer + Path.endSession))
    }

    func jwks(_ request: Request, context: AppRequestContext) async throws -> Response {
        Self.publicJSON(try await signingKeys().jwks(at: dependencies.now()))
    }

    /// The signing keys as the database has them (read again every few seconds: a rotation reaches every
    /// instance without a restart); the configured key alone when the ring is missing.
    func signingKeys() async throws -> OIDCKeySet {
        guard let ring = dependencies.oidcKeys else { return OIDCKeySet(keys: [], configured: provider.signingKeys) }
        return try await ring.keySet()
    }

    /// Public documents: cacheable for a few minutes, readable by browser-based clients.
    private static func publicJSON(_ value: some Encodable) -> Response {
        var response = Response.json(value)
        response.headers[.cacheControl] = "public, max-age=300"
        response.headers[.accessControlAllowOrigin] = "*"
        return response
    }

    // MARK: Authorization endpoint

    func authorize(_ request: Request, context: AppRequestContext) async throws -> Response {
        let pairs = try await Self.formOrQuery(request, unreadable: Self.unusable)

        let validated: OIDCAuthorizationRequest
        switch OIDCAuthorizationRequest.validate(OIDCParameters(pairs), clients: provider.clients) {
        case .errorPage(let message):
            context.logger.notice("OIDC authorization refused", metadata: ["reason": .string(message)])
            throw Self.unusable(message)
        case .redirect(let error):
            return .seeOther(error.location)
        case .valid(let request):
            validated = request
        }

        let now = dependencies.now()
        let session = try await dependencies.webSession(for: request)
        var mustSignIn = session == nil || validated.prompt.contains("login")
        // `max_age` counts from the last Apple sign-in (SPEC §11); 0 always asks for a new one.
        if let session, let maxAge = validated.maxAge, maxAge == 0 || now - session.record.createdAt > maxAge { mustSignIn = true }
        // Back from the sign-in this request sent the person through: a session other than the one it
        // replaced, made since, is that sign-in (however recent the second it counts in), so no loop.
        if mustSignIn, let session, let replaced = pairs.last(where: { $0.0 == Self.reauthenticationParameter })?.1,
           replaced != Self.reauthenticationMarker(for: session), now - session.record.createdAt <= Self.reauthenticationWindow {
            mustSignIn = false
        }
        guard let session, !mustSignIn else {
            if validated.prompt.contains("none") {
                return .seeOther(OIDCRedirectError(
                    redirectURI: validated.redirectURI,
                    error: OIDCError(code: "login_required", description: "the person is not signed in"),
                    state: validated.state).location)
            }
            // The Apple sign-in first; the gateway's `rd` (SPEC §10) brings the person back to this same
            // request, without prompt=login and naming the session it replaces, so that it does not send
            // them round again.
            var back = pairs.filter { ($0.0 != "prompt" || !validated.prompt.contains("login")) && $0.0 != Self.reauthenticationParameter }
            if let session { back.append((Self.reauthenticationParameter, Self.reauthenticationMarker(for: session))) }
            return .seeOther("/auth/apple?rd=" + PercentEncoding.encode(Path.authorize + "?" + FormPairs.encode(back)))
        }

        let code = BearerSecret.generate()
        try await dependencies.database.oidc.insertOIDCCode(OIDCAuthorizationCode(
            codeHash: BearerSecret.hash(code), clientID: validated.client.clientID, redirectURI: validated.redirectURI,
            userID: session.account.id, scope: validated.scopes.joined(separator: " "), nonce: validated.nonce,
            codeChallenge: validated.codeChallenge, authTime: session.record.createdAt, createdAt: now,
            expiresAt: now + Self.codeLifetime, sid: Self.sid(for: session.tokenHash)))
        context.logger.info("OIDC code issued", metadata: ["client": .string(validated.client.clientID), "user": .string(session.account.id)])
        var answer = [("code", code)]
        if let state = validated.state { answer.append(("state", state)) }
        var response = Response.seeOther(OIDCRedirect.location(validated.redirectURI, answer))
        // This use may have moved the session's idle deadline (SPEC §13): the browser keeps the cookie as long.
        if let cookie = dependencies.sessionCookieRefresh(session) { response.setCookie(cookie) }
        return response
    }

    /// siwa's own parameter on an authorization request it sends through a new Apple sign-in
    /// (`max_age` elapsed or 0, `prompt=login`): which session that sign-in replaces.
    static let reauthenticationParameter = "siwa_replaces"
    /// How long after it a new session still counts as the sign-in the request asked for: a pending
    /// authorization's life.
    static let reauthenticationWindow: Int64 = 600

    /// Names a session without revealing anything of its token (a hash of its token's hash, cut short).
    static func reauthenticationMarker(for session: SignedInSession) -> String {
        String(AccountSessions.digest("siwa-reauthentication:" + session.record.tokenHash).prefix(16))
    }

    /// The ID token's `sid` for the web session whose token hashes to `tokenHash`: one per session, opaque (a
    /// hash of the hash under its own label, so it matches neither the account page's row id nor the CSRF
    /// token, and a relying party learns nothing of the cookie from it).
    static func sid(for tokenHash: String) -> String {
        AccountSessions.digest("siwa-sid:" + tokenHash)
    }

    /// The error page for a request that cannot be answered by redirect (RFC 6749 §4.1.2.1).
    static func unusable(_ message: String) -> WebError {
        WebError(.badRequest, kind: "oidc_invalid_request", title: "This sign-in link cannot be used", message: message,
                 hint: "Go back to the application and start signing in again. If it keeps happening, the application is not set up correctly with this site.",
                 retryPath: nil)
    }

    // MARK: Token endpoint

    func token(_ request: Request, context: AppRequestContext) async throws -> Response {
        do {
            return try await exchange(request, context: context)
        } catch let error as OIDCError {
            return error.tokenResponse
        } catch is NIOTooManyBytesError {
            return OIDCError.invalidRequest("the request body is too large").tokenResponse
        } catch let error as StoreError {
            if case .unavailable = error {
                return OIDCError(code: "temporarily_unavailable", description: "the database is not answering; try again",
                                 status: .serviceUnavailable).tokenResponse
            }
            throw error
        }
    }

    private func exchange(_ request: Request, context: AppRequestContext) async throws -> Response {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else {
            throw OIDCError.invalidRequest("the body must be application/x-www-form-urlencoded")
        }
        var request = request
        let body = try await request.collectBody(upTo: FormBody.limit)
        guard let pairs = PercentEncoding.formPairs(String(buffer: body)) else { throw OIDCError.invalidRequest("the form could not be read") }
        let tokenRequest: OIDCTokenRequest
        switch OIDCTokenRequest.validate(OIDCParameters(pairs), authorization: request.headers[.authorization], clients: provider.clients) {
        case .success(let valid): tokenRequest = valid
        case .failure(let error):
            if error.code == "invalid_client" {
                context.logger.notice("OIDC client authentication failed", metadata: ["reason": .string(error.description)])
            }
            throw error
        }
        switch tokenRequest.grant {
        case .authorizationCode(let code, _, _):
            return try await exchange(code: code, tokenRequest, context: context)
        case .refreshToken(let token, _):
            return try await refresh(token, tokenRequest, context: context)
        }
    }

    /// `grant_type=authorization_code`: the access token and ID token, and the family's first refresh token
    /// when the code's scope holds `offline_access` (granted only to confidential clients).
    private func exchange(code presented: String, _ tokenRequest: OIDCTokenRequest, context: AppRequestContext) async throws -> Response {
        // Ours are 43 base64url characters; anything else is not worth a database round trip.
        guard BearerSecret.isWellFormed(presented) else { throw OIDCError.invalidGrant("the code is unknown") }

        // The keys before the code is spent: a database that cannot give them must not cost the client its code.
        let keys = try await signingKeys()
        let now = dependencies.now()
        let pair = NewTokenPair()
        let (accessToken, accessTokenHash, refreshToken, refreshTokenHash) = (pair.access, pair.accessHash, pair.refresh, pair.refreshHash)
        let familyEnd = now + provider.refreshTokenLifetime
        let client = tokenRequest.client
        let redemption = try await dependencies.database.oidc.exchangeOIDCCode(codeHash: BearerSecret.hash(presented), now: now) { code, account in
            guard tokenRequest.problem(with: code, now: now) == nil else { return nil }
            let access = OIDCAccessToken(tokenHash: accessTokenHash, userID: account.id, clientID: code.clientID, scope: code.scope,
                                         codeHash: code.codeHash, createdAt: now, expiresAt: now + Self.accessTokenLifetime)
            guard Self.grantsRefreshToken(scope: code.scope, client: client) else { return OIDCTokenGrant(access: access) }
            // The family is named by the code's hash, which its access tokens carry: a replayed code ends it too.
            return OIDCTokenGrant(access: access, refresh: OIDCRefreshToken(
                tokenHash: refreshTokenHash, familyID: code.codeHash, userID: account.id, clientID: code.clientID, scope: code.scope,
                authTime: code.authTime, createdAt: now, expiresAt: familyEnd, sid: code.sid))
        }
        switch redemption {
        case .unknown:
            throw OIDCError.invalidGrant("the code is unknown")
        case .replayed(let revoked):
            context.logger.warning("OIDC code used twice: its tokens are revoked",
                                   metadata: ["client": .string(tokenRequest.client.clientID), "revoked": .stringConvertible(revoked)])
            throw OIDCError.invalidGrant("the code has already been used; the tokens issued with it are revoked")
        case .refused(let code):
            throw OIDCError.invalidGrant(tokenRequest.problem(with: code, now: now) ?? "the code's account no longer exists")
        case .issued(let code, let account):
            let claims = OIDCClaims.idToken(account, code: code, issuer: provider.issuer, accessToken: accessToken,
                                            now: now, lifetime: Self.idTokenLifetime)
            let signer = keys.signer(at: now)
            let idToken = try CompactJWS.signRS256(payload: claims, key: signer.key, kid: signer.kid, typ: "JWT")
            let withRefresh = Self.grantsRefreshToken(scope: code.scope, client: client)
            context.logger.info("OIDC tokens issued", metadata: ["client": .string(code.clientID), "user": .string(account.id),
                                                                 "refresh_token": .stringConvertible(withRefresh)])
            return Self.tokenResponse(TokenAnswer(access_token: accessToken, expires_in: Self.accessTokenLifetime,
                                                  refresh_token: withRefresh ? refreshToken : nil, id_token: idToken, scope: code.scope))
        }
    }

    /// Whether an exchange of a code with `scope` starts a refresh token family: `offline_access` granted to a
    /// confidential client (the authorization request drops it for public ones; checked again here).
    static func grantsRefreshToken(scope: String, client: OIDCClient) -> Bool {
        !client.isPublic && scope.split(separator: " ").contains("offline_access")
    }

    /// `grant_type=refresh_token` (RFC 6749 §6, OIDC Core §12): spends the token for a new access token, the
    /// family's next refresh token and a new ID token (same `sub` and `auth_time`, no `nonce`). A spent token
    /// presented again ends the family, its access tokens included (RFC 9700 §4.14.2).
    private func refresh(_ presented: String, _ tokenRequest: OIDCTokenRequest, context: AppRequestContext) async throws -> Response {
        let unknown = OIDCError.invalidGrant("the refresh token is unknown, expired or revoked")
        guard BearerSecret.isWellFormed(presented) else { throw unknown }
        let keys = try await signingKeys()
        let now = dependencies.now()
        let pair = NewTokenPair()
        let (accessToken, accessTokenHash, refreshToken, refreshTokenHash) = (pair.access, pair.accessHash, pair.refresh, pair.refreshHash)
        let outcome = try await dependencies.database.oidc.refreshOIDC(presentedHash: BearerSecret.hash(presented), now: now) { token, account in
            guard tokenRequest.problem(with: token) == nil else { return nil }
            return OIDCTokenGrant(
                access: OIDCAccessToken(tokenHash: accessTokenHash, userID: account.id, clientID: token.clientID,
                                        scope: Self.refreshedScope(token, tokenRequest), codeHash: token.familyID, createdAt: now,
                                        expiresAt: min(now + Self.accessTokenLifetime, token.expiresAt)),
                refresh: OIDCRefreshToken(tokenHash: refreshTokenHash, familyID: token.familyID, userID: account.id, clientID: token.clientID,
                                          scope: token.scope, authTime: token.authTime, createdAt: now, expiresAt: token.expiresAt,
                                          sid: token.sid))
        }
        switch outcome {
        case .invalid:
            throw unknown
        case .refused(let token):
            throw tokenRequest.problem(with: token) ?? unknown
        case .reused(let token):
            context.logger.warning("a spent OIDC refresh token was presented again: its family ended (RFC 9700 §4.14.2)",
                                   metadata: ["client": .string(tokenRequest.client.clientID), "owner": .string(token.clientID),
                                              "user": .string(token.userID)])
            throw OIDCError.invalidGrant("the refresh token has already been used; every token issued with it is revoked")
        case .rotated(let token, let account):
            let scope = Self.refreshedScope(token, tokenRequest)
            let claims = OIDCClaims.idToken(account, refreshed: token, scope: scope, issuer: provider.issuer, accessToken: accessToken,
                                            now: now, lifetime: Self.idTokenLifetime)
            let signer = keys.signer(at: now)
            let idToken = try CompactJWS.signRS256(payload: claims, key: signer.key, kid: signer.kid, typ: "JWT")
            context.logger.info("OIDC tokens refreshed", metadata: ["client": .string(token.clientID), "user": .string(account.id)])
            return Self.tokenResponse(TokenAnswer(access_token: accessToken, expires_in: min(Self.accessTokenLifetime, token.expiresAt - now),
                                                  refresh_token: refreshToken, id_token: idToken, scope: scope))
        }
    }

    /// The new access token's scopes: those asked for (a subset, checked before), in the granted order, or all granted.
    static func refreshedScope(_ token: OIDCRefreshToken, _ request: OIDCTokenRequest) -> String {
        guard case .refreshToken(_, let asked?) = request.grant else { return token.scope }
        return token.scope.split(separator: " ").filter { asked.contains(String($0)) }.joined(separator: " ")
    }

    private static func tokenResponse(_ answer: TokenAnswer) -> Response {
        // `Response.json` already sends `Cache-Control: no-store` (RFC 6749 §5.1).
        var response = Response.json(answer)
        response.headers[HTTPField.Name("Pragma")!] = "no-cache"
        return response
    }

    struct TokenAnswer: Encodable {
        var access_token: String
        var token_type = "Bearer"
        var expires_in: Int64
        /// Only when one is issued (omitted from the JSON otherwise).
        var refresh_token: String?
        var id_token: String
        var scope: String
    }

    // MARK: UserInfo

    func userInfo(_ request: Request, context: AppRequestContext) async throws -> Response {
        do {
            return try await claims(request)
        } catch let error as StoreError {
            guard case .unavailable = error else { throw error }
            var response = Response.json(["error": "temporarily_unavailable", "error_description": "the database is not answering; try again"],
                                         status: .serviceUnavailable)
            response.headers[.retryAfter] = "5"
            return response
        }
    }

    private func claims(_ request: Request) async throws -> Response {
        guard let header = request.headers[.authorization], header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            return Self.bearerChallenge(nil)
        }
        let token = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard BearerSecret.isWellFormed(token),
              let found = try await dependencies.database.oidc.oidcAccessToken(tokenHash: BearerSecret.hash(token), now: dependencies.now())
        else {
            return Self.bearerChallenge("the access token is unknown, expired or revoked")
        }
        let (record, account) = found
        return .json(OIDCClaims.person(account, scopes: record.scope.split(separator: " ").map(String.init)))
    }

    /// 401 with RFC 6750's challenge: bare without a token, `invalid_token` with a bad one.
    private static func bearerChallenge(_ problem: String?) -> Response {
        var challenge = "Bearer realm=\"siwa\""
        var body: [String: String] = ["error": "invalid_request", "error_description": "an access token is required (Authorization: Bearer)"]
        if let problem {
            challenge += ", error=\"invalid_token\", error_description=\"\(problem)\""
            body = ["error": "invalid_token", "error_description": problem]
        }
        var response = Response.json(body, status: .unauthorized)
        response.headers[.wwwAuthenticate] = challenge
        return response
    }
}

/// A new access token and refresh token with their hashes (only the hashes are stored), made before the
/// store is asked so that its transaction holds no hashing.
private struct NewTokenPair {
    let access = BearerSecret.generate()
    let refresh = BearerSecret.generate()
    let accessHash: String
    let refreshHash: String

    init() {
        accessHash = BearerSecret.hash(access)
        refreshHash = BearerSecret.hash(refresh)
    }
}
