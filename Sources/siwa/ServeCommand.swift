import AppleIDEmulator
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import SIWAStore
import SIWAWeb

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Runs the service. Without Apple credentials it starts in demo mode, with the Apple ID emulator beside it."
    )

    @OptionGroup var settings: SettingsOptions
    @Option(help: "Log level: trace, debug, info, notice, warning, error") var logLevel: String?

    func run() async throws {
        let values = settings.merged()
        let configuration = try loadConfiguration(values)
        let logger = makeLogger(level: logLevel ?? values["LOG_LEVEL"])
        for warning in configuration.warnings { printError("warning: \(warning)") }
        let dependencies: SIWADependencies
        do {
            dependencies = try await makeDependencies(configuration: configuration, logger: logger)
        } catch let error as StoreError {
            printError("database error: DATABASE_URL (\(configuration.databaseURL.redactedDescription)): \(error)")
            throw ExitCode(1)
        } catch let error as ConfigurationError {
            printError(error.description)
            throw ExitCode(1)
        }

        var extraServices: [any Service] = []
        if configuration.isDemo {
            extraServices.append(try await DemoEmulator.application(for: configuration, logger: logger))
        }
        let app = buildApplication(dependencies, logger: logger, extraServices: extraServices) { _ in
            // Straight to the file descriptor: print() is block-buffered when stdout is a pipe.
            FileHandle.standardOutput.write(Data((Banner.text(configuration) + "\n").utf8))
        }
        try await app.runService()
    }
}

/// Loads the configuration, or prints the one line naming the bad setting and exits 1.
func loadConfiguration(_ values: [String: String]) throws -> SIWAConfiguration {
    do {
        return try SIWAConfiguration.load(from: values)
    } catch let error as ConfigurationError {
        printError(error.description)
        throw ExitCode(1)
    }
}

func makeLogger(level: String?) -> Logger {
    var logger = Logger(label: "siwa")
    logger.logLevel = level.flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
    return logger
}

/// Demo mode's emulator: registered with the generated key, the demo Services ID and app bundle, on
/// 127.0.0.1 — another *site* than `localhost`, so the callback is a real cross-site POST.
enum DemoEmulator {
    static func application(for configuration: SIWAConfiguration, logger: Logger) async throws -> any Service {
        let emulatorConfiguration = EmulatorConfiguration.forSite(configuration)
        let state = try AppleIDEmulatorState(configuration: emulatorConfiguration)
        var emulatorLogger = logger
        emulatorLogger[metadataKey: "component"] = "emulator"
        return try await buildEmulatorApplication(configuration: emulatorConfiguration, state: state,
                                                  host: "127.0.0.1", port: configuration.emulatorPort, logger: emulatorLogger)
    }
}

enum Banner {
    static func text(_ configuration: SIWAConfiguration) -> String {
        guard configuration.isDemo else {
            return "siwa is listening on \(configuration.host):\(configuration.port) — \(configuration.publicURL)"
        }
        return """

        ┌──────────────────────────────────────────────────────────────────────┐
          siwa — demo mode (no Apple credentials configured)

          Open  \(configuration.publicURL)  in a browser and click "Sign in with Apple".

          The Apple ID emulator stands in for Apple at \(configuration.appleBaseURL)
          (what it has seen: \(configuration.appleBaseURL)/emulator).
          Keys and the database are in \(configuration.dataDirectory)/.
          OpenID provider: \(configuration.publicURL)/.well-known/openid-configuration
          (demo client siwa-demo-rp; try it with scripts/oidc-sample).
          Set APPLE_TEAM_ID, APPLE_CLIENT_ID, APPLE_KEY_ID and APPLE_PRIVATE_KEY_PATH
          (see README) to talk to the real Apple.
        └──────────────────────────────────────────────────────────────────────┘

        """
    }
}
