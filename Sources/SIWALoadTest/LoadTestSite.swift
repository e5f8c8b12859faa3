import AppleIDEmulator
import Logging
import SIWAWeb

/// The app under load as the composition root (SIWASite) supplies it: how its settings become its
/// configuration, and how it runs beside the Apple ID emulator. Given as values, so that this target does
/// not depend on SIWASite: SIWASite depends on this one and offers the run as `Site.loadTest`.
public struct LoadTestSite: Sendable {
    /// Two free loopback ports: the app's and the emulator's.
    public var freePorts: @Sendable () async throws -> (app: Int, emulator: Int)
    /// The app's configuration from its settings by name, read and checked as `siwa serve` reads them.
    public var configuration: @Sendable (_ settings: [String: String]) throws -> SIWAConfiguration
    /// Starts the emulator for `configuration` on 127.0.0.1:`emulatorPort` and, when `appInProcess`, the app
    /// too, built as `siwa serve` builds it (only then does the emulator send the app Apple's notifications);
    /// runs `body` with the emulator's state once both listen, and stops them again, also when `body` throws.
    public var runWithEmulator: @Sendable (
        _ configuration: SIWAConfiguration, _ appInProcess: Bool, _ emulatorPort: Int, _ logger: Logger,
        _ body: (AppleIDEmulatorState) async throws -> Void
    ) async throws -> Void

    public init(
        freePorts: @escaping @Sendable () async throws -> (app: Int, emulator: Int),
        configuration: @escaping @Sendable (_ settings: [String: String]) throws -> SIWAConfiguration,
        runWithEmulator: @escaping @Sendable (
            _ configuration: SIWAConfiguration, _ appInProcess: Bool, _ emulatorPort: Int, _ logger: Logger,
            _ body: (AppleIDEmulatorState) async throws -> Void
        ) async throws -> Void
    ) {
        self.freePorts = freePorts
        self.configuration = configuration
        self.runWithEmulator = runWithEmulator
    }
}
