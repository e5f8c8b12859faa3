import AppleIDEmulator
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SIWAWeb

/// The app and the Apple ID emulator started in this process on loopback, configured like demo mode
/// (a temporary DATA_DIR, generated keys, the rate limit off), as `siwa serve` builds them.
struct LoadEnvironment: Sendable {
    let configuration: SIWAConfiguration
    let emulator: AppleIDEmulatorState
    let dataDirectory: String

    var appURL: String { configuration.publicURL }

    /// Starts both servers, runs `body`, and stops them again (also when `body` throws).
    static func run<T: Sendable>(
        databaseURL: String?, logger: Logger, _ body: @escaping @Sendable (LoadEnvironment) async throws -> T
    ) async throws -> T {
        let dataDirectory = NSTemporaryDirectory() + "siwa-loadtest-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let (appPort, emulatorPort) = try await freePorts()
        var values = ["DATA_DIR": dataDirectory, "PORT": String(appPort), "EMULATOR_PORT": String(emulatorPort),
                      "RATE_LIMIT_PER_MINUTE": "0", "APPLE_TIMEOUT": "10",
                      "DATABASE_URL": "sqlite:\(dataDirectory)/siwa.sqlite"]
        if let databaseURL { values["DATABASE_URL"] = databaseURL }
        let configuration = try SIWAConfiguration.load(from: values)
        // The same dependencies `siwa serve` builds: pools, HTTP client and templates as in production.
        let dependencies = try await makeDependencies(configuration: configuration, logger: logger)

        let emulatorConfiguration = EmulatorConfiguration.forSite(configuration)
        let emulator = try AppleIDEmulatorState(configuration: emulatorConfiguration)

        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        let emulatorApp = try await buildEmulatorApplication(
            configuration: emulatorConfiguration, state: emulator, host: "127.0.0.1", port: emulatorPort, logger: logger,
            onServerRunning: { _ in startedContinuation.yield() })
        let app = buildApplication(dependencies, logger: logger) { _ in startedContinuation.yield() }
        let group = ServiceGroup(services: [emulatorApp, app], gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }
        var iterator = started.makeAsyncIterator()
        _ = await iterator.next()
        _ = await iterator.next()

        let environment = LoadEnvironment(configuration: configuration, emulator: emulator, dataDirectory: dataDirectory)
        let result: Result<T, any Error>
        do { result = .success(try await body(environment)) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        await emulator.shutdown()
        return try result.get()
    }

    /// Two free loopback ports, found by binding port 0 and letting go.
    private static func freePorts() async throws -> (Int, Int) {
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
