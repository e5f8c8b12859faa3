import Foundation
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// The revocation worker stopped while Apple has its call (a graceful shutdown cancels it): the item is handed
/// back, not failed. Deletion, retries and several workers are tested in AccountTests and SeveralInstancesTests.
@Suite("Revocation worker")
struct RevocationWorkerTests {
    @Test("stopped mid-call: the item is handed back due at once, no attempt counted, no error recorded", arguments: Backend.allCases)
    func stoppedMidCall(backend: Backend) async throws {
        try await SeveralInstancesTests.withInstances(backend, count: 1) { instances, apple in
            let instance = try #require(instances.first)
            // setup: a deleted account whose revocation Apple takes 30 s to answer
            try await SeveralInstancesTests.seed(instance, apple: apple, prefix: "stop", count: 1)
            let account = try #require(try await instance.database.accounts.user(sub: "stop.0"))
            #expect(try await instance.deleteAccount(account, revoke: true) != nil)
            apple.setBehaviour(.delay(.seconds(30)), for: "/auth/revoke")
            let worker = Task { try await RevocationWorker(dependencies: instance, logger: TestDatabase.quietLogger).run() }
            for _ in 0..<200 where apple.requests(to: "/auth/revoke").isEmpty {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(apple.requests(to: "/auth/revoke").count == 1, "Apple has the call")

            // MUT: the worker is stopped while Apple still has the call
            let clock = ContinuousClock()
            let stopped = clock.now
            worker.cancel()
            _ = try? await worker.value

            // validate: stopped without waiting for Apple; the item as before the attempt, claimable at once
            #expect(clock.now - stopped < .seconds(20), "the call was abandoned, not waited for")
            #expect(try await instance.database.outbox.revocationCounts() == (1, 0), "pending, not failing")
            let now = Int64(Date().timeIntervalSince1970)
            let claimed = try await instance.database.outbox.claimDueRevocations(now: now, limit: 5, leaseSeconds: 60, holder: "next")
            let item = try #require(claimed.first, "due at once, its lease released")
            #expect(claimed.count == 1 && item.attempts == 0 && item.lastError == nil)
            #expect(Self.attempts(instance.metrics, result: "interrupted") == 1)
            #expect(Self.attempts(instance.metrics, result: "failed") == 0)
        }
    }

    /// `siwa_revocation_attempts_total{result=…}` as the instance's `/metrics` shows it.
    static func attempts(_ metrics: SIWAMetrics, result: String) -> Int {
        var buffer: [UInt8] = []
        metrics.registry.emit(into: &buffer)
        return PrometheusText.count(in: buffer, metric: "siwa_revocation_attempts_total", label: "result=\"\(result)\"")
    }
}
