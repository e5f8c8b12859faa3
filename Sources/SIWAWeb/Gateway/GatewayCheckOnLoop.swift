import HTTP1Server
import SIWAStore
import HTTPTypes
import NIOHTTP1

/// `/oauth2/auth` answered on the connection's event loop when the session cache already holds the
/// session (issue 36): the check runs before every request of a protected app, and a Task on the
/// cooperative pool, the router and the hop back to the event loop cost several times what the answer
/// does. The answer is the route's own (``GatewayController/allowedFields(_:)``, counted as `allowed`),
/// byte for byte but for the `Date` field; its fields are encoded once per cache entry.
///
/// Everything else goes to the route, unchanged: a cache miss (the route reads the database and fills the
/// cache), a refusal, `?redirect=true` or any other query, and every request while requests are logged
/// (the route's middleware writes their lines). The cache's own rules keep it honest: an entry lives
/// under a second, a session past `expires_at` is never a hit, and a sign-out, deletion or
/// `consent-revoked` empties it (``GatewaySessionCache``).
struct GatewayCheckOnLoop: EventLoopResponder {
    let dependencies: SIWADependencies
    /// Debug logging writes a line per request, which only the middleware does.
    let logsRequests: Bool

    /// ``GatewayController/authMethods`` as NIO names them (nginx's `auth_request` keeps the original method).
    static let methods = GatewayController.authMethods.map { HTTPMethod(rawValue: $0.rawValue) }

    func immediateResponse(to request: ImmediateRequest) -> ImmediateResponse? {
        guard !logsRequests, request.uri == "/oauth2/auth", Self.methods.contains(request.method),
              let entry = dependencies.cachedGatewaySession(authorization: request.values(of: "authorization"),
                                                            cookies: request.values(of: "cookie"))
        else { return nil }
        dependencies.metrics.gatewayCheck(.allowed)
        // Encoded once per read of the session (the cache's entry lives under a second), not per check.
        return ImmediateResponse(status: .accepted, fields: entry.allowedFields)
    }
}
