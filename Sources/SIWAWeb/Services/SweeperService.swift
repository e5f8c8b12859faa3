import Logging
import ServiceLifecycle
import SIWAStore

/// Deletes expired pending authorizations, sessions and pending profiles once a minute, so those
/// tables stay bounded however many sign-ins are abandoned.
struct SweeperService: Service {
    let database: SIWADatabase
    let now: @Sendable () -> Int64
    let logger: Logger
    var interval: Duration = .seconds(60)

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let removed = try await database.sweepExpired(now: now()) + database.sweepOIDC(now: now())
                    if removed > 0 { logger.debug("swept expired rows", metadata: ["rows": .stringConvertible(removed)]) }
                } catch {
                    logger.warning("sweep failed", metadata: ["error": .string(String(describing: error))])
                }
                try await Task.sleep(for: interval)
            }
        }
    }
}
