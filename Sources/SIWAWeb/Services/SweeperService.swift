import Logging
import ServiceLifecycle
import SIWAStore

/// Deletes expired pending authorizations, sessions (past their end or idle deadline), refresh tokens past
/// their family's end, and pending profiles once a minute, so those
/// tables stay bounded however many sign-ins are abandoned. With several instances on one database,
/// one of them sweeps per run: each run first takes the job's lease (`job_leases`), which the
/// instance that swept last keeps renewing; another takes over within a minute and a half if it dies.
struct SweeperService: Service, CustomStringConvertible {
    /// Just the name (see ``RevocationWorker/description``).
    var description: String { "SweeperService" }

    static let jobName = "sweeper"

    let database: SIWADatabase
    let now: @Sendable () -> Int64
    let logger: Logger
    /// Who holds the lease: this process.
    let instanceID: String
    /// Where the sessions each sweep ends are counted (by reason: idle, lifetime); nil counts nothing.
    var metrics: SIWAMetrics?
    var interval: Duration = .seconds(60)

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    if let removed = try await runOnce(), removed > 0 {
                        logger.debug("swept expired rows", metadata: ["rows": .stringConvertible(removed)])
                    }
                } catch where error is CancellationError || Task.isCancelled {
                    break  // shutting down: not a failed sweep
                } catch {
                    logger.warning("sweep failed", metadata: ["error": .string(String(describing: error))])
                }
                try await Task.sleep(for: interval)
            }
        }
    }

    /// One run: the rows removed, or nil when another instance holds this minute's lease.
    func runOnce() async throws -> Int? {
        let start = now()
        // The lease outlasts this instance's next run (half an interval of slack), which renews it; when
        // the holder stops, another instance takes over within one and a half intervals.
        let seconds = max(1, interval.components.seconds)
        let until = start + seconds + seconds / 2
        guard try await database.outbox.claimJob(Self.jobName, holder: instanceID, now: start, until: until) else { return nil }
        let swept = try await database.sessions.sweepExpired(now: start)
        metrics?.sessionsEnded(.idle, count: swept.sessionsEnded.idle)
        metrics?.sessionsEnded(.lifetime, count: swept.sessionsEnded.lifetime)
        return try await swept.rows + database.oidc.sweepOIDC(now: start)
    }
}
