import AppleSignIn
import Logging
import Prometheus
import ServiceLifecycle
import SIWAStore

/// Notices that a person stopped using Sign in with Apple with this site even when Apple's
/// `consent-revoked` notification never arrives (no notification URL registered, or it was lost):
/// at most once a day per person it validates the stored refresh token with Apple
/// (`grant_type=refresh_token`). Apple's `invalid_grant` means the person revoked consent: their
/// sessions end and their Apple tokens are dropped, exactly as the notification would do.
///
/// Only `invalid_grant` is read as a revocation. Apple's 5xx, timeouts, refused connections and
/// malformed answers mean "ask again later", and other Apple errors (`invalid_client`, …) point at
/// our own configuration, so they stop the pass without touching anybody.
public struct ConsentCheckService: Service {
    /// The knobs, each with its default.
    public struct Configuration: Sendable {
        /// A person is checked again when their last check (or sign-in, which validates the token
        /// too) is older than this. Default one day.
        public var checkInterval: Int64 = 86_400
        /// People read from the database per query. Default 50.
        public var batchSize = 50
        /// The pause between two calls to Apple, which throttles bursts: the default of 500 ms
        /// (two calls a second) covers up to 172,800 people a day.
        public var callSpacing: Duration = .milliseconds(500)
        /// The wait before the first pass after start-up, so a restart (or many instances starting at
        /// once) does not begin with a burst. Default 60 s.
        public var startDelay: Duration = .seconds(60)
        /// The wait between passes once everybody due has been checked. Default 10 minutes.
        public var idleInterval: Duration = .seconds(600)
        /// How long a person whose check failed transiently waits before the next try. Default 1 hour.
        public var personRetryDelay: Int64 = 3_600
        /// Transient failures in a row after which Apple is taken to be down and the pass stops.
        public var outageThreshold = 3
        /// The first wait after a pass stopped early; it doubles up to ``maximumBackoff``.
        public var initialBackoff: Duration = .seconds(60)
        public var maximumBackoff: Duration = .seconds(3_600)

        public init() {}
    }

    /// What one pass did.
    public struct PassResult: Sendable, Equatable {
        /// Refresh tokens Apple accepted: consent is still given.
        public var valid = 0
        /// `invalid_grant`: sessions ended, tokens dropped.
        public var revoked = 0
        /// Validated recently by a sign-in, so recorded as checked without calling Apple.
        public var recentlyValidated = 0
        /// Transient failures: left as they were, tried again after `personRetryDelay`.
        public var deferred = 0
        /// Why the pass stopped before everybody due was checked (Apple down, our configuration
        /// rejected, the database unavailable); nil when it finished.
        public var stoppedEarly: String?

        public init() {}
    }

    /// People whose last check failed transiently, and when they may be tried again. Kept in memory:
    /// after a restart they are simply tried once more.
    public struct Schedule: Sendable {
        var retryAt: [String: Int64] = [:]

        public init() {}

        /// Whether `userID` waits for a retry at `now`.
        public func isWaiting(_ userID: String, now: Int64) -> Bool { (retryAt[userID] ?? .min) > now }

        mutating func prune(now: Int64) { retryAt = retryAt.filter { $0.value > now } }
    }

    let dependencies: SIWADependencies
    let logger: Logger
    let configuration: Configuration
    let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - dependencies: the web app's dependencies (database, Apple client, token cipher, metrics).
    ///   - now: the clock in Unix seconds; the dependencies' clock by default.
    public init(dependencies: SIWADependencies, logger: Logger, configuration: Configuration = Configuration(),
                now: (@Sendable () -> Int64)? = nil) {
        self.dependencies = dependencies
        self.logger = logger
        self.configuration = configuration
        self.now = now ?? dependencies.now
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var schedule = Schedule()
            var backoff = configuration.initialBackoff
            try await Task.sleep(for: configuration.startDelay)
            while !Task.isCancelled {
                let result = await runOnce(schedule: &schedule)
                if let reason = result.stoppedEarly {
                    logger.warning("consent check pass stopped early; backing off", metadata: [
                        "reason": .string(reason), "retryIn": .stringConvertible(backoff),
                    ])
                    try await Task.sleep(for: backoff)
                    backoff = min(backoff * 2, configuration.maximumBackoff)
                } else {
                    backoff = configuration.initialBackoff
                    try await Task.sleep(for: configuration.idleInterval)
                }
            }
        }
    }

    /// Checks everybody due now, one call at a time spaced by `callSpacing`, until nobody is due or
    /// the pass has to stop. Returns what it did.
    public func runOnce(schedule: inout Schedule) async -> PassResult {
        var result = PassResult()
        var transientInARow = 0
        // Guards against checking anybody twice in one pass, whatever the database returns.
        var seen = Set<String>()
        schedule.prune(now: now())
        do {
            while !Task.isCancelled {
                let start = now()
                // People waiting for a retry sort first (they are the oldest); asking for that many more
                // keeps them from filling the whole batch.
                let due = try await dependencies.database.usersDueForConsentCheck(
                    before: start - configuration.checkInterval, limit: configuration.batchSize + schedule.retryAt.count)
                let fresh = due.filter { !schedule.isWaiting($0.0.id, now: start) && !seen.contains($0.0.id) }
                if fresh.isEmpty { break }
                for (account, token) in fresh {
                    if Task.isCancelled { break }
                    seen.insert(account.id)
                    if let validatedAt = token.validatedAt, validatedAt >= start - configuration.checkInterval {
                        // The code exchange at a recent sign-in already proved the token good.
                        try await dependencies.database.markConsentChecked(userID: account.id, now: validatedAt)
                        result.recentlyValidated += 1
                        continue
                    }
                    switch await check(account, token) {
                    case .valid:
                        result.valid += 1
                        transientInARow = 0
                    case .revoked:
                        result.revoked += 1
                        transientInARow = 0
                    case .transient(let reason):
                        result.deferred += 1
                        schedule.retryAt[account.id] = now() + configuration.personRetryDelay
                        transientInARow += 1
                        if transientInARow >= configuration.outageThreshold {
                            result.stoppedEarly = "Apple failed \(transientInARow) checks in a row (last: \(reason))"
                            return result
                        }
                    case .configuration(let reason):
                        result.stoppedEarly = reason
                        return result
                    }
                    try await Task.sleep(for: configuration.callSpacing)
                }
            }
        } catch is CancellationError {
            result.stoppedEarly = "cancelled"
        } catch {
            result.stoppedEarly = "database: \(error)"
            logger.warning("consent check could not use the database", metadata: ["error": .string(String(describing: error))])
        }
        return result
    }

    enum Outcome: Equatable {
        case valid
        case revoked
        case transient(String)
        case configuration(String)
    }

    /// One person's check. Database errors propagate (they stop the pass); Apple's are classified.
    private func check(_ account: UserAccount, _ token: AppleTokenRecord) async -> Outcome {
        let refreshToken: String
        do {
            refreshToken = try dependencies.cipher.open(token.refreshToken, context: refreshTokenContext)
        } catch {
            // Nothing Apple could tell us; most likely TOKEN_ENCRYPTION_KEY changed. Retried later, never revoked.
            logger.error("stored Apple token does not decrypt (was TOKEN_ENCRYPTION_KEY changed?)",
                         metadata: ["user": .string(account.id)])
            record("undecryptable")
            return .transient("the stored token does not decrypt")
        }
        do {
            _ = try await dependencies.metrics.timeAppleCall("refresh") {
                try await dependencies.apple.refresh(refreshToken: refreshToken, clientID: token.clientID)
            }
            try await dependencies.database.markConsentChecked(userID: account.id, now: now())
            record("valid")
            return .valid
        } catch let error as AppleAPIError {
            if case .apple(let code, _, _) = error, code == "invalid_grant" {
                do {
                    // Matched by sub, like the notification; a concurrent transfer or deletion makes it a no-op.
                    _ = try await dependencies.database.revokeConsent(sub: account.appleSub)
                    try await dependencies.database.endOIDCGrants(sub: account.appleSub)
                } catch {
                    return .transient("database: \(error)")
                }
                record("revoked")
                logger.info("Apple consent revoked: sessions ended, tokens dropped", metadata: ["user": .string(account.id)])
                return .revoked
            }
            if case .apple = error {
                record("rejected")
                logger.error("Apple rejected the consent check", metadata: [
                    "error": .string(error.description), "hint": .string(error.operatorHint),
                ])
                return .configuration(error.description)
            }
            record("deferred")
            return .transient(error.description)
        } catch is CancellationError {
            return .transient("cancelled")
        } catch {
            record("deferred")
            return .transient(String(describing: error))
        }
    }

    private func record(_ result: String) {
        dependencies.metrics.registry.makeCounter(
            descriptor: MetricNameDescriptor(namespace: "siwa", metricName: "consent_checks", unitName: "total",
                                             helpText: "Daily consent checks by result"),
            labels: [("result", result)]
        ).increment()
    }
}
