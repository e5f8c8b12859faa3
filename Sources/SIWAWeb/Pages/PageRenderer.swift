import Foundation
import Hummingbird
import Mustache

/// The kinds of page, carried on `<body data-page="…">` (SPEC §3).
public enum PageKind: String, Sendable {
    case signin, account, recovery, profile, error, deleted
}

/// Renders the Mustache templates in `templates/`, loaded once at start-up.
public struct PageRenderer: Sendable {
    let library: MustacheLibrary
    let siteName: String

    /// Loads every template; fails at start-up (not at the first request) when one is missing.
    public init(templatesDirectory: String, siteName: String) async throws {
        self.library = try await MustacheLibrary(directory: templatesDirectory)
        self.siteName = siteName
        for kind in [PageKind.signin, .account, .recovery, .profile, .error, .deleted] {
            guard library.getTemplate(named: kind.rawValue) != nil else {
                throw ConfigurationError("templates", "directory \(templatesDirectory) has no \(kind.rawValue).mustache")
            }
        }
    }

    /// Renders `kind`'s template with `view`; every page also sees `page`, `siteName` and `title`.
    func render(_ kind: PageKind, title: String, view: [String: Any] = [:], status: HTTPResponse.Status = .ok,
                headers: HTTPFields = [:]) -> Response {
        var context = view
        context["page"] = kind.rawValue
        context["title"] = title
        context["siteName"] = siteName
        let html = library.render(context, withTemplate: kind.rawValue) ?? ""
        var fields = headers
        fields[.contentType] = "text/html; charset=utf-8"
        fields[.cacheControl] = "no-store"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}

