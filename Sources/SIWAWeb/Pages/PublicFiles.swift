import Foundation
import Hummingbird
import Logging

/// The files of `Public/` as routes: `GET` and `HEAD` for each entry at the folder's top
/// (`/favicon.svg`, `/css/**`), at the site's root and again under `/oauth2/static/`, which pages use —
/// behind the gateway only `/oauth2/` and `/auth/apple` reach siwa, and the app behind it owns every
/// other path. Each is answered by Hummingbird's `FileMiddleware` (`ETag`, `Last-Modified`,
/// `If-None-Match`, `If-Modified-Since`), without ranges: it answered `Range: bytes=5000-` on a 721-byte
/// file with 206 and `Content-Length: -4279`, and `bytes=-100` with the first 101 bytes, so the `Range`
/// field is dropped and the whole file sent (a server may ignore a range, RFC 9110 §14.2).
///
/// Routes rather than a middleware: a middleware sits in front of every request, and a file was
/// served only after the router had failed with a thrown 404. The folder's top is listed at start-up;
/// what lies under a listed folder is found per request.
enum PublicFiles {
    static let gatewayPrefix = "/oauth2/static"

    static func routes(directory: String) -> RouteCollection<AppRequestContext> {
        let routes = RouteCollection(context: AppRequestContext.self)
        let logger = Logger(label: "siwa.files")
        // `/favicon.svg` for a file, `/css/**` for a folder.
        let paths = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
            .filter { !$0.hasPrefix(".") }
            .map { entry in
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: directory + "/" + entry, isDirectory: &isFolder)
                return "/" + entry + (isFolder.boolValue ? "/**" : "")
            }
        for (prefix, files) in [
            ("", FileMiddleware<AppRequestContext, LocalFileSystem>(directory, searchForIndexHtml: false, logger: logger)),
            (gatewayPrefix, FileMiddleware(directory, urlBasePath: gatewayPrefix, searchForIndexHtml: false, logger: logger)),
        ] {
            for path in paths.map({ prefix + $0 }) {
                for method in [HTTPRequest.Method.get, .head] {
                    routes.on(RouterPath(path), method: method) { request, context in
                        var head = request.head
                        head.headerFields[.range] = nil
                        // The middleware serves a file when what comes after it answers 404.
                        return try await files.handle(Request(head: head, body: request.body), context: context) { _, _ in
                            throw HTTPError(.notFound)
                        }
                    }
                }
            }
        }
        return routes
    }
}
