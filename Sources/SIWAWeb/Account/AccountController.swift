import Foundation
import Hummingbird
import SIWAStore

/// The form fields of sign-out and deletion.
struct AccountActionForm: Decodable, Sendable {
    var csrf: String?
    var confirm: String?
}

/// `GET /account`, `POST /signout`, `POST /account/delete`.
struct AccountController: Sendable {
    let dependencies: SIWADependencies

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .get("/account", use: account)
            .post("/signout", use: signOut)
            .post("/account/delete", use: delete)
    }

    func account(_ request: Request, context: AppRequestContext) async throws -> Response {
        guard let session = try await dependencies.webSession(for: request) else {
            return .seeOther("/")
        }
        let account = session.account
        var view: [String: Any] = [
            "name": account.displayName ?? "—",
            "csrf": dependencies.csrf.token(for: session.tokenHash),
            "memberSince": Self.dateText(account.createdAt),
        ]
        if let email = account.email {
            view["email"] = email
            view["isPrivateEmail"] = account.isPrivateEmail
            view["emailDisabled"] = account.emailDisabled
        }
        if let problem = request.uri.queryParameters.get("problem"), problem == "confirm" {
            view["deleteProblem"] = "Tick the box to confirm that you want to delete your account."
        }
        return dependencies.pages.render(.account, title: "Your account", view: view)
    }

    func signOut(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await FormBody.decode(AccountActionForm.self, from: request)
        guard let session = try await dependencies.webSession(for: request) else {
            return signedOutRedirect("/?notice=signed_out")
        }
        guard dependencies.csrf.isValid(form.csrf, for: session.tokenHash) else { throw WebError.csrf }
        try await dependencies.database.deleteSession(tokenHash: session.tokenHash)
        context.logger.info("signed out", metadata: ["user": .string(session.account.id)])
        return signedOutRedirect("/?notice=signed_out")
    }

    func delete(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await FormBody.decode(AccountActionForm.self, from: request)
        guard let session = try await dependencies.webSession(for: request) else { throw WebError.notSignedIn }
        guard dependencies.csrf.isValid(form.csrf, for: session.tokenHash) else { throw WebError.csrf }
        guard form.confirm == "yes" else { return .seeOther("/account?problem=confirm") }
        try await dependencies.deleteAccount(session.account, revoke: true)
        context.logger.info("account deleted", metadata: ["user": .string(session.account.id)])
        var response = dependencies.pages.render(.deleted, title: "Account deleted")
        response.setCookie(Cookies.cleared(Cookies.sessionName, path: "/", secure: dependencies.configuration.isHTTPS))
        return response
    }

    private func signedOutRedirect(_ location: String) -> Response {
        var response = Response.seeOther(location)
        response.setCookie(Cookies.cleared(Cookies.sessionName, path: "/", secure: dependencies.configuration.isHTTPS))
        return response
    }

    static func dateText(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "d MMMM yyyy"
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
