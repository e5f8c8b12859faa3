import Foundation
import Hummingbird
import PageTemplates
import SIWAStore

/// The form fields of sign-out and deletion.
struct AccountActionForm: Decodable, Sendable {
    var csrf: String?
    var confirm: String?
    /// Sign-out only: where to go afterwards (SPEC §10 `rd`).
    var rd: String?
}

/// The form of an account page's "Sign out" button on one of the person's sessions.
struct EndSessionForm: Decodable, Sendable {
    var csrf: String?
    /// The row's opaque id (``AccountSessions/id(for:)``).
    var session: String?
}

/// `GET /account`, `POST /signout`, `POST /account/sessions/end`, `POST /account/delete`.
struct AccountController: Sendable {
    let dependencies: SIWADependencies

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .get("/account", use: account)
            .post("/signout", use: signOut)
            .post("/account/sessions/end", use: endSession)
            .post("/account/delete", use: delete)
    }

    /// Notices the account page shows after a redirect, by `?notice=`.
    static let notices: [String: String] = [
        "session_ended": "Signed out of that session.",
    ]

    func account(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let session = try await dependencies.webSession(for: request) else {
            return .seeOther("/")
        }
        let account = session.account
        var view: TemplateView = [
            "name": .text(account.displayName ?? "—"),
            "csrf": .text(dependencies.csrf.token(for: session.tokenHash)),
            "memberSince": .text(Self.dateText(account.createdAt)),
        ]
        if let email = account.email {
            view["email"] = .text(email)
            view["isPrivateEmail"] = .flag(account.isPrivateEmail)
            view["emailDisabled"] = .flag(account.emailDisabled)
        }
        if let problem = request.uri.queryParameters.get("problem"), problem == "confirm" {
            view["deleteProblem"] = .text("Tick the box to confirm that you want to delete your account.")
        }
        if let key = request.uri.queryParameters.get("notice"), let notice = Self.notices[key] {
            view["notice"] = .text(notice)
        }
        let now = dependencies.now()
        let sessions = try await dependencies.database.sessions.personSessions(userID: account.id, now: now)
        view["sessions"] = .list(AccountSessions.rows(sessions, currentTokenHash: session.tokenHash, now: now))
        var response = dependencies.pages.render(.account, title: "Your account", view: view)
        if let cookie = dependencies.sessionCookieRefresh(session) { response.setCookie(cookie) }
        return response
    }

    /// `POST /account/sessions/end` (CSRF-protected): ends one of the person's sessions, named by its row's id,
    /// and returns to the account page; ending the request's own session is a sign-out. An id that names none
    /// of the person's sessions (another person's, one already ended, made up) changes nothing: 404.
    func endSession(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await FormBody.decode(EndSessionForm.self, from: request)
        guard let session = try await dependencies.webSession(for: request) else { throw WebError.notSignedIn }
        guard dependencies.csrf.isValid(form.csrf, for: session.tokenHash) else { throw WebError.csrf }
        guard let id = form.session, !id.isEmpty else {
            throw WebError.badRequest("session_missing", "The form did not say which session to sign out of.")
        }
        let userID = session.account.id
        let sessions = try await dependencies.database.sessions.personSessions(userID: userID, now: dependencies.now())
        guard let chosen = AccountSessions.session(named: id, among: sessions),
              try await dependencies.database.sessions.endPersonSession(userID: userID, chosen.key)
        else { throw WebError.sessionNotFound }
        dependencies.metrics.sessionsEnded(.signOut)
        let isCurrent = AccountSessions.isCurrent(chosen, tokenHash: session.tokenHash)
        context.logger.info("session ended from the account page", metadata: [
            "user": .string(userID), "kind": .string(chosen.kind == .web ? "web" : "app"), "current": .stringConvertible(isCurrent),
        ])
        if isCurrent { return signedOutRedirect("/?notice=signed_out") }
        var response = Response.seeOther("/account?notice=session_ended")
        if let cookie = dependencies.sessionCookieRefresh(session) { response.setCookie(cookie) }
        return response
    }

    /// `POST /signout` (CSRF-protected), `rd` in the query or the form: 303 to it, else the sign-in page.
    func signOut(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await FormBody.decode(AccountActionForm.self, from: request)
        let location = try dependencies.returnTarget(request, form: form.rd)?.location ?? "/?notice=signed_out"
        guard let session = try await dependencies.webSession(for: request) else {
            return signedOutRedirect(location)
        }
        guard dependencies.csrf.isValid(form.csrf, for: session.tokenHash) else { throw WebError.csrf }
        try await dependencies.database.sessions.deleteSession(tokenHash: session.tokenHash)
        dependencies.metrics.sessionsEnded(.signOut)
        context.logger.info("signed out", metadata: ["user": .string(session.account.id)])
        return signedOutRedirect(location)
    }

    func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await FormBody.decode(AccountActionForm.self, from: request)
        guard let session = try await dependencies.webSession(for: request) else { throw WebError.notSignedIn }
        guard dependencies.csrf.isValid(form.csrf, for: session.tokenHash) else { throw WebError.csrf }
        guard form.confirm == "yes" else { return .seeOther("/account?problem=confirm") }
        do {
            try await dependencies.deleteAccount(session.account, revoke: true, logger: context.logger)
        } catch let refusal as UnreadableAppleTokens {
            throw WebError.unreadableTokens(refusal, retryPath: "/account")
        }
        context.logger.info("account deleted", metadata: ["user": .string(session.account.id)])
        var response = dependencies.pages.render(.deleted, title: "Account deleted")
        response.setCookie(dependencies.cookies.clearedSession)
        return response
    }

    private func signedOutRedirect(_ location: String) -> Response {
        var response = Response.seeOther(location)
        response.setCookie(dependencies.cookies.clearedSession)
        return response
    }

    private static let monthNames = ["January", "February", "March", "April", "May", "June", "July",
                                     "August", "September", "October", "November", "December"]

    /// "22 November 2026" (UTC) for seconds since 1970. Computed by hand (the days-to-civil-date
    /// algorithm of H. Hinnant): a `DateFormatter` per account page cost more than the rest of the page.
    static func dateText(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return "\(day) \(monthNames[Int(month) - 1]) \(year)"
    }
}

extension WebError {
    /// `POST /account/sessions/end` with an id that names none of the person's sessions.
    static let sessionNotFound = WebError(.notFound, kind: "session_not_found", title: "That session is not in your list",
                                          message: "It may have ended already, or it is not one of yours. Nothing was changed.",
                                          hint: "Go back to your account page to see where you are signed in.", retryPath: "/account")
}
