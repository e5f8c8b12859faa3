import ArgumentParser
import SIWASite

/// `siwa doctor`: checks the whole configuration, prints what it found, and signs a test client secret.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Checks the configuration, the database, the OpenID signing keys and Apple's keys, and signs a test client secret.",
        discussion: SettingFlags.helpText
    )

    @OptionGroup var settings: SettingsOptions
    @Flag(help: "Do not contact APPLE_BASE_URL") var offline = false

    func run() async throws {
        let configuration = try Site.configuration(settings.sources())
        if try await !SiteDoctor.printReport(configuration, offline: offline) { throw ExitCode(1) }
    }
}
