import ArgumentParser
import SIWASite

/// Every setting of the table (SPEC §2) as a flag; a flag wins over the environment variable of the
/// same name. The flags are parsed by the table (`SettingFlags`), which also writes their help.
struct SettingsOptions: ParsableArguments {
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The settings, listed below.", visibility: .hidden))
    var flags: [String] = []

    /// The environment and these flags, where the configuration is read from (``Site/configuration(_:)``);
    /// a flag the settings table does not know is a usage error.
    func sources(environment: [String: String] = SiteProcess.environment) throws -> SettingSources {
        do {
            return SettingSources(environment: environment, flags: try SettingFlags.parse(flags))
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// `EVENT_LOOP_THREADS` from these flags and the environment, before the configuration is loaded.
    func eventLoopThreads(environment: [String: String] = SiteProcess.environment) -> Int {
        let values = (try? SettingFlags.parse(flags)) ?? [:]
        return SiteSettings.eventLoopThreads(in: SettingSources(environment: environment, flags: values))
    }
}

/// Prints a line to standard error.
func printError(_ line: String) {
    SiteProcess.printError(line)
}

