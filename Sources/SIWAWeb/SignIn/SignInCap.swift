import Hummingbird
import SIWAStore

/// Whether a new sign-in (a pending authorization or a native nonce) may start: the global
/// `MAX_PENDING_AUTHORIZATIONS` and, before it, the client's share (SPEC §9), so one client —
/// or an `<img src=/auth/apple>` spread over visitors' pages — cannot switch sign-in off for everyone.
struct SignInCap: Sendable {
    let total: PendingAuthorizationCap
    /// Starts per client address (IPv6 /64) per ten minutes, the life of a pending authorization; nil when off.
    let perClient: RateLimiter?

    init(configuration: SIWAConfiguration, now: @escaping @Sendable () -> Int64) {
        total = PendingAuthorizationCap(limit: configuration.maximumPendingAuthorizations)
        let limit = Self.perClientLimit(configured: configuration.maximumPendingAuthorizationsPerClient,
                                        total: configuration.maximumPendingAuthorizations)
        perClient = limit.map { RateLimiter(limit: $0, windowSeconds: 600, now: now) }
    }

    /// The share of the global cap one client may hold: what the operator set, but never more than a
    /// tenth of `MAX_PENDING_AUTHORIZATIONS` (at least 1), so whatever the two settings say, one client
    /// cannot use up the table (SPEC §9). nil when the operator turned it off (0: a load test from one
    /// address).
    static func perClientLimit(configured: Int, total: Int) -> Int? {
        guard configured > 0 else { return nil }
        return min(configured, max(1, total / 10))
    }

    /// Throws the page (or JSON) that says why not.
    func admit(_ origin: RequestOrigin, database: SIWADatabase, now: Int64, context: AppRequestContext) async throws {
        if let perClient, let retryAfter = perClient.check(origin.client.limitKey) {
            context.logger.notice("sign-in cap per client reached", metadata: ["client": .string(origin.client.description)])
            throw WebError(.tooManyRequests, kind: "too_many_sign_ins_from_client", title: "Too many sign-ins started",
                           message: "Many sign-ins have been started from your network and not finished. Please wait a few minutes.",
                           hint: "Try again in \(retryAfter) seconds.", retryPath: "/", headers: [.retryAfter: String(retryAfter)])
        }
        let decision = try await total.admit { try await database.sessions.countPendingAuthorizations(now: now) }
        guard decision.admitted else {
            context.logger.warning("too many sign-ins in progress", metadata: ["pending": .stringConvertible(decision.pending)])
            throw WebError.tooManySignIns
        }
    }
}
