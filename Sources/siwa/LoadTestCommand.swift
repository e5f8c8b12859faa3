import ArgumentParser
import SIWASite

/// `siwa loadtest`: its options; the run is SIWASite's (``Site/loadTest(_:)``, over SIWALoadTest).
struct LoadTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Drives complete sign-in flows against `siwa serve` and prints the server's CPU per sign-in, throughput, latency, errors and memory.",
        discussion: """
        The app runs as its own `siwa serve` process (this binary, a production configuration pointed at the \
        emulator, SQLite in a temporary DATA_DIR unless --database-url), so its CPU time and memory are read from \
        /proc for it alone; the emulator and the load generator share this process. Each virtual browser signs one \
        emulator person in again and again: GET /auth/apple, the emulator's approval (in-process, like a person \
        clicking Continue), POST /auth/apple/callback, GET /account. The floor is the app's own JOSE code verifying \
        the two RS256 id_tokens of one sign-in, timed in the same run; the floor after idle times them again after \
        the load, one at a time, each after sleeping the mean interval between sign-ins (on a VM, code that runs \
        after a pause costs more CPU for the same work). --in-process runs the app in this process \
        instead. Build with `-c release` for numbers worth quoting. The last line is `RESULT {json}`.
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
    @Option(name: .customLong("server-setting"),
            help: ArgumentHelp("A setting of the app as NAME=VALUE (repeatable), e.g. EVENT_LOOP_THREADS=2, to compare configurations", valueName: "NAME=VALUE"))
    var serverSettings: [String] = []
    @Flag(inversion: .prefixedNo,
          help: "Run this process's threads (browsers, emulator) under SCHED_BATCH so that they never preempt the separate server mid-request")
    var yieldToServer = true

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

    func validate() throws {
        guard (1...10_000).contains(concurrency) else { throw ValidationError("--concurrency must be 1…10000") }
        guard latencyMs >= 0 else { throw ValidationError("--latency-ms must not be negative") }
        guard duration > 0, duration <= 3600 else { throw ValidationError("--duration must be in (0, 3600] seconds") }
        guard warmup >= 0, warmup <= 600 else { throw ValidationError("--warmup must be in [0, 600] seconds") }
        _ = try settingOverrides
    }

    func run() async throws {
        let options = LoadOptions(concurrency: concurrency, latencyMs: latencyMs, duration: duration, warmup: warmup,
                                  yieldToServer: yieldToServer, databaseURL: databaseUrl, inProcess: inProcess,
                                  logLevel: logLevel, serverSettings: try settingOverrides)
        let report = try await Site.loadTest(options)
        report.printText()
        if report.errors > 0 { throw ExitCode(1) }
    }
}
