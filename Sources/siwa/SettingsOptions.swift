import ArgumentParser
import Foundation
import Logging
import SIWASite
import SIWAWeb

/// Every setting of the table (SPEC §2) as a flag; a flag wins over the environment variable of the
/// same name. The flags are parsed by the table (`SettingFlags`), which also writes their help.
struct SettingsOptions: ParsableArguments {
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The settings, listed below.", visibility: .hidden))
    var flags: [String] = []

    /// The configuration from the environment and these flags, or the one line naming the bad setting (exit 1).
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SIWAConfiguration {
        let values: [String: String]
        do {
            values = try SettingFlags.parse(flags)
        } catch {
            throw ValidationError(error.description)
        }
        do {
            return try SIWAConfiguration.load(SettingSources(environment: environment, flags: values))
        } catch let error as ConfigurationError {
            printError(error.description)
            throw ExitCode(1)
        }
    }

    /// `EVENT_LOOP_THREADS` from these flags and the environment, before the configuration is loaded.
    func eventLoopThreads(environment: [String: String] = ProcessInfo.processInfo.environment) -> Int {
        let values = (try? SettingFlags.parse(flags)) ?? [:]
        return SiteSettings.eventLoopThreads(in: SettingSources(environment: environment, flags: values))
    }
}

/// Prints a line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

func makeLogger(level: String?) -> Logger {
    var logger = Logger(label: "siwa")
    logger.logLevel = level.flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .info
    return logger
}
