import AppleSignIn
import Foundation
import Hummingbird
import PageTemplates
import Logging
import NIOCore
import SIWAStore

/// Turns every error into a clear answer: the error page (`data-page="error"`) for browsers, JSON
/// for the API routes. Bad input gets its 4xx; anything unexpected is logged (without secrets) and
/// answered 500 — which is a bug to fix, never a stack trace shown. (``SiteMiddleware`` calls it.)
struct ErrorPages: Sendable {
    let pages: PageRenderer
    let metrics: SIWAMetrics

    static let jsonPrefixes = ["/api/", "/auth/apple/native", "/auth/apple/notifications", "/oauth2/auth", "/oauth2/userinfo"]

    /// The answer to `error`, which stopped `request`.
    func response(for error: any Error, to request: Request, context: AppRequestContext) -> Response {
        let webError = Self.webError(for: error, logger: context.logger, path: request.uri.path)
        metrics.error(webError.kind)
        if Self.jsonPrefixes.contains(where: { request.uri.path.hasPrefix($0) }) {
            return Self.json(webError)
        }
        var view: TemplateView = [
            "status": .text(String(webError.status.code)), "message": .text(webError.message), "requestID": .text(context.id),
        ]
        if let hint = webError.hint { view["hint"] = .text(hint) }
        if let retry = webError.retryPath { view["retryPath"] = .text(retry) }
        return pages.render(.error, title: webError.title, view: view, status: webError.status, headers: webError.headers)
    }

    static func json(_ error: WebError) -> Response {
        var headers = error.headers
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        let body = (try? JSONEncoder().encode(["error": error.kind, "message": error.message])) ?? Data()
        return Response(status: error.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func webError(for error: any Error, logger: Logger, path: String) -> WebError {
        switch error {
        case let error as WebError:
            return error
        case let error as StoreError:
            if case .unavailable = error {
                logger.warning("database unavailable", metadata: ["path": .string(LogSafe.text(path))])
                return .storeUnavailable
            }
            logger.error("storage error", metadata: ["path": .string(LogSafe.text(path)), "error": .string(LogSafe.text(String(describing: error), limit: 500))])
            return WebError(.internalServerError, kind: "internal", title: "Something went wrong",
                            message: "An unexpected error stopped this request. Nothing was lost; please try again.", retryPath: "/")
        case is NIOTooManyBytesError:
            // `collectBody(upTo:)` past its limit.
            return WebError(.contentTooLarge, kind: "too_large", title: "That request was too large",
                            message: "The request body is larger than this service accepts.")
        case let error as HTTPError:
            switch error.status {
            case .notFound:
                return WebError(.notFound, kind: "not_found", title: "Page not found", message: "There is nothing at this address.", retryPath: "/")
            case .contentTooLarge:
                return WebError(.contentTooLarge, kind: "too_large", title: "That request was too large",
                                message: "The request body is larger than this service accepts.")
            case .methodNotAllowed:
                return WebError(.methodNotAllowed, kind: "method_not_allowed", title: "Not allowed",
                                message: "This address does not accept that kind of request.", retryPath: "/")
            default:
                return WebError(error.status, kind: "http_\(error.status.code)", title: "That request could not be used",
                                message: error.body ?? error.status.reasonPhrase, retryPath: "/")
            }
        default:
            logger.error("unexpected error", metadata: ["path": .string(LogSafe.text(path)), "error": .string(String(describing: type(of: error)))])
            return WebError(.internalServerError, kind: "internal", title: "Something went wrong",
                            message: "An unexpected error stopped this request. Nothing was lost; please try again.", retryPath: "/")
        }
    }
}
