import ArgumentParser
import SIWASite
import SIWAWeb

/// `siwa-loadtest`: its options, parsed and checked here; the run is ``LoadTest/run(_:)``. The executable
/// (Sources/siwa-loadtest) only calls ``main()``.
public struct LoadTestCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "siwa-loadtest",
        abstract: "Drives complete sign-in flows against `siwa serve` and prints the server's CPU per sign-in, throughput, latency, errors and memory.",
        discussion: """
        The app runs as its own `siwa serve` process (the `siwa` binary beside this one, from the same build, or \
        --siwa PATH; a production configuration pointed at the emulator, SQLite in a temporary DATA_DIR unless \
        --database-url), so its CPU time and memory are read from /proc for it alone; the emulator and the load \
        generator share this process. Each virtual browser signs one emulator person in again and again: GET \
        /auth/apple, the emulator's approval (in-process, like a person clicking Continue), POST \
        /auth/apple/callback, GET /account. The floor is the app's own JOSE code verifying the two RS256 id_tokens \
        of one sign-in, timed in the same run; the floor after idle times them again after the load, one at a \
        time, each after sleeping the mean interval between sign-ins (on a VM, code that runs after a pause costs \
        more CPU for the same work). --in-process runs the app in this process instead, built by SIWASite as \
        `siwa serve` builds it. Build both products with `-c release` for numbers worth quoting: \
        `swift build -c release --product siwa && swift build -c release --product siwa-loadtest`. The last \
        line is `RESULT {json}`.
        """
    )

    @Option(help: "Virtual browsers signing in at once") var concurrency = 64
    @Option(help: "Latency injected at the emulator's token endpoint, in milliseconds") var latencyMs = 0
    @Option(help: "Seconds measured") var duration: Double = 10
    @Option(help: "Seconds of load before measuring starts") var warmup: Double = 2
    @Option(help: "DATABASE_URL for the app (default: SQLite in a temporary DATA_DIR); use a scratch database")
    var databaseUrl: String?
    @Option(help: "Log level of the app and emulator") var logLevel = "warning"
    @Flag(help: "Run the app in this process, beside the emulator and the load generator (the earlier mode)")
    var inProcess = false
    @Option(help: ArgumentHelp("The siwa binary to start as the server (default: the siwa beside this executable, the same build)",
                               valueName: "PATH"))
    var siwa: String?
    @Option(name: .customLong("server-setting"),
            help: ArgumentHelp("A setting of the app as NAME=VALUE (repeatable), e.g. EVENT_LOOP_THREADS=2, to compare configurations", valueName: "NAME=VALUE"))
    var serverSettings: [String] = []
    @Flag(inversion: .prefixedNo,
          help: "Run this process's threads (browsers, emulator) under SCHED_BATCH so that they never preempt the separate server mid-request")
    var yieldToServer = true

    public init() {}

    /// `--server-setting`s by name.
    var settingOverrides: [String: String] {
        get throws {
            var values: [String: String] = [:]
            for pair in serverSettings {
                guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                    throw ValidationError("--server-setting takes NAME=VALUE, got \(pair)")
                }
                values[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
            }
            return values
        }
    }

    public func validate() throws {
        guard (1...10_000).contains(concurrency) else { throw ValidationError("--concurrency must be 1…10000") }
        guard latencyMs >= 0 else { throw ValidationError("--latency-ms must not be negative") }
        guard duration > 0, duration <= 3600 else { throw ValidationError("--duration must be in (0, 3600] seconds") }
        guard warmup >= 0, warmup <= 600 else { throw ValidationError("--warmup must be in [0, 600] seconds") }
        if inProcess, siwa != nil { throw ValidationError("--siwa names the server's binary; --in-process runs none") }
        _ = try settingOverrides
    }

    /// What the run is asked to do.
    var options: LoadOptions {
        get throws {
            LoadOptions(concurrency: concurrency, latencyMs: latencyMs, duration: duration, warmup: warmup,
                        yieldToServer: yieldToServer, databaseURL: databaseUrl, inProcess: inProcess, siwaBinary: siwa,
                        logLevel: logLevel, serverSettings: try settingOverrides)
        }
    }

    /// Log lines as `siwa` writes them (SIWASite's handler, `LOG_FORMAT`), then the run; a run that could not
    /// start or finish is one line on standard error and exit status 1, as is a run that saw errors.
    public func run() async throws {
        SiteLogHandler.bootstrap()
        let report: LoadReport
        do {
            report = try await LoadTest.run(try options)
        } catch let error as LoadTestError {
            SiteProcess.printFailure("siwa-loadtest: \(error)")
            throw ExitCode(1)
        } catch let error as ConfigurationError {
            SiteProcess.printFailure("siwa-loadtest: \(error)")
            throw ExitCode(1)
        } catch let failure as SiteFailure {
            SiteProcess.printFailure("siwa-loadtest: \(failure)")
            throw ExitCode(1)
        }
        report.printText()
        if report.errors > 0 { throw ExitCode(1) }
    }
}
