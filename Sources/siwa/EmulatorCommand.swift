import ArgumentParser
import SIWASite

/// `siwa emulator`: its settings are ``EmulatorSettings``'s table (flags over the environment, `--help`);
/// SIWASite runs the emulator (``StandaloneEmulator``).
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulator",
        abstract: "Runs the Apple ID emulator alone, e.g. for a staging deployment (APPLE_BASE_URL points at it).",
        discussion: EmulatorSettings.helpText
    )

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The settings, listed below.", visibility: .hidden))
    var flags: [String] = []

    /// A flag the table does not know, a malformed value or an incomplete team is a usage error, as before.
    func validate() throws {
        _ = try options()
    }

    func run() async throws {
        try await StandaloneEmulator.run(try options())
    }

    private func options() throws -> StandaloneEmulator.Options {
        do {
            return try EmulatorSettings.options(arguments: flags, environment: SiteProcess.environment)
        } catch {
            throw ValidationError(String(describing: error))
        }
    }
}
