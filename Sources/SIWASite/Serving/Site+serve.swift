import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SIWAStore
import SIWAWeb

extension Site {
    /// The configuration from `sources` (`siwa serve`'s flags over the environment); a bad setting is a
    /// ``SiteFailure`` naming it.
    public static func configuration(_ sources: SettingSources) throws -> SIWAConfiguration {
        do {
            return try SIWAConfiguration.load(sources)
        } catch let error as ConfigurationError {
            throw SiteFailure(error.description)
        }
    }

    /// How many event loops NIO's shared group starts (`EVENT_LOOP_THREADS`); only before the first task
    /// starts them.
    public static func useEventLoopThreads(_ count: Int) {
        NIOSingletons.groupLoopCountSuggestion = count
    }

    /// `siwa serve`: the site until SIGTERM or SIGINT, with the Apple ID emulator beside it in demo mode.
    /// A database that does not open, or resources that are missing, are a ``SiteFailure``.
    public static func serve(_ configuration: SIWAConfiguration) async throws {
        // `--log-format` wins over the environment's LOG_FORMAT, which the handler started with.
        SiteLogHandler.format = configuration.logFormat
        var logger = Logger(label: "siwa")
        logger.logLevel = configuration.logLevel
        for warning in configuration.warnings { printError("warning: \(warning)") }
        let dependencies: SIWADependencies
        do {
            dependencies = try await makeDependencies(configuration: configuration, logger: logger)
        } catch let error as StoreError {
            throw SiteFailure("database error: DATABASE_URL (\(configuration.databaseURL.redactedDescription)): \(error)")
        } catch let error as ConfigurationError {
            throw SiteFailure(error.description)
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
