import Hummingbird

/// `GET /healthz` and `GET /metrics`.
struct OperationsController: Sendable {
    let dependencies: SIWADependencies

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .get("/healthz", use: health)
            .get("/metrics", use: metrics)
    }

    func health(_ request: Request, context: AppRequestContext) async throws -> Response {
        do {
            try await dependencies.database.ping()
            return .json(["status": "ok"])
        } catch {
            context.logger.warning("health check: database does not answer")
            return .json(["status": "database unavailable"], status: .serviceUnavailable)
        }
    }

    func metrics(_ request: Request, context: AppRequestContext) async throws -> Response {
        if let counts = try? await dependencies.database.revocationCounts() {
            dependencies.metrics.revocations(pending: counts.pending, failing: counts.failing)
        }
        let bytes = dependencies.metrics.registry.emitToBuffer()
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
