import ArgumentParser
import SIWASite

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Runs the service. Without Apple credentials it starts in demo mode, with the Apple ID emulator beside it.",
        discussion: SettingFlags.helpText
    )

    @OptionGroup var settings: SettingsOptions

    func run() async throws {
        try await Site.serve(Site.configuration(settings.sources()))
    }
}
