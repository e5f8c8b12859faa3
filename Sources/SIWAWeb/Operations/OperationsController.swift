import Hummingbird
import JOSE
import NIOCore
import NIOPosix
import Synchronization

/// `GET /healthz` and `GET /metrics`.
struct OperationsController: Sendable {
    let dependencies: SIWADependencies
    let revocationCounts: CachedValue<(pending: Int, failing: Int)>
    let oldestRevocation: CachedValue<Int64?>

    init(dependencies: SIWADependencies) {
        self.dependencies = dependencies
        revocationCounts = CachedValue(freshFor: Self.countsFreshFor)
        oldestRevocation = CachedValue(freshFor: Self.countsFreshFor)
    }

    /// How long a count of the revocation outbox is reused: a scrape every second (or a flood of
    /// them) costs the database one count per this interval.
    static let countsFreshFor: Duration = .seconds(15)

    /// The public listener: `/healthz`, and `/metrics` unless `METRICS_PORT` moves it to its own listener.
    var endpoints: RouteCollection<AppRequestContext> {
        let routes = RouteCollection(context: AppRequestContext.self).get("/healthz", use: health)
        if dependencies.configuration.metricsPort == nil { routes.get("/metrics", use: metrics) }
        return routes
    }

    /// The `METRICS_PORT` listener's routes.
    var metricsEndpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self).get("/metrics", use: metrics)
    }

    /// How long `/healthz` waits for the database. During an outage a request may wait for a pooled
    /// connection up to the pool's own timeout (10 s); a health check must answer well before a
    /// prober gives up (the chaos test's prober waits 5 s, load balancers often 2–5 s).
    static let healthDeadline: Duration = .seconds(2)

    func health(_ request: Request, context: AppRequestContext) async throws -> Response {
        let database = dependencies.database
        if await Self.answersWithin(Self.healthDeadline, { try await database.ping() }) {
            return .json(["status": "ok"])
        }
        context.logger.warning("health check: database does not answer")
        return .json(["status": "database unavailable"], status: .serviceUnavailable)
    }

    /// Whether `work` succeeds within `deadline`. On a timeout the answer is false at once; `work` goes on
    /// in the background until it ends by itself (the pool's waits do not listen for cancellation).
    ///
    /// The deadline is a timer on an event loop, cancelled when `work` answers, not a sleeping Task:
    /// on Linux `Task.sleep` goes through Dispatch's timers and threads, and a cancelled sleep's timer
    /// still fired later (a probe cost ~145 µs paced against ~90 now).
    static func answersWithin(_ deadline: Duration, _ work: @escaping @Sendable () async throws -> Void) async -> Bool {
        let outcome = OneShot()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            outcome.set(continuation)
            let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(deadline)) {
                outcome.resume(false)
            }
            Task {
                let succeeded = (try? await work()) != nil
                outcome.resume(succeeded)
                timer.cancel()
            }
        }
    }

    /// A continuation resumed by whichever side comes first, exactly once.
    private final class OneShot: Sendable {
        private let continuation = Mutex<CheckedContinuation<Bool, Never>?>(nil)
        func set(_ value: CheckedContinuation<Bool, Never>) { continuation.withLock { $0 = value } }
        func resume(_ value: Bool) {
            continuation.withLock { pending -> CheckedContinuation<Bool, Never>? in
                defer { pending = nil }
                return pending
            }?.resume(returning: value)
        }
    }

    func metrics(_ request: Request, context: AppRequestContext) async throws -> Response {
        if let token = dependencies.configuration.metricsToken {
            let presented = request.headers[.authorization].flatMap { header -> String? in
                header.lowercased().hasPrefix("bearer ") ? String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
            } ?? ""
            guard ConstantTime.equals(Array(SHA256.hash(Array(presented.utf8))), Array(SHA256.hash(Array(token.utf8)))) else {
                throw WebError(.unauthorized, kind: "unauthorized", title: "Unauthorized",
                               message: "/metrics needs the METRICS_TOKEN as a bearer token.", retryPath: nil,
                               headers: [.wwwAuthenticate: "Bearer"])
            }
        }
        let database = dependencies.database
        if let counts = try? await revocationCounts.value({ try await database.outbox.revocationCounts() }) {
            dependencies.metrics.revocations(pending: counts.pending, failing: counts.failing)
        }
        // Not `try?`, which would flatten "no revocation waits" (nil) into "the query failed".
        do {
            let oldest = try await oldestRevocation.value { try await database.outbox.oldestPendingRevocationCreatedAt() }
            // The age from the cached queue time and this scrape's clock: it keeps growing between queries.
            dependencies.metrics.revocationBacklogAge(oldestCreatedAt: oldest, now: dependencies.now())
        } catch {
            // As with the counts: the gauge keeps its last value while the database does not answer.
        }
        let bytes = dependencies.metrics.registry.emitToBuffer()
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
