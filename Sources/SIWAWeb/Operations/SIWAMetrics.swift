import Prometheus

/// The service's Prometheus metrics. Each application owns its registry (no global bootstrap), so
/// tests that build many apps in one process do not share counters.
public struct SIWAMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
    }

    /// How sign-ins end: `new_account`, `returning`, `recovery`, `profile_form`, `cancelled`, `failed`.
    func signIn(_ outcome: String, channel: String = "web") {
        registry.makeCounter(name: "siwa_sign_ins_total", labels: [("outcome", outcome), ("channel", channel)],
                             help: "Sign-ins by outcome").increment()
    }

    /// Errors shown to people or clients, by kind (the WebError kind).
    func error(_ kind: String) {
        registry.makeCounter(name: "siwa_errors_total", labels: [("kind", kind)], help: "Errors by kind").increment()
    }

    /// Latency of a call to Apple, by endpoint and result.
    func appleCall(_ endpoint: String, result: String, duration: Duration) {
        registry.makeDurationHistogram(
            name: "siwa_apple_call_duration_seconds", labels: [("endpoint", endpoint), ("result", result)],
            buckets: [.milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
                      .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10)],
            help: "Latency of calls to Apple"
        ).record(duration)
    }

    func revocations(pending: Int, failing: Int) {
        registry.makeGauge(name: "siwa_revocations_pending", help: "Revocations waiting for Apple").set(Double(pending))
        registry.makeGauge(name: "siwa_revocations_failing", help: "Pending revocations that failed at least once").set(Double(failing))
    }

    func revocationAttempt(_ result: String) {
        registry.makeCounter(name: "siwa_revocation_attempts_total", labels: [("result", result)], help: "Revocation calls to Apple").increment()
    }

    func notification(_ type: String, result: String) {
        registry.makeCounter(name: "siwa_notifications_total", labels: [("type", type), ("result", result)],
                             help: "Server-to-server notifications").increment()
    }

    func rateLimited(_ route: String) {
        registry.makeCounter(name: "siwa_rate_limited_total", labels: [("route", route)], help: "Requests refused by the rate limit").increment()
    }

    /// Times `body` as a call to Apple's `endpoint`.
    func timeAppleCall<T>(_ endpoint: String, _ body: () async throws -> T) async throws -> T {
        let start = ContinuousClock.now
        do {
            let value = try await body()
            appleCall(endpoint, result: "ok", duration: ContinuousClock.now - start)
            return value
        } catch {
            appleCall(endpoint, result: "error", duration: ContinuousClock.now - start)
            throw error
        }
    }
}
