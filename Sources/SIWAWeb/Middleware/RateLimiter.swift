import Hummingbird

/// Per-client-IP request counting in fixed one-minute windows. Memory is bounded: windows older
/// than the current one are dropped, and past `maximumClients` the oldest entries go first.
actor RateLimiter {
    struct Window { var minute: Int64; var count: Int }
    let limitPerMinute: Int
    let maximumClients: Int
    private var windows: [String: Window] = [:]
    private let now: @Sendable () -> Int64

    init(limitPerMinute: Int, maximumClients: Int = 100_000, now: @escaping @Sendable () -> Int64) {
        self.limitPerMinute = limitPerMinute
        self.maximumClients = maximumClients
        self.now = now
    }

    /// nil when allowed; else the seconds until the client may try again.
    func check(_ client: String) -> Int64? {
        let time = now()
        let minute = time / 60
        var window = windows[client] ?? Window(minute: minute, count: 0)
        if window.minute != minute { window = Window(minute: minute, count: 0) }
        window.count += 1
        if windows.count >= maximumClients, windows[client] == nil {
            windows = windows.filter { $0.value.minute == minute }
            if windows.count >= maximumClients { windows.removeAll(keepingCapacity: true) }
        }
        windows[client] = window
        guard window.count > limitPerMinute else { return nil }
        return max(1, (minute + 1) * 60 - time)
    }
}

/// Applies the limit to the sign-in endpoints (SPEC §2 RATE_LIMIT_PER_MINUTE), answering 429 with
/// `Retry-After`.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    static let limitedPaths: Set<String> = ["/auth/apple", "/auth/apple/callback", "/auth/apple/native"]
    let limiter: RateLimiter
    let metrics: SIWAMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard Self.limitedPaths.contains(path), let retryAfter = await limiter.check(context.clientIP) else {
            return try await next(request, context)
        }
        metrics.rateLimited(path)
        throw WebError(.tooManyRequests, kind: "rate_limited", title: "Too many attempts",
                       message: "There have been too many sign-in attempts from your network. Please wait a moment.",
                       hint: "Try again in \(retryAfter) seconds.", retryPath: "/",
                       headers: [.retryAfter: String(retryAfter)])
    }
}
