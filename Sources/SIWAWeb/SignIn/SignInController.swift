import CurlHTTP
import Foundation
import Hummingbird
import PageTemplates
import JOSE
import SIWAStore

/// `GET /` (the sign-in page) and `GET /auth/apple` (starts a sign-in at Apple).
struct SignInController: Sendable {
    let dependencies: SIWADependencies
    /// Pending authorizations live ten minutes (SPEC §3).
    static let pendingLifetime: Int64 = 600

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .get("/", use: signInPage)
            .limited(by: dependencies.signInStartLimit)
            .get("/auth/apple", use: start)
    }

    /// Gentle notices the sign-in page shows after a redirect, by `?notice=`.
    static let notices: [String: String] = [
        "cancelled": "You cancelled signing in with Apple. Nothing was shared; you can try again whenever you like.",
        "apple_error": "Apple could not complete the sign-in. Please try again.",
        "signed_out": "You are signed out.",
        "deleted": "Your account has been deleted.",
    ]

    func signInPage(_ request: Request, context: AppRequestContext) async throws -> Response {
        // Not a use that moves the session: /account, where this sends the person, touches it and re-sends the cookie.
        if try await dependencies.webSession(for: request, touch: false) != nil {
            return .seeOther("/account")
        }
        return page(request, startPath: "/auth/apple")
    }

    /// The sign-in page whose button opens `startPath` (the gateway's carries `rd`).
    func page(_ request: Request, startPath: String) -> Response {
        var view: TemplateView = ["startPath": .text(startPath)]
        if let key = request.uri.queryParameters.get("notice"), let notice = Self.notices[key] {
            view["notice"] = .text(notice)
        }
        return dependencies.pages.render(.signin, title: "Sign in", view: view)
    }

    /// `path`, with `?rd=` when there is a return target.
    static func startPath(_ path: String, _ target: ReturnTarget?) -> String {
        guard let target else { return path }
        return path + "?rd=" + PercentEncoding.encode(target.location)
    }

    /// `GET /auth/apple[?rd=]` and the gateway's `GET /oauth2/start?rd=`: one handler, one rate-limit
    /// budget, one sign-in cap and one navigation check for both.
    func start(_ request: Request, context: AppRequestContext) async throws -> Response {
        let configuration = dependencies.configuration
        // `rd` first: a refused one stops here, before any cookie or row exists (SPEC §10). The
        // gateway's start returns to the site's root when it names nothing.
        let returnTo = try dependencies.returnTarget(request)?.location
            ?? (context.endpointPath?.hasPrefix("/oauth2/") == true ? "/" : nil)
        // One binding value per browser: reusing it lets two tabs sign in at once.
        let existing = request.cookieValue(dependencies.cookies.bindingName)
        let binding = existing.flatMap { BearerSecret.isWellFormed($0) ? $0 : nil } ?? BearerSecret.generate()
        let now = dependencies.now()
        // Only a top-level navigation starts a sign-in (SPEC §9): an <img>, <script> or fetch() of
        // this URL embedded in someone else's page must not fill the table for its visitors.
        if let mode = request.headers[.secFetchMode], mode.lowercased() != "navigate" {
            throw WebError(.forbidden, kind: "not_a_navigation", title: "Sign-in must be opened as a page",
                           message: "A sign-in can only be started by opening this address in the browser, not from inside another page.",
                           retryPath: "/")
        }
        // Bounds the table against abandoned sign-ins: per client first, then for everyone; a full
        // table refuses new sign-ins clearly instead of growing until the disk fills.
        try await dependencies.signInCap.admit(context.origin, database: dependencies.database, now: now, context: context)
        let stateAndNonce = SecureRandom.tokens(2, byteCount: 32)
        let pending = PendingAuthorization(
            state: stateAndNonce[0], nonce: stateAndNonce[1],
            bindingHash: BearerSecret.hash(binding), createdAt: now, expiresAt: now + Self.pendingLifetime, consumedAt: nil,
            returnTo: returnTo
        )
        try await dependencies.database.sessions.insertPendingAuthorization(pending)
        let url = dependencies.apple.authorizeURL(clientID: configuration.clientID, redirectURI: configuration.redirectURI,
                                                 state: pending.state, nonce: pending.nonce)
        var response = Response.seeOther(url)
        response.setCookie(dependencies.cookies.binding(binding))
        return response
    }
}
