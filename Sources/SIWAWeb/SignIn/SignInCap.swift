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
        let limit = configuration.maximumPendingAuthorizationsPerClient
        perClient = limit > 0 ? RateLimiter(limit: limit, windowSeconds: 600, now: now) : nil
    }

    /// Throws the page (or JSON) that says why not.
    func admit(_ origin: RequestOrigin, database: SIWADatabase, now: Int64, context: AppRequestContext) async throws {
        if let perClient, let retryAfter = perClient.check(origin.client.limitKey) {
            context.logger.notice("sign-in cap per client reached", metadata: ["client": .string(origin.client.description)])
            throw WebError(.tooManyRequests, kind: "too_many_sign_ins_from_client", title: "Too many sign-ins started",
                           message: "Many sign-ins have been started from your network and not finished. Please wait a few minutes.",
                           hint: "Try again in \(retryAfter) seconds.", retryPath: "/", headers: [.retryAfter: String(retryAfter)])
        }
        let decision = try await total.admit { try await database.countPendingAuthorizations(now: now) }
        guard decision.admitted else {
            context.logger.warning("too many sign-ins in progress", metadata: ["pending": .stringConvertible(decision.pending)])
            throw WebError.tooManySignIns
        }
    }
}
