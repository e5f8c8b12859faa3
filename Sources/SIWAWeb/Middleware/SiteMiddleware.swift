import AppleSignIn
import Hummingbird
import Logging

/// The one middleware in front of every route, doing in order what used to be six layers:
/// 1. who sent the request (SPEC §9: the client behind any trusted proxy), before anything looks at it;
/// 2. a debug-level log line for the request;
/// 3. the route, or — when no route answers (404) — a file from `Public/`;
/// 4. any error turned into its page or JSON (``ErrorPages``);
/// 5. the security headers on whatever goes out (``SecurityHeaders``), error pages included.
///
/// Each step is a plain call. Every middleware layer is an async frame and a generic hop of its own,
/// and on a server that is mostly idle between requests each costs a request ~10 µs of cold caches:
/// six layers were ~7 % of a sign-in at 16 browsers (`siwa loadtest`, see README "Performance").
struct SiteMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let trustedProxies: TrustedProxies
    let securityHeaders: SecurityHeaders
    let errorPages: ErrorPages
    let files: PublicFiles

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.origin = trustedProxies.origin(remoteAddress: context.remoteAddress, headers: request.headers)
        context.logger.debug("Request", metadata: [
            "hb.request.method": .string(request.method.rawValue), "hb.request.path": .string(LogSafe.text(request.uri.path)),
        ])
        var response: Response
        do {
            response = try await files.handle(request, context: context, next: next)
        } catch {
            response = errorPages.response(for: error, to: request, context: context)
        }
        securityHeaders.apply(to: &response)
        return response
    }
}

/// The files of `Public/`, at the site's root and again under `/oauth2/static/`, which pages use:
/// behind the gateway only `/oauth2/` and `/auth/apple` reach siwa, and the app behind it owns every
/// other path. A file is served only where no route answers (Hummingbird's `FileMiddleware`).
struct PublicFiles: Sendable {
    static let gatewayPrefix = "/oauth2/static"
    private let atRoot: FileMiddleware<AppRequestContext, LocalFileSystem>
    private let underGateway: FileMiddleware<AppRequestContext, LocalFileSystem>

    init(directory: String) {
        let logger = Logger(label: "siwa.files")
        atRoot = FileMiddleware(directory, searchForIndexHtml: false, logger: logger)
        underGateway = FileMiddleware(directory, urlBasePath: Self.gatewayPrefix, searchForIndexHtml: false, logger: logger)
    }

    /// The route's answer, or on its 404 the file at the request's path.
    func handle(
        _ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response
    ) async throws -> Response {
        let files = request.uri.path.hasPrefix(Self.gatewayPrefix + "/") ? underGateway : atRoot
        return try await files.handle(request, context: context, next: next)
    }
}
