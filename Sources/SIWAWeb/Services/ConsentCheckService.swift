import AppleSignIn
import JOSE
import Logging
import Prometheus
import ServiceLifecycle
import SIWAStore

/// Notices that a person stopped using Sign in with Apple with this site even when Apple's
/// `consent-revoked` notification never arrives (no notification URL registered, or it was lost):
/// at most once a day per person it validates the stored refresh tokens with Apple
/// (`grant_type=refresh_token`; one per client id: the website's and the app's). Apple's
/// `invalid_grant` means the person revoked consent: when every token of the person gets it, their
/// sessions end and their Apple tokens are dropped, exactly as the notification would do; a token
/// refused while another is still good (an app not grouped with the website at Apple) is dropped alone.
///
/// Only `invalid_grant` is read as a revocation. Apple's 5xx, timeouts, refused connections and
/// malformed answers mean "ask again later", and other Apple errors (`invalid_client`, …) point at
/// our own configuration, so they stop the pass without touching anybody.
public struct ConsentCheckService: Service, CustomStringConvertible {
    /// Just the name (see ``RevocationWorker/description``).
    public var description: String { "ConsentCheckService" }

    /// The knobs, each with its default.
    public struct Configuration: Sendable {
        /// A person is checked again when their last check (or sign-in, which validates the token
        /// too) is older than this. Default one day (`CONSENT_CHECK_INTERVAL_SECONDS`).
        public var checkInterval: Int64 = 86_400
        /// People claimed from the database per query. Default 20.
        public var batchSize = 20
        /// How long a claim keeps other instances away from a person (a refresh token validated at most
        /// once per interval across instances). A batch can take longer than that (twenty people, two
        /// tokens each, each call up to `APPLE_TIMEOUT`), so the claim on a person is renewed for this
        /// long before each call to Apple: it only has to outlast one call (`CONSENT_CHECK_CLAIM_SECONDS`
        /// is at least `APPLE_TIMEOUT` + 2 s). Default 15 minutes; a claim left by an instance that died
        /// expires after it.
        public var claimLease: Int64 = 900
        /// The pause between two calls to Apple, which throttles bursts: the default of 500 ms
        /// (two calls a second) covers up to 172,800 people a day.
        public var callSpacing: Duration = .milliseconds(500)
        /// The wait before the first pass after start-up, so a restart (or many instances starting at
        /// once) does not begin with a burst. Default 60 s.
        public var startDelay: Duration = .seconds(60)
        /// The wait between passes once everybody due has been checked. Default 10 minutes
        /// (`CONSENT_CHECK_PASS_INTERVAL_SECONDS`).
        public var idleInterval: Duration = .seconds(600)
        /// How long a person whose check failed transiently waits before the next try. Default 1 hour.
        public var personRetryDelay: Int64 = 3_600
        /// Transient failures in a row after which Apple is taken to be down and the pass stops.
        public var outageThreshold = 3
        /// The first wait after a pass stopped early; it doubles up to ``maximumBackoff``.
        public var initialBackoff: Duration = .seconds(60)
        public var maximumBackoff: Duration = .seconds(3_600)

        public init() {}

        /// The defaults, with the interval, the pass interval and the claim from the site's settings.
        public init(_ site: SIWAConfiguration) {
            checkInterval = site.consentCheckInterval.components.seconds
            idleInterval = site.consentCheckPassInterval
            claimLease = site.consentCheckClaim.components.seconds
        }
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
        /// People whose claim another instance took (after it ran out) before this one was done with
        /// them: left to that instance, unrecorded here.
        public var claimsLost = 0
        /// Why the pass stopped before everybody due was checked (Apple down, our configuration
        /// rejected, the database unavailable); nil when it finished.
        public var stoppedEarly: String?

        public init() {}
    }

    let dependencies: SIWADependencies
    let logger: Logger
    let configuration: Configuration
    let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - dependencies: the web app's dependencies (database, Apple client, token cipher, metrics).
    ///   - configuration: the knobs; by default from the dependencies' settings.
    ///   - now: the clock in Unix seconds; the dependencies' clock by default.
    public init(dependencies: SIWADependencies, logger: Logger, configuration: Configuration? = nil,
                now: (@Sendable () -> Int64)? = nil) {
        self.dependencies = dependencies
        self.logger = logger
        self.configuration = configuration ?? Configuration(dependencies.configuration)
        self.now = now ?? dependencies.now
    }

    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var backoff = configuration.initialBackoff
            try await Task.sleep(for: configuration.startDelay)
            while !Task.isCancelled {
                let result = await runOnce()
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
    ///
    /// People are claimed from the database a batch at a time, so instances sharing it split the
    /// work and none validates a token another is validating or has validated within the interval.
    /// The claim on a person is renewed before each call to Apple (a person whose claim another
    /// instance took meanwhile is left to it); only the holder ends a claim: a check records it, a
    /// transient failure hands the person back for `personRetryDelay` (for every instance), a pass
    /// that stops early hands back the rest of its batch at once.
    public func runOnce() async -> PassResult {
        var result = PassResult()
        var transientInARow = 0
        // Guards against checking anybody twice in one pass, whatever the database returns.
        var seen = Set<String>()
        var unchecked: [String] = []
        let database = dependencies.database
        // Names this pass's claims: unique to it, so not even a later pass of this instance counts as their holder.
        let holder = dependencies.instanceID + "." + SecureRandom.token(byteCount: 6)
        do {
            while !Task.isCancelled {
                let start = now()
                let batch = try await database.apple.claimUsersForConsentCheck(
                    before: start - configuration.checkInterval, now: start,
                    claimUntil: start + configuration.claimLease, limit: configuration.batchSize, holder: holder)
                unchecked = batch.map(\.0.id)
                let fresh = batch.filter { !seen.contains($0.0.id) }
                if fresh.isEmpty { break }
                for (account, tokens) in fresh {
                    if Task.isCancelled { break }
                    seen.insert(account.id)
                    unchecked.removeAll { $0 == account.id }
                    if let validatedAt = tokens.compactMap(\.validatedAt).max(), validatedAt >= start - configuration.checkInterval {
                        // The code exchange at a recent sign-in already proved consent.
                        if try await database.apple.markConsentChecked(userID: account.id, now: validatedAt, holder: holder) {
                            result.recentlyValidated += 1
                        } else {
                            claimLost(account, &result)
                        }
                        continue
                    }
                    switch await check(account, tokens, holder: holder) {
                    case .valid:
                        result.valid += 1
                        transientInARow = 0
                    case .revoked:
                        result.revoked += 1
                        transientInARow = 0
                    case .claimLost:
                        claimLost(account, &result)
                        continue
                    case .transient(let reason):
                        result.deferred += 1
                        try await database.apple.releaseConsentClaim(userID: account.id, holder: holder,
                                                               until: now() + configuration.personRetryDelay)
                        transientInARow += 1
                        if transientInARow >= configuration.outageThreshold {
                            result.stoppedEarly = "Apple failed \(transientInARow) checks in a row (last: \(reason))"
                            await handBack(unchecked, holder: holder)
                            return result
                        }
                    case .configuration(let reason):
                        result.stoppedEarly = reason
                        await handBack(unchecked + [account.id], holder: holder)
                        return result
                    }
                    try await Task.sleep(for: configuration.callSpacing)
                }
                // Claimed again in this pass (already seen): back to the pool.
                await handBack(unchecked, holder: holder)
                unchecked = []
            }
        } catch is CancellationError {
            result.stoppedEarly = "cancelled"
            await handBack(unchecked, holder: holder)
        } catch {
            result.stoppedEarly = "database: \(error)"
            logger.warning("consent check could not use the database", metadata: ["error": .string(String(describing: error))])
        }
        return result
    }

    /// Claimed people this pass will not check: due again for any instance at once (those whose claim
    /// another instance holds now stay its own). If this fails, or the process dies, the claims simply expire.
    private func handBack(_ userIDs: [String], holder: String) async {
        // In a task of its own: called from a cancelled pass too (a shutdown), where SQLite's wait while another
        // writer holds the file would end at once and leave the people claimed until the claim runs out.
        let database = dependencies.database
        await Task {
            for userID in userIDs {
                _ = try? await database.apple.releaseConsentClaim(userID: userID, holder: holder, until: 0)
            }
        }.value
    }

    /// Another instance claimed the person after this pass's claim ran out: theirs to check and record.
    private func claimLost(_ account: UserAccount, _ result: inout PassResult) {
        result.claimsLost += 1
        record("claim_lost")
        logger.notice("consent-check claim lost: left to the instance that holds it now", metadata: ["user": .string(account.id)])
    }

    enum Outcome: Equatable {
        case valid
        case revoked
        case transient(String)
        case configuration(String)
        /// Another instance holds the person's claim now.
        case claimLost
    }

    /// One person's check over all their tokens (one call to Apple each, spaced like people are). Valid when
    /// any token is good (tokens Apple refused are then dropped alone); revoked when Apple refused every one.
    /// Before each call the claim is renewed for a whole `claimLease`, which outlasts the call; when another
    /// instance took it meanwhile, nothing more is asked or written.
    private func check(_ account: UserAccount, _ tokens: [AppleTokenRecord], holder: String) async -> Outcome {
        var refused: [AppleTokenRecord] = []
        var transient: String?
        var valid = false
        for (index, token) in tokens.enumerated() {
            if index > 0 { try? await Task.sleep(for: configuration.callSpacing) }
            do {
                guard try await dependencies.database.apple.renewConsentClaim(userID: account.id, holder: holder,
                                                                        until: now() + configuration.claimLease)
                else { return .claimLost }
            } catch {
                return .transient("database: \(error)")
            }
            switch await check(account, token) {
            case .valid: valid = true
            case .revoked: refused.append(token)
            case .transient(let reason): transient = reason
            case .configuration(let reason): return .configuration(reason)
            case .claimLost: return .claimLost
            }
        }
        do {
            if valid {
                for token in refused {
                    try await dependencies.database.apple.deleteAppleToken(userID: account.id, clientID: token.clientID)
                    logger.info("Apple no longer accepts one of the person's tokens: dropped", metadata: [
                        "user": .string(account.id), "client": .string(token.clientID),
                    ])
                }
                guard try await dependencies.database.apple.markConsentChecked(userID: account.id, now: now(), holder: holder) else {
                    // Cannot happen while the claim outlasts the call; if it does, the new holder checks again.
                    return .claimLost
                }
                record("valid")
                return .valid
            }
            if let transient { return .transient(transient) }
            // Matched by sub, like the notification; a concurrent transfer or deletion makes it a no-op.
            let ending = await dependencies.sessionsAbout(toEnd: account.id)
            if try await dependencies.database.apple.revokeConsent(sub: account.appleSub) {
                dependencies.metrics.sessionsEnded(.revoked, count: ending)
            }
            try await dependencies.database.oidc.endOIDCGrants(sub: account.appleSub)
        } catch {
            return .transient("database: \(error)")
        }
        record("revoked")
        logger.info("Apple consent revoked: sessions ended, tokens dropped", metadata: ["user": .string(account.id)])
        return .revoked
    }

    /// One token's check with Apple. `.revoked` means Apple answered `invalid_grant`; nothing is written here.
    private func check(_ account: UserAccount, _ token: AppleTokenRecord) async -> Outcome {
        let refreshToken: String
        do {
            refreshToken = try dependencies.cipher.open(token.refreshToken, from: .account(userID: token.userID, clientID: token.clientID))
        } catch {
            // Nothing Apple could tell us: TOKEN_ENCRYPTION_KEY changed, or the ciphertext was not sealed for this
            // account (copied from another row). Retried later, never revoked.
            logger.error("stored Apple token does not decrypt (was TOKEN_ENCRYPTION_KEY changed?)",
                         metadata: ["user": .string(account.id), "client": .string(token.clientID)])
            record("undecryptable")
            return .transient("the stored token does not decrypt")
        }
        do {
            _ = try await dependencies.metrics.timeAppleCall("refresh") {
                try await dependencies.apple.refresh(refreshToken: refreshToken, clientID: token.clientID)
            }
            return .valid
        } catch let error as AppleAPIError {
            if case .apple(let code, _, _) = error, code == "invalid_grant" {
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
