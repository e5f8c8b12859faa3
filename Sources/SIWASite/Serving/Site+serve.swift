import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SIWAStore
import SIWAWeb

extension Site {
    /// The configuration from `sources` (`siwa serve`'s flags over the environment); a bad setting is a
    /// ``SiteFailure`` naming it. A valid `LOG_FORMAT` among `sources` (`--log-format` over the environment)
    /// is the process's log format from here on, so that the failure's line is already in it.
    public static func configuration(_ sources: SettingSources) throws -> SIWAConfiguration {
        ProcessLog.useFormat(of: sources)
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
    /// A database that does not open, or resources that are missing, are a ``SiteFailure``. The lines it
    /// writes itself (warnings, the banner once it listens, `siwa stopped`) are in the log format
    /// (``ProcessLog``): with `LOG_FORMAT=json`, one JSON object each.
    public static func serve(_ configuration: SIWAConfiguration) async throws {
        // `--log-format` wins over the environment's LOG_FORMAT, which the handler started with.
        SiteLogHandler.format = configuration.logFormat
        var logger = Logger(label: "siwa")
        logger.logLevel = configuration.logLevel
        for warning in configuration.warnings { ProcessLog.warning(warning) }
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
            announceListening(configuration)
        }
        try await app.runService()
        logger.info("siwa stopped")
    }

    /// The banner (``Banner``) on standard output in the `text` format; in the `json` format one `info`
    /// line, `siwa is listening on HOST:PORT — PUBLIC_URL`, with the banner's facts as fields.
    static func announceListening(_ configuration: SIWAConfiguration) {
        var message = "siwa is listening on \(configuration.host):\(configuration.port) — \(configuration.publicURL)"
        var metadata: Logger.Metadata = [
            "host": "\(configuration.host)", "port": "\(configuration.port)", "public_url": "\(configuration.publicURL)",
            "demo": "\(configuration.isDemo)",
        ]
        if configuration.isDemo {
            message += " (demo mode: no Apple credentials configured)"
            metadata["apple_base_url"] = "\(configuration.appleBaseURL)"
            metadata["data_dir"] = "\(configuration.dataDirectory)"
        }
        ProcessLog.announce(Banner.text(configuration), message: message, metadata: metadata)
    }
}
