import Hummingbird

/// Applies the fault injected into an endpoint, if any, before the real handler runs.
struct FaultInjector: Sendable {
    let state: AppleIDEmulatorState
    /// How long a hang waits at most when nobody clears it (so a forgotten fault cannot leak tasks forever).
    static let maximumHang: Duration = .seconds(3600)

    /// Runs `handler` unless a fault answers instead.
    func run(
        _ endpoint: EmulatorEndpoint,
        _ handler: () async throws -> Response
    ) async throws -> Response {
        guard let taken = await state.takeFault(for: endpoint) else {
            return try await handler()
        }
        let (fault, generation) = (taken.fault, taken.generation)
        if let latency = fault.latencyMilliseconds, latency > 0 {
            try await Task.sleep(for: .milliseconds(latency))
        }
        switch fault.kind {
        case .latency:
            return try await handler()
        case .status:
            let status = fault.status ?? 500
            return EmulatorResponse.oauthError(AppleOAuthError(
                status >= 500 ? "server_error" : "invalid_request", "injected fault", status: status
            ))
        case .invalidGrant:
            return EmulatorResponse.oauthError(.invalidGrant("injected fault"))
        case .hang:
            // Poll rather than park forever so that clearing the fault releases the request, and
            // Task.sleep throws when the request task is cancelled.
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: Self.maximumHang)
            while clock.now < deadline, await !state.faultsCleared(since: generation) {
                try await Task.sleep(for: .milliseconds(25))
            }
            return try await handler()
        case .reset:
            // Hummingbird writes the head before a streamed body; failing the body makes the server
            // close the connection mid-response, which clients see as a dropped connection.
            return Response(
                status: .ok,
                headers: [.contentType: "application/json"],
                body: ResponseBody(contentLength: 1024) { _ in throw InjectedConnectionReset() }
            )
        }
    }
}

/// Thrown from a response body to make the server drop the connection.
struct InjectedConnectionReset: Error {}
