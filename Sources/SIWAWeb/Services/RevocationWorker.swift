import AppleSignIn
import JOSE
import Logging
import ServiceLifecycle
import SIWAStore

/// Sends queued revocations to Apple until Apple accepts (SPEC §5). The queue is the
/// `revocation_outbox` table, written in the same transaction as the deletion, so work survives
/// restarts; each item is leased, so several instances never send one at the same time.
///
/// A batch can take longer than a lease (16 items at up to `APPLE_TIMEOUT` each), so the lease is
/// renewed just before each call to Apple, for a whole `REVOCATION_LEASE_SECONDS` (which must exceed
/// `APPLE_TIMEOUT`); an item whose lease another instance took meanwhile is left to that instance, unsent.
/// Only the holder records the outcome. Delivery is still at least once, not exactly once: when the
/// process dies (or the database fails) between Apple's answer and its record, the item is sent again.
struct RevocationWorker: Service, CustomStringConvertible {
    /// Just the name: ServiceLifecycle logs each service as `"\(service)"` (debug level), which would otherwise
    /// write out the whole dependencies value, keys included, on one 40 KiB line.
    var description: String { "RevocationWorker" }

    let dependencies: SIWADependencies
    let logger: Logger
    /// Poll interval when nothing wakes the worker (other instances may enqueue too): `REVOCATION_INTERVAL_SECONDS`.
    var pollInterval: Duration
    var batchSize: Int
    /// How long a claimed or renewed item stays this worker's: `REVOCATION_LEASE_SECONDS`.
    var leaseSeconds: Int64

    /// The settings' values unless given.
    init(dependencies: SIWADependencies, logger: Logger, pollInterval: Duration? = nil, batchSize: Int = 16, leaseSeconds: Int64? = nil) {
        self.dependencies = dependencies
        self.logger = logger
        self.pollInterval = pollInterval ?? dependencies.configuration.revocationInterval
        self.batchSize = batchSize
        self.leaseSeconds = leaseSeconds ?? dependencies.configuration.revocationLease.components.seconds
    }

    func run() async throws {
        let signal = dependencies.revocationSignal
        let wake = WakeUp()
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                // Wakes on a deletion in this process, or on the poll interval, whichever comes first.
                group.addTask {
                    for await _ in signal.stream { await wake.fire() }
                }
                while !Task.isCancelled {
                    await runOnce()
                    await wake.wait(upTo: pollInterval)
                }
                group.cancelAll()
            }
        }
    }

    /// Sends every due item once; returns how many were accepted by Apple.
    @discardableResult
    func runOnce() async -> Int {
        let database = dependencies.database
        // Names this run's leases: unique to it, so not even a later run of this instance counts as their holder.
        let holder = dependencies.instanceID + "." + SecureRandom.token(byteCount: 6)
        var accepted = 0
        do {
            while true {
                let now = dependencies.now()
                let items = try await database.outbox.claimDueRevocations(now: now, limit: batchSize, leaseSeconds: leaseSeconds, holder: holder)
                if items.isEmpty { break }
                for item in items {
                    if await send(item, holder: holder) { accepted += 1 }
                }
                if items.count < batchSize { break }
            }
            let counts = try await database.outbox.revocationCounts()
            dependencies.metrics.revocations(pending: counts.pending, failing: counts.failing)
        } catch where error is CancellationError || Task.isCancelled {
            // Shutting down: not a database problem.
        } catch {
            logger.warning("revocation worker could not read the outbox", metadata: ["error": .string(String(describing: error))])
        }
        return accepted
    }

    private func send(_ item: RevocationItem, holder: String) async -> Bool {
        let database = dependencies.database
        do {
            let token = try dependencies.cipher.open(item.token, from: .revocation(id: item.id))
            // The lease has to cover this call, whatever the batch took so far: renewed for a whole lease, which
            // outlasts APPLE_TIMEOUT. Lost (another instance claimed the item after it ran out): not sent.
            guard try await database.outbox.renewRevocationLease(id: item.id, holder: holder, until: dependencies.now() + leaseSeconds) else {
                dependencies.metrics.revocationAttempt("lease_lost")
                logger.notice("revocation lease lost before sending: left to the instance that holds it now", metadata: ["item": .string(item.id)])
                return false
            }
            try await dependencies.metrics.timeAppleCall("revoke") {
                try await dependencies.apple.revoke(token: token, clientID: item.clientID, tokenTypeHint: item.tokenTypeHint)
            }
            guard try await database.outbox.completeRevocation(id: item.id, holder: holder, now: dependencies.now()) else {
                // Cannot happen while the lease outlasts the call; if it does, the new holder sends it again.
                dependencies.metrics.revocationAttempt("accepted_lease_lost")
                logger.warning("Apple accepted a revocation whose lease another instance holds now: it may be sent again",
                               metadata: ["item": .string(item.id)])
                return true
            }
            dependencies.metrics.revocationAttempt("accepted")
            logger.info("revocation accepted by Apple", metadata: ["item": .string(item.id), "attempts": .stringConvertible(item.attempts + 1)])
            return true
        } catch where error is CancellationError || Task.isCancelled {
            // Stopped mid-attempt (a graceful shutdown cancels the worker): not Apple's failure, so no attempt is
            // counted and no backoff set. Handed back, due at once for whichever instance runs next; if Apple got
            // the call, it is sent again (delivery is at least once). The write runs in a task of its own: in this
            // cancelled one, SQLite's wait while another writer holds the file would end it at once.
            dependencies.metrics.revocationAttempt("interrupted")
            logger.info("revocation interrupted by shutdown: handed back, due at once", metadata: ["item": .string(item.id)])
            _ = await Task { try? await database.outbox.releaseRevocation(id: item.id, holder: holder) }.value
            return false
        } catch {
            let delay = Self.backoff(attempts: item.attempts)
            let description = LogSafe.text(String(describing: error), limit: 500)
            dependencies.metrics.revocationAttempt("failed")
            logger.warning("revocation failed; will retry", metadata: [
                "item": .string(item.id), "retryIn": .stringConvertible(delay), "error": .string(description),
            ])
            // A no-op when another instance holds the item now: its own attempt decides.
            _ = try? await database.outbox.failRevocation(id: item.id, holder: holder, error: String(description.prefix(500)),
                                                   nextAttemptAt: dependencies.now() + delay)
            return false
        }
    }

    /// Jittered exponential backoff: the first retry within 5 s, doubling, capped at 10 minutes.
    static func backoff(attempts: Int) -> Int64 {
        let base = min(600.0, 2.0 * pow2(attempts))
        let jittered = base * Double.random(in: 0.5...1.0)
        return max(1, min(600, Int64(jittered.rounded(.up))))
    }

    private static func pow2(_ n: Int) -> Double { n >= 20 ? 1_048_576 : Double(1 << max(0, n)) }
}

/// A one-slot wake-up: `fire` ends the current (or next) `wait` early.
actor WakeUp {
    private var pending = false
    private var waiter: CheckedContinuation<Void, Never>?

    func fire() {
        if let waiter {
            self.waiter = nil
            waiter.resume()
        } else {
            pending = true
        }
    }

    func wait(upTo timeout: Duration) async {
        if pending {
            pending = false
            return
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.fire()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter = continuation
            }
        } onCancel: {
            Task { await self.fire() }
        }
        pending = false
        timer.cancel()
    }
}
