import ArgumentParser
import SIWASite

@main
struct SIWACommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "siwa",
        abstract: "Sign in with Apple for websites — the service, its Apple ID emulator and tools.",
        subcommands: [ServeCommand.self, EmulatorCommand.self, DoctorCommand.self, TransferCommand.self, AdminCommand.self],
        defaultSubcommand: ServeCommand.self
    )

    /// The command line is parsed, then the command runs as ArgumentParser's own `main` does; `siwa serve`
    /// first sets how many event loops there are (`EVENT_LOOP_THREADS`), which must happen before the first
    /// task starts them. Tasks run on Swift's own global executor, as in every in-process test suite (a
    /// hand-built executor on NIO's loops measured about 3 % at 512 browsers and was removed: the ledger of
    /// hand-built layers in docs/architecture.md).
    static func main() async {
        SiteLogHandler.bootstrap()
        do {
            var command = try parseAsRoot()
            if let serve = command as? ServeCommand {
                Site.useEventLoopThreads(serve.settings.eventLoopThreads())
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as SiteFailure {
            SiteProcess.printFailure(failure.description)
            exit(withError: ExitCode(1))
        } catch {
            // With LOG_FORMAT=json a usage error is one JSON line too (its message, without the usage);
            // help and a clean exit stay ArgumentParser's.
            let code = exitCode(for: error)
            if SiteProcess.logsJSON && !code.isSuccess {
                let message = self.message(for: error)
                if !message.isEmpty { SiteProcess.printFailure(message) }
                exit(withError: code)
            }
            exit(withError: error)
        }
    }
}
