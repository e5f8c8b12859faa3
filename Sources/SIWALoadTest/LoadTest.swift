import Logging

/// What one `siwa-loadtest` run is asked to do (its command-line options, parsed: ``LoadTestCommand``).
public struct LoadOptions: Sendable {
    /// Virtual browsers signing in at once.
    public var concurrency: Int
    /// Latency injected at the emulator's token endpoint, in milliseconds.
    public var latencyMs: Int
    /// Seconds measured, after `warmup` seconds of load.
    public var duration: Double
    public var warmup: Double
    /// Whether this process's threads run under `SCHED_BATCH` beside a separate server (``LoadGeneratorScheduling``).
    public var yieldToServer: Bool
    /// The app's `DATABASE_URL`; nil: SQLite in the run's temporary `DATA_DIR`.
    public var databaseURL: String?
    /// Whether the app runs in this process instead of as its own `siwa serve`.
    public var inProcess: Bool
    /// The `siwa` binary to start as the server; nil: the one beside this executable (the same build).
    public var siwaBinary: String?
    /// Log level of the app and the emulator.
    public var logLevel: String
    /// Settings of the app by name; they win over the load test's own.
    public var serverSettings: [String: String]

    public init(concurrency: Int, latencyMs: Int, duration: Double, warmup: Double, yieldToServer: Bool,
                databaseURL: String?, inProcess: Bool, siwaBinary: String? = nil, logLevel: String,
                serverSettings: [String: String]) {
        self.concurrency = concurrency
        self.latencyMs = latencyMs
        self.duration = duration
        self.warmup = warmup
        self.yieldToServer = yieldToServer
        self.databaseURL = databaseURL
        self.inProcess = inProcess
        self.siwaBinary = siwaBinary
        self.logLevel = logLevel
        self.serverSettings = serverSettings
    }
}

/// `siwa-loadtest`: complete sign-in flows against the app — a separate `siwa serve` process by default —
/// and the emulator (in this process), with a chosen latency at Apple's token endpoint.
public enum LoadTest {
    /// Starts the app (its own `siwa serve` process, or with `inProcess` the app SIWASite builds) and the
    /// emulator, runs the load, stops them, and returns what was measured (print it with
    /// ``LoadReport/printText()``). A run that could not start or finish throws ``LoadTestError``; a bad
    /// setting of the app, the settings table's ``ConfigurationError``.
    public static func run(_ options: LoadOptions) async throws -> LoadReport {
        var logger = Logger(label: "siwa")
        logger.logLevel = Logger.Level(rawValue: options.logLevel.lowercased()) ?? .info
        return try await LoadEnvironment.run(siwaBinary: options.siwaBinary, databaseURL: options.databaseURL, inProcess: options.inProcess,
                                             logLevel: options.logLevel, overrides: options.serverSettings,
                                             logger: logger) { environment in
            try await LoadRun(options: options, environment: environment).run()
        }
    }
}
