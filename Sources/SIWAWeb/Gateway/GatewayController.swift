import AppleSignIn
import CurlHTTP
import Foundation
import HTTPTypes
import Hummingbird
import SIWAStore

/// SPEC §10: Sign in with Apple in front of any web app, with oauth2-proxy's paths and headers, so
/// existing nginx `auth_request`, Caddy `forward_auth` and Traefik `ForwardAuth` set-ups work.
struct GatewayController: Sendable {
    let dependencies: SIWADependencies

    /// nginx's `auth_request` subrequest keeps the original request's method, so a POST to a
    /// protected page asks `/oauth2/auth` with POST: every method gets the same answer.
    static let authMethods: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete, .options]

    var endpoints: RouteCollection<AppRequestContext> {
        let routes = RouteCollection(context: AppRequestContext.self)
        for method in Self.authMethods { routes.on("/oauth2/auth", method: method, use: auth) }
        return routes
            .get("/oauth2/userinfo", use: userinfo)
            .get("/oauth2/sign_in", use: signInPage)
            .get("/oauth2/sign_out", use: signOut)
            .limited(by: dependencies.signInStartLimit)
            .get("/oauth2/start", use: SignInController(dependencies: dependencies).start)
    }

    static let userHeader = HTTPField.Name("X-Auth-Request-User")!
    static let emailHeader = HTTPField.Name("X-Auth-Request-Email")!
    static let nameHeader = HTTPField.Name("X-Auth-Request-Preferred-Username")!
    static let forwardedMethod = HTTPField.Name("X-Forwarded-Method")!

    /// `GET /oauth2/auth[?redirect=true]`: runs before every request of the protected app, so it
    /// only reads the session (no call to Apple), and writes only the hourly touch of a used session
    /// (SPEC §13), whose 202 then carries the session cookie with its new expiry for the proxy to pass on.
    /// A browser's session cookie or the iOS app's `Authorization: Bearer` token (SPEC §10) gets the same answer.
    func auth(_ request: Request, context: AppRequestContext) async throws -> Response {
        let identity = try await dependencies.gatewayIdentity(for: request)
        if case .signedIn(let session) = identity {
            dependencies.metrics.gatewayCheck(.allowed)
            var response = Response(status: .accepted, headers: Self.allowedFields(session.account))
            if let cookie = dependencies.sessionCookieRefresh(session) { response.setCookie(cookie) }
            return response
        }
        // An app's refused bearer is never sent to a sign-in page it could not follow.
        if case .anonymous = identity, request.uri.queryParameters.get("redirect") == "true",
           let target = signInRedirect(request, context: context) {
            dependencies.metrics.gatewayCheck(.redirected)
            return Response(status: .found, headers: [.location: target, .cacheControl: "no-store"])
        }
        dependencies.metrics.gatewayCheck(.denied)
        return Self.refusal(identity, method: request.method)
    }

    /// The 202's fields. All three identity headers, always, empty when unknown: a proxy that copies
    /// only the headers present would otherwise pass on a value the client sent itself.
    static func allowedFields(_ account: UserAccount) -> HTTPFields {
        [
            userHeader: headerValue(account.id),
            emailHeader: headerValue(account.email ?? ""),
            nameHeader: headerValue(account.displayName ?? ""),
            .cacheControl: "no-store",
        ]
    }

    /// The 401: JSON, but no body for HEAD; a refused bearer says so in `WWW-Authenticate` (RFC 6750 §3),
    /// which nginx's `auth_request` and Caddy's `forward_auth` pass on to the app.
    static func refusal(_ identity: GatewayIdentity, method: HTTPRequest.Method) -> Response {
        var response = method == .head ? Response(status: .unauthorized, headers: [.cacheControl: "no-store"]) : unauthorized
        if case .refusedBearer = identity { response.headers[.wwwAuthenticate] = Self.invalidBearerChallenge }
        return response
    }

    static let invalidBearerChallenge = #"Bearer error="invalid_token""#

    static var unauthorized: Response { .json(["error": "not_signed_in"], status: .unauthorized) }

    /// For `?redirect=true` (Caddy, Traefik): where an unauthenticated person goes, or nil when this
    /// is not a top-level GET from a trusted proxy naming an allowed URL (then: 401).
    func signInRedirect(_ request: Request, context: AppRequestContext) -> String? {
        guard context.origin.viaTrustedProxy, let forwarded = context.origin.forwarded,
              let proto = forwarded.proto, proto == "http" || proto == "https",
              let host = forwarded.host, !host.isEmpty, let uri = forwarded.uri, uri.hasPrefix("/")
        else { return nil }
        // The original request: a GET (Caddy and Traefik send X-Forwarded-Method; nginx keeps the method),
        // and a page the person opened — not a fetch() or an image, which cannot follow a sign-in.
        let method = request.headers[Self.forwardedMethod]?.uppercased() ?? request.method.rawValue
        guard method == "GET" || method == "HEAD", request.method == .get || request.method == .head else { return nil }
        if let mode = request.headers[.secFetchMode], mode.lowercased() != "navigate" { return nil }
        let policy = dependencies.configuration.returnTargetPolicy
        let original = "\(proto)://\(host)\(uri)"
        let target: ReturnTarget
        switch ReturnTarget.validate(original, policy: policy) {
        case .success(let valid):
            target = valid
        case .failure(let refusal):
            // A URL `rd` cannot carry (e.g. an encoded space, which SPEC §10 refuses in any `rd`) on an
            // allowed host: the person still signs in, and lands on the site's root.
            guard case .success(let root) = ReturnTarget.validate("\(proto)://\(host)/", policy: policy) else {
                context.logger.warning("forward-auth: the original URL is not an allowed return target (add its host to ALLOWED_REDIRECT_HOSTS?)",
                                       metadata: ["host": .string(LogSafe.text(host, limit: 64)), "refusal": .string("\(refusal)")])
                return nil
            }
            context.logger.notice("forward-auth: the original URL cannot be a return target; returning to the site's root",
                                  metadata: ["refusal": .string("\(refusal)")])
            target = root
        }
        return dependencies.configuration.publicURL + "/oauth2/start?rd=" + PercentEncoding.encode(target.location)
    }

    /// `GET /oauth2/userinfo`: who is signed in (browser cookie or app bearer, as for `/oauth2/auth`), as JSON;
    /// like the 202, it carries the session cookie again when its read moved the idle deadline.
    func userinfo(_ request: Request, context: AppRequestContext) async throws -> Response {
        let identity = try await dependencies.gatewayIdentity(for: request)
        guard case .signedIn(let session) = identity else { return Self.refusal(identity, method: request.method) }
        let account = session.account
        var response = Response.json(["user": account.id, "email": account.email ?? "", "preferredUsername": account.displayName ?? ""])
        // The same read as `/oauth2/auth`'s, so the same hourly touch: a browser's fetch gets the moved cookie.
        if let cookie = dependencies.sessionCookieRefresh(session) { response.setCookie(cookie) }
        return response
    }

    /// `GET /oauth2/sign_in?rd=`: the sign-in page, its button carrying `rd`; a signed-in person goes
    /// straight to `rd`.
    func signInPage(_ request: Request, context: AppRequestContext) async throws -> Response {
        let target = try dependencies.returnTarget(request)
        if try await dependencies.webSession(for: request, touch: false) != nil {
            return .seeOther(target?.location ?? "/")
        }
        return SignInController(dependencies: dependencies).page(request, startPath: SignInController.startPath("/oauth2/start", target))
    }

    /// `GET /oauth2/sign_out?rd=`: ends the session server-side, clears the cookie, 303 to `rd` or `/`.
    func signOut(_ request: Request, context: AppRequestContext) async throws -> Response {
        let target = try dependencies.returnTarget(request)
        try await dependencies.endSession(request, context: context)
        var response = Response.seeOther(target?.location ?? "/")
        response.setCookie(dependencies.cookies.clearedSession)
        return response
    }

    /// Names typed by people may hold anything; a header value may not hold control characters (Unicode's
    /// `Cc`: U+0000–U+001F, U+007F–U+009F), which become spaces. Most values hold none, and are returned as
    /// they are after one pass over their UTF-8 (U+0080–U+009F start with the byte 0xC2).
    static func headerValue(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 }) else { return value }
        return String(String.UnicodeScalarView(value.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : $0 }))
    }
}

extension SIWADependencies {
    /// The request's `rd` (query, or `form` for a POST), validated (SPEC §10): nil when absent or empty;
    /// anything refused throws the 400 page, before the caller does anything else.
    func returnTarget(_ request: Request, form: String? = nil) throws -> ReturnTarget? {
        var values = request.uri.queryParameters[values: "rd"].map(String.init)
        if let form { values.append(form) }
        values = values.filter { !$0.isEmpty }
        guard !values.isEmpty else { return nil }
        guard values.count == 1 else { throw WebError.badReturnTarget }
        switch ReturnTarget.validate(values[0], policy: configuration.returnTargetPolicy) {
        case .success(let target): return target
        case .failure: throw WebError.badReturnTarget
        }
    }

    /// Deletes the request's web session, if any (the caller clears the cookie).
    func endSession(_ request: Request, context: AppRequestContext) async throws {
        guard let token = sessionCookieToken(in: request.headers[values: .cookie]) else { return }
        let hash = BearerSecret.hash(token)
        if let (_, account) = try await database.sessions.session(tokenHash: hash, now: now()) {
            context.logger.info("signed out", metadata: ["user": .string(account.id)])
            metrics.sessionsEnded(.signOut)
        }
        try await database.sessions.deleteSession(tokenHash: hash)
    }
}

extension WebError {
    /// An `rd` that is not a path on this site or an allowed host: never followed (no open redirect).
    static let badReturnTarget = WebError(
        .badRequest, kind: "bad_return_target", title: "That return address is not allowed",
        message: "The address to return to after signing in is not on this site or a site it serves, so it was not used.",
        hint: "Open the page you wanted directly and sign in from there.", retryPath: "/")
}
