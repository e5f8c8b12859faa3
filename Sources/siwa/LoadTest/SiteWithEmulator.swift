import AppleIDEmulator
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SIWAWeb

/// The app and its Apple ID emulator run together on loopback in this process: what `siwa loadtest`
/// starts, and what the end-to-end tests start (they differ only in how the app's dependencies are made).
enum SiteWithEmulator {
    /// Starts the emulator on `127.0.0.1:emulatorPort` and the app (on its configured port) in one service
    /// group, runs `body` once both listen, and stops both again, also when `body` throws.
    static func run<T>(
        dependencies: SIWADependencies, emulatorConfiguration: EmulatorConfiguration, emulator: AppleIDEmulatorState,
        emulatorPort: Int, appLogger: Logger, logger: Logger, _ body: () async throws -> T
    ) async throws -> T {
        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        let emulatorApp = try await buildEmulatorApplication(
            configuration: emulatorConfiguration, state: emulator, host: "127.0.0.1", port: emulatorPort, logger: logger,
            onServerRunning: { _ in startedContinuation.yield() })
        let app = buildApplication(dependencies, logger: appLogger) { _ in startedContinuation.yield() }
        let group = ServiceGroup(services: [emulatorApp, app], gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }
        var iterator = started.makeAsyncIterator()
        _ = await iterator.next()
        _ = await iterator.next()

        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        return try result.get()
    }

    /// Two free loopback ports, found by binding port 0 and letting go.
    static func freePorts() async throws -> (Int, Int) {
        var ports: [Int] = []
        var channels: [any Channel] = []
        for _ in 0..<2 {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .bind(host: "127.0.0.1", port: 0).get()
            ports.append(channel.localAddress?.port ?? 0)
            channels.append(channel)
        }
        for channel in channels { try await channel.close() }
        return (ports[0], ports[1])
    }
}
