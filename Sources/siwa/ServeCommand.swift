import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import SIWASite
import SIWAStore
import SIWAWeb

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Runs the service. Without Apple credentials it starts in demo mode, with the Apple ID emulator beside it.",
        discussion: SettingFlags.helpText
    )

    @OptionGroup var settings: SettingsOptions

    func run() async throws {
        let configuration = try settings.configuration()
        var logger = Logger(label: "siwa")
        logger.logLevel = configuration.logLevel
        for warning in configuration.warnings { printError("warning: \(warning)") }
        let dependencies: SIWADependencies
        do {
            dependencies = try await Site.makeDependencies(configuration: configuration, logger: logger)
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
