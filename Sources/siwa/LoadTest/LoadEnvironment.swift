import AppleIDEmulator
import Foundation
import Logging
import SIWASite
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
        let (appPort, emulatorPort) = try await SiteWithEmulator.freePorts()
        var values = ["DATA_DIR": dataDirectory, "PORT": String(appPort), "EMULATOR_PORT": String(emulatorPort),
                      "RATE_LIMIT_PER_MINUTE": "0", "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT": "0", "APPLE_TIMEOUT": "10",
                      "DATABASE_URL": "sqlite:\(dataDirectory)/siwa.sqlite"]
        if let databaseURL { values["DATABASE_URL"] = databaseURL }
        let configuration = try SIWAConfiguration.load(from: values)
        // The same dependencies `siwa serve` builds: pools, HTTP client and templates as in production.
        let dependencies = try await Site.makeDependencies(configuration: configuration, logger: logger)

        let emulatorConfiguration = EmulatorConfiguration.forSite(configuration)
        let emulator = try AppleIDEmulatorState(configuration: emulatorConfiguration)

        let environment = LoadEnvironment(configuration: configuration, emulator: emulator, dataDirectory: dataDirectory)
        let result: Result<T, any Error>
        do {
            result = .success(try await SiteWithEmulator.run(
                dependencies: dependencies, emulatorConfiguration: emulatorConfiguration, emulator: emulator,
                emulatorPort: emulatorPort, appLogger: logger, logger: logger) { try await body(environment) })
        } catch {
            result = .failure(error)
        }
        await emulator.shutdown()
        return try result.get()
    }
}
