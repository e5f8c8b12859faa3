import Synchronization

/// Enforces `MAX_PENDING_AUTHORIZATIONS` without counting the table on every `GET /auth/apple`.
///
/// Counting unconsumed, unexpired rows scans an index range that grows with traffic (consumed rows
/// stay until the sweeper removes them), and it ran once per sign-in. Far below the limit the exact
/// number does not matter, so this counts at most once a second and adds the sign-ins this process
/// started since; within 10% of the limit it counts every time, so the limit itself is exact.
/// (Other instances' starts are seen at the next count, within a second.)
final class PendingAuthorizationCap: Sendable {
    private struct Reading {
        var counted: Int
        var at: ContinuousClock.Instant
        var startedSince: Int
    }

    let limit: Int
    private let margin: Int
    private let reading = Mutex<Reading?>(nil)
    private static let freshFor: Duration = .seconds(1)

    init(limit: Int) {
        self.limit = limit
        margin = max(1, limit / 10)
    }

    /// Whether one more sign-in may start, and the count (or estimate) it was decided on. When
    /// admitted, the start is already added to the estimate. `count` reads the table.
    func admit(count: () async throws -> Int) async throws -> (admitted: Bool, pending: Int) {
        let now = ContinuousClock.now
        let estimate = reading.withLock { reading -> Int? in
            guard let current = reading, now - current.at < Self.freshFor else { return nil }
            let estimate = current.counted + current.startedSince
            guard estimate < limit - margin else { return nil }
            reading?.startedSince += 1
            return estimate
        }
        if let estimate { return (true, estimate) }

        let counted = try await count()
        let admitted = counted < limit
        reading.withLock { $0 = Reading(counted: counted, at: now, startedSince: admitted ? 1 : 0) }
        return (admitted, counted)
    }
}
