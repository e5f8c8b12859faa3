import CurlHTTP
import Foundation
import Hummingbird
import PageTemplates
import SIWAStore

// OpenID Connect RP-Initiated Logout 1.0 (SPEC §11): the `end_session_endpoint`. A relying party sends the
// person here (GET or a form POST, §2) to sign out of siwa too. A hint siwa signed whose `sub` is the signed-in
// person (and whose `sid`, when present, is this browser's session) ends the session at once; anything less
// asks first, on a page whose button is a CSRF-protected POST, so that a link or an image can never sign
// anybody out. The person goes back only to a `post_logout_redirect_uri` registered for the client the
// request identified, with `state` (§3); otherwise to siwa's sign-in page, saying they are signed out.

extension OIDCProviderController {
    /// `GET|POST /oidc/logout`. A POST carrying `csrf` is the confirmation page's button.
    func logout(_ request: Request, context: AppRequestContext) async throws -> Response {
        let pairs = try await Self.formOrQuery(request, unreadable: Self.unusableLogout)
        let parameters = OIDCParameters(pairs)
        // The confirmation's button is a POST; a GET carrying a csrf field confirms nothing.
        let confirmation = request.method == .post ? parameters.values["csrf"] : nil
        let now = dependencies.now()
        let logout: OIDCLogoutRequest
        switch OIDCLogoutRequest.validate(parameters, clients: provider.clients, issuer: provider.issuer,
                                          keys: try await signingKeys(), now: now) {
        case .errorPage(let message):
            context.logger.notice("OIDC logout refused", metadata: ["reason": .string(message)])
            throw Self.unusableLogout(message)
        case .valid(let valid):
            logout = valid
        }

        guard let session = try await dependencies.webSession(for: request) else {
            // Nothing to end here (§2 leaves it to the OP): back to the client, or the signed-out page.
            return signedOut(logout)
        }
        if let confirmation {
            guard dependencies.csrf.isValid(confirmation, for: session.tokenHash) else { throw WebError.csrf }
            return try await end(session, logout, context: context, confirmed: true)
        }
        if let hint = logout.hint, hint.sub == session.account.id, hint.sid.map({ $0 == Self.sid(for: session.tokenHash) }) ?? true {
            return try await end(session, logout, context: context, confirmed: false)
        }
        // No hint, one siwa did not sign, or one for another person or another session: ask (§2, §6).
        var view: TemplateView = [
            "name": .text(session.account.displayName ?? session.account.email ?? "your account"),
            "csrf": .text(dependencies.csrf.token(for: session.tokenHash)),
        ]
        if let client = logout.client {
            view["clientName"] = .text(client.name)
            view["clientID"] = .text(client.clientID)
        }
        if let uri = logout.postLogoutRedirectURI { view["postLogoutRedirectURI"] = .text(uri) }
        if let state = logout.state { view["state"] = .text(state) }
        var response = dependencies.pages.render(.logoutConfirm, title: "Sign out?", view: view)
        if let cookie = dependencies.sessionCookieRefresh(session) { response.setCookie(cookie) }
        return response
    }

    /// Ends the browser's session (as the account page's sign-out does) and sends the person on.
    private func end(_ session: SignedInSession, _ logout: OIDCLogoutRequest, context: AppRequestContext, confirmed: Bool) async throws -> Response {
        try await dependencies.database.sessions.deleteSession(tokenHash: session.tokenHash)
        dependencies.metrics.sessionsEnded(.signOut)
        context.logger.info("signed out by an OpenID relying party", metadata: [
            "user": .string(session.account.id), "client": .string(logout.client?.clientID ?? "-"),
            "confirmed": .stringConvertible(confirmed),
        ])
        return signedOut(logout)
    }

    private func signedOut(_ logout: OIDCLogoutRequest) -> Response {
        var response = Response.seeOther(logout.signedOutLocation)
        response.setCookie(dependencies.cookies.clearedSession)
        return response
    }

    /// The request's parameters: the form of a POST (which must be `application/x-www-form-urlencoded`), else
    /// the query; `unreadable` makes the error page for a request that cannot be read.
    static func formOrQuery(_ request: Request, unreadable: (String) -> WebError) async throws -> [(String, String)] {
        let pairs: [(String, String)]?
        if request.method == .post {
            let contentType = request.headers[.contentType]?.lowercased() ?? ""
            guard contentType.hasPrefix("application/x-www-form-urlencoded") else {
                throw unreadable("The request was not sent as a form.")
            }
            var request = request
            pairs = PercentEncoding.formPairs(String(buffer: try await request.collectBody(upTo: FormBody.limit)))
        } else {
            pairs = PercentEncoding.formPairs(request.uri.query ?? "")
        }
        guard let pairs else { throw unreadable("The request could not be read (malformed percent-encoding).") }
        return pairs
    }

    /// The error page for a sign-out request that cannot be followed: never a redirect (no open redirect).
    static func unusableLogout(_ message: String) -> WebError {
        WebError(.badRequest, kind: "oidc_logout_invalid", title: "This sign-out link cannot be used", message: message,
                 hint: "Nothing was changed. To sign out of this site, use your account page; if it keeps happening, the application is not set up correctly with this site.",
                 retryPath: nil)
    }
}
