import AppleSignIn
import Hummingbird
import Logging

/// The one middleware in front of every route, doing in order what used to be six layers:
/// 1. who sent the request (SPEC §9: the client behind any trusted proxy), resolved when a route asks;
/// 2. a debug-level log line for the request;
/// 3. the route (files from `Public/` are routes too: ``PublicFiles``);
/// 4. any error turned into its page or JSON (``ErrorPages``);
/// 5. the security headers on whatever goes out (``SecurityHeaders``), error pages included.
///
/// Each step is a plain call. Every middleware layer is an async frame and a generic hop of its own,
/// and on a server that is mostly idle between requests each costs a request ~10 µs of cold caches
/// (`siwa-loadtest` at 16 browsers, see docs/performance/).
struct SiteMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let trustedProxies: TrustedProxies
    let securityHeaders: SecurityHeaders
    let errorPages: ErrorPages

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.originSource = (trustedProxies, request.headers)
        context.logger.debug("Request", metadata: [
            "hb.request.method": .string(request.method.rawValue), "hb.request.path": .string(LogSafe.text(request.uri.path)),
        ])
        // The answered line (debug, like the request line: the clock is read only when it is written).
        let started: ContinuousClock.Instant? = context.logger.logLevel <= .debug ? .now : nil
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            response = errorPages.response(for: error, to: request, context: context)
        }
        if let started {
            let elapsed = ContinuousClock.now - started
            let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            context.logger.debug("Answered", metadata: [
                "route": .string(context.endpointPath ?? "(none)"), "status": .stringConvertible(response.status.code),
                "duration": .string(String((milliseconds * 1000).rounded() / 1000)),
            ])
        }
        // The gateway check's 202 and 401 go to the proxy, never to a browser: only what nginx needs.
        if !Self.isGatewayCheckAnswer(request, response) { securityHeaders.apply(to: &response) }
        return response
    }

    /// `/oauth2/auth`'s answer to the proxy's subrequest (issue 36): the identity headers or a refusal,
    /// which nginx reads and drops. Its 302 for Caddy and Traefik, and its error pages, do reach a
    /// browser and keep the security headers.
    static func isGatewayCheckAnswer(_ request: Request, _ response: Response) -> Bool {
        (response.status == .accepted || response.status == .unauthorized) && request.uri.path == "/oauth2/auth"
    }
}
