import AppleIDEmulator
import SIWALoadTest
import SIWAWeb

/// `siwa loadtest`'s options and report. SIWALoadTest defines them; the executable, which imports only
/// SIWASite, names them here.
public typealias LoadOptions = SIWALoadTest.LoadOptions
public typealias LoadReport = SIWALoadTest.LoadReport

extension Site {
    /// `siwa loadtest`: complete sign-in flows against this site and the emulator (``LoadTestSite/siwa``);
    /// returns what was measured (print it with ``LoadReport/printText()``). A run that could not start or
    /// finish is a ``SiteFailure`` ("siwa loadtest: …").
    public static func loadTest(_ options: LoadOptions) async throws -> LoadReport {
        do {
            return try await LoadTest.run(options, site: .siwa)
        } catch let error as LoadTestError {
            throw SiteFailure("siwa loadtest: \(error)")
        }
    }
}

extension LoadTestSite {
    /// This site under load: its settings read by the settings table, the app built by
    /// ``Site/makeDependencies(configuration:logger:overrides:)`` and run beside the emulator as the
    /// end-to-end tests run it (``SiteWithEmulator``).
    static let siwa = LoadTestSite(
        freePorts: { try await SiteWithEmulator.freePorts() },
        configuration: { settings in try SIWAConfiguration.load(from: settings) },
        runWithEmulator: { configuration, appInProcess, emulatorPort, logger, body in
            let dependencies: SIWADependencies? =
                if appInProcess { try await Site.makeDependencies(configuration: configuration, logger: logger) } else { nil }
            let emulatorConfiguration = EmulatorConfiguration.forSite(configuration, notifyApp: appInProcess)
            let emulator = try AppleIDEmulatorState(configuration: emulatorConfiguration)
            do {
                try await SiteWithEmulator.run(
                    dependencies: dependencies, emulatorConfiguration: emulatorConfiguration, emulator: emulator,
                    emulatorPort: emulatorPort, appLogger: logger, logger: logger) { try await body(emulator) }
            } catch {
                await emulator.shutdown()
                throw error
            }
            await emulator.shutdown()
        })
}
