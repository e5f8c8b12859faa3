import Synchronization

/// A value computed at most once per `freshFor`; callers in between get the last one. Concurrent
/// callers when it is stale may each compute it (no queueing behind a slow database).
final class CachedValue<Value: Sendable>: Sendable {
    private let stored = Mutex<(value: Value, at: ContinuousClock.Instant)?>(nil)
    let freshFor: Duration

    init(freshFor: Duration) { self.freshFor = freshFor }

    func value(_ compute: () async throws -> Value) async throws -> Value {
        let now = ContinuousClock.now
        if let cached = stored.withLock({ $0 }), now - cached.at < freshFor { return cached.value }
        let value = try await compute()
        stored.withLock { $0 = (value, now) }
        return value
    }
}
