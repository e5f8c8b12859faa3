import ArgumentParser
import EventLoopExecutor
import NIOCore
import NIOPosix
import SIWASite

@main
struct SIWACommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "siwa",
        abstract: "Sign in with Apple for websites — the service, its Apple ID emulator and tools.",
        subcommands: [ServeCommand.self, EmulatorCommand.self, DoctorCommand.self, LoadTestCommand.self, TransferCommand.self],
        defaultSubcommand: ServeCommand.self
    )

    /// Before anything else runs (on the main thread, before the first task is enqueued): NIO's event loops
    /// become Swift Concurrency's global executor, so a request's handler runs on the event loop its
    /// connection lives on instead of crossing to the cooperative pool and back for every read and write
    /// (profiled: 38 % of the server's CPU was the kernel switching between those threads); jobs run there
    /// as generic work (see ``EventLoopExecutor``), NIO's own installer is the fallback. Then the
    /// command line is parsed and run as ArgumentParser's own `main` does; `siwa serve` first sets how
    /// many event loops there are (`EVENT_LOOP_THREADS`), which must happen before the first task starts
    /// them.
    static func main() async {
        if !EventLoopExecutor.install() {
            NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        }
        SiteLogHandler.bootstrap()
        do {
            var command = try parseAsRoot()
            if let serve = command as? ServeCommand {
                NIOSingletons.groupLoopCountSuggestion = serve.settings.eventLoopThreads()
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
