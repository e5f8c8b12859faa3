import ArgumentParser

@main
struct SIWACommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "siwa",
        abstract: "Sign in with Apple for websites — the service, its Apple ID emulator and tools.",
        subcommands: [ServeCommand.self, EmulatorCommand.self, DoctorCommand.self, LoadTestCommand.self, TransferCommand.self],
        defaultSubcommand: ServeCommand.self
    )
}
