import Hummingbird
import Synchronization

/// Counts events per key in fixed windows (a minute for the rate limit, ten minutes for sign-ins
/// started per client). Memory is bounded: windows older than the current one are dropped, and
/// past `maximumKeys` the oldest entries go first. A lock, not an actor: a check is a dictionary
/// update, and an actor made every limited request hop to it and back.
final class RateLimiter: Sendable {
    struct Window { var index: Int64; var count: Int }
    let limit: Int
    let windowSeconds: Int64
    let maximumKeys: Int
    private let windows = Mutex<[String: Window]>([:])
    private let now: @Sendable () -> Int64

    init(limit: Int, windowSeconds: Int64 = 60, maximumKeys: Int = 100_000, now: @escaping @Sendable () -> Int64) {
        self.limit = limit
        self.windowSeconds = windowSeconds
        self.maximumKeys = maximumKeys
        self.now = now
    }

    /// Counts one event for `key`: nil when within the limit; else the seconds until the window ends.
    func check(_ key: String) -> Int64? {
        let time = now()
        let index = time / windowSeconds
        let count = windows.withLock { windows -> Int in
            var window = windows[key] ?? Window(index: index, count: 0)
            if window.index != index { window = Window(index: index, count: 0) }
            window.count += 1
            if windows.count >= maximumKeys, windows[key] == nil {
                windows = windows.filter { $0.value.index == index }
                if windows.count >= maximumKeys { windows.removeAll(keepingCapacity: true) }
            }
            windows[key] = window
            return window.count
        }
        guard count > limit else { return nil }
        return max(1, (index + 1) * windowSeconds - time)
    }
}

/// Applies `RATE_LIMIT_PER_MINUTE` (SPEC §2, §9) to the routes a controller adds after it, answering 429
/// with `Retry-After`. It runs after routing, so the bucket is the route as the router matched it
/// (`/auth/apple/`, `//auth/apple` and `/auth/apple` are one route), per client address behind any
/// trusted proxy (IPv6 grouped by /64).
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    /// nil when the limit is off.
    let limiter: RateLimiter?
    let metrics: SIWAMetrics
    /// One budget for several routes (the sign-in starts `/auth/apple` and `/oauth2/start`); nil: per route.
    var bucket: String?

    /// The same limiter, counting `routes` in one budget named `bucket`.
    func sharing(_ bucket: String) -> RateLimitMiddleware {
        RateLimitMiddleware(limiter: limiter, metrics: metrics, bucket: bucket)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let limiter else { return try await next(request, context) }
        let route = bucket ?? context.endpointPath ?? request.uri.path
        guard let retryAfter = limiter.check(route + " " + context.origin.client.limitKey) else {
            return try await next(request, context)
        }
        metrics.rateLimited(route)
        throw WebError(.tooManyRequests, kind: "rate_limited", title: "Too many attempts",
                       message: "There have been too many sign-in attempts from your network. Please wait a moment.",
                       hint: "Try again in \(retryAfter) seconds.", retryPath: "/",
                       headers: [.retryAfter: String(retryAfter)])
    }
}

extension RouteCollection<AppRequestContext> {
    /// The routes added after this call count against `limit`; with the limit off, no middleware is added.
    func limited(by limit: RateLimitMiddleware) -> RouteCollection<AppRequestContext> {
        limit.limiter == nil ? self : add(middleware: limit)
    }
}
