import Foundation
import Hummingbird
import PageTemplates

/// The kinds of page, carried on `<body data-page="…">` (SPEC §3).
public enum PageKind: String, Sendable {
    case signin, account, recovery, profile, error, deleted
    /// The OpenID provider's "Sign out of this site?" (RP-Initiated Logout without a valid hint).
    case logoutConfirm = "logout-confirm"
}

/// Renders the Mustache templates in `templates/`, parsed once at start-up.
public struct PageRenderer: Sendable {
    let library: TemplateLibrary
    let siteName: String

    /// Parses every template; fails at start-up (not at the first request) when one is missing or
    /// cannot be parsed.
    public init(templatesDirectory: String, siteName: String) throws {
        do {
            self.library = try TemplateLibrary(directory: templatesDirectory)
        } catch let error as TemplateError {
            throw ConfigurationError("templates", "\(templatesDirectory): \(error)")
        }
        self.siteName = siteName
        for kind in [PageKind.signin, .account, .recovery, .profile, .error, .deleted, .logoutConfirm] {
            guard library.contains(kind.rawValue) else {
                throw ConfigurationError("templates", "directory \(templatesDirectory) has no \(kind.rawValue).mustache")
            }
        }
    }

    /// Renders `kind`'s template with `view`; every page also sees `page`, `siteName` and `title`.
    func render(_ kind: PageKind, title: String, view: TemplateView = [:], status: HTTPResponse.Status = .ok,
                headers: HTTPFields = [:]) -> Response {
        var context = view
        context["page"] = .text(kind.rawValue)
        context["title"] = .text(title)
        context["siteName"] = .text(siteName)
        let html = library.render(kind.rawValue, context) ?? ""
        var fields = headers
        fields[.contentType] = "text/html; charset=utf-8"
        fields[.cacheControl] = "no-store"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
