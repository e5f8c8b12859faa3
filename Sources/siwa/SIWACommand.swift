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

    /// The command line is parsed (synchronously: no task has been enqueued yet), then, for every command but
    /// a load test against a separate server (``usesEventLoopExecutor(_:)``), NIO's event loops become Swift Concurrency's global executor, so a request's handler runs
    /// on the event loop its connection lives on instead of crossing to the cooperative pool and back for
    /// every read and write (profiled: 38 % of the server's CPU was the kernel switching between those
    /// threads); jobs run there as generic work (see ``EventLoopExecutor``), NIO's own installer is the
    /// fallback. Then the command runs as ArgumentParser's own `main` does; `siwa serve` first sets how many
    /// event loops there are (`EVENT_LOOP_THREADS`), which must happen before the first task starts them.
    static func main() async {
        SiteLogHandler.bootstrap()
        do {
            var command = try parseAsRoot()
            if usesEventLoopExecutor(command), !EventLoopExecutor.install() {
                NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
            }
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

    /// Every command but a load test against a separate `siwa serve`: that process holds only the load
    /// generator and the emulator, which are not what is measured. On the event loops their work stayed on
    /// the loop it started on and the process never used more than one core (0.98–1.04 at 512 browsers);
    /// each wave of sign-ins then held the emulator's endpoints up (probed with curl: `/auth/keys` answered
    /// in ~0.8 ms, but every ~0.8 s in 580–690 ms), which set the callback p99. On Swift's cooperative
    /// pool they use 1.1–1.2 cores, the stalls are 80–510 ms and the p99 552–655 ms (docs/performance-history.md). `--in-process` keeps the event
    /// loops: the app runs in that process.
    static func usesEventLoopExecutor(_ command: any ParsableCommand) -> Bool {
        guard let loadTest = command as? LoadTestCommand else { return true }
        return loadTest.inProcess
    }
}
