import Hummingbird

/// Resolves who sent each request (SPEC §9) before anything else looks at it.
struct RequestOriginMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let trustedProxies: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.origin = trustedProxies.origin(peer: context.remoteAddress?.ipAddress, headers: request.headers)
        return try await next(request, context)
    }
}
