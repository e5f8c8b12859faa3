import AppleIDEmulator
import ArgumentParser
import CurlHTTP
import Foundation
import Logging

/// `siwa loadtest`: complete sign-in flows against the app and the emulator, both started in this
/// process on loopback, with a chosen latency at Apple's token endpoint.
struct LoadTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Drives complete sign-in flows against an in-process app and emulator and prints throughput, latency, errors and memory.",
        discussion: """
        Each virtual browser signs one emulator person in again and again: GET /auth/apple, the emulator's \
        approval (in-process, like a person clicking Continue), POST /auth/apple/callback, GET /account. \
        The app, the emulator and the load generator share this process and its cores. Build with \
        `-c release` for numbers worth quoting. The last line is `RESULT {json}`.
        """
    )

    @Option(help: "Virtual browsers signing in at once") var concurrency = 64
    @Option(help: "Latency injected at the emulator's token endpoint, in milliseconds") var latencyMs = 0
    @Option(help: "Seconds measured") var duration: Double = 10
    @Option(help: "Seconds of load before measuring starts") var warmup: Double = 2
    @Option(help: "DATABASE_URL for the app (default: SQLite in a temporary DATA_DIR); use a scratch database")
    var databaseUrl: String?
    @Option(help: "Log level of the app and emulator") var logLevel = "warning"

    func validate() throws {
        guard (1...10_000).contains(concurrency) else { throw ValidationError("--concurrency must be 1…10000") }
        guard latencyMs >= 0 else { throw ValidationError("--latency-ms must not be negative") }
        guard duration > 0, duration <= 3600 else { throw ValidationError("--duration must be in (0, 3600] seconds") }
        guard warmup >= 0, warmup <= 600 else { throw ValidationError("--warmup must be in [0, 600] seconds") }
    }

    func run() async throws {
        let logger = makeLogger(level: logLevel)
        let options = LoadOptions(concurrency: concurrency, latencyMs: latencyMs, duration: duration, warmup: warmup)
        let report = try await LoadEnvironment.run(databaseURL: databaseUrl, logger: logger) { environment in
            try await LoadRun(options: options, environment: environment).run()
        }
        report.printText()
        if report.errors > 0 { throw ExitCode(1) }
    }
}

/// The knobs of one run.
struct LoadOptions: Sendable {
    var concurrency: Int
    var latencyMs: Int
    var duration: Double
    var warmup: Double
}

/// One load run over a started environment.
struct LoadRun: Sendable {
    let options: LoadOptions
    let environment: LoadEnvironment

    func run() async throws -> LoadReport {
        var clientConfiguration = CurlHTTPClient.Configuration()
        // One keep-alive connection per browser, as real browsers would each hold their own.
        clientConfiguration.maximumConnectionsPerHost = options.concurrency + 8
        clientConfiguration.maximumTotalConnections = options.concurrency + 8
        clientConfiguration.defaultTimeout = .seconds(30)
        let http = CurlHTTPClient(configuration: clientConfiguration)
        do {
            let report = try await run(http)
            await http.shutdown()
            return report
        } catch {
            await http.shutdown()
            throw error
        }
    }

    private func run(_ http: CurlHTTPClient) async throws -> LoadReport {
        let configuration = environment.configuration
        let appURL = environment.appURL
        let roundTrip = try await loopbackRoundTrip(http)
        await environment.emulator.injectFault(
            EmulatorFault(kind: .latency, latencyMilliseconds: options.latencyMs), for: .token)

        var browsers: [VirtualBrowser] = []
        for index in 0..<options.concurrency {
            let person = await environment.emulator.createPerson(
                givenName: "Load", familyName: "Tester \(index + 1)", email: "load\(index + 1)@example.com")
            browsers.append(VirtualBrowser(http: http, emulator: environment.emulator, appURL: appURL,
                                           clientID: configuration.clientID, redirectURI: configuration.redirectURI,
                                           personID: person.id))
        }

        let clock = ContinuousClock()
        let measureStart = clock.now.advanced(by: .milliseconds(Int64(options.warmup * 1000)))
        let end = measureStart.advanced(by: .milliseconds(Int64(options.duration * 1000)))
        print("siwa loadtest: app \(appURL), emulator \(configuration.appleBaseURL), \(options.concurrency) browsers, "
              + "token latency \(options.latencyMs) ms, warm-up \(options.warmup) s, measuring \(options.duration) s …")

        // Readings at the window's edges, taken beside the load.
        let window = Task { () -> (cpu: Double, token: (sum: Double, count: Double)?) in
            try? await Task.sleep(until: measureStart, clock: clock)
            let cpuStart = ProcessStats.cpuSeconds()
            let tokenStart = await tokenExchangeTotals(http, appURL: appURL)
            try? await Task.sleep(until: end, clock: clock)
            let cpu = ProcessStats.cpuSeconds() - cpuStart
            let tokenEnd = await tokenExchangeTotals(http, appURL: appURL)
            guard let tokenStart, let tokenEnd else { return (cpu, nil) }
            return (cpu, (tokenEnd.sum - tokenStart.sum, tokenEnd.count - tokenStart.count))
        }

        let tallies = await withTaskGroup(of: BrowserTally.self) { group in
            for browser in browsers { group.addTask { await browser.run(until: end) } }
            var all: [BrowserTally] = []
            for await tally in group { all.append(tally) }
            return all
        }
        let readings = await window.value
        await environment.emulator.clearFaults()

        let inWindow = { (instant: ContinuousClock.Instant) in instant >= measureStart && instant <= end }
        let callbacks = tallies.flatMap(\.callbacks).filter { inWindow($0.at) }.map(\.seconds)
        let flows = tallies.flatMap(\.flows).filter { inWindow($0.at) }.map(\.seconds)
        var errorsByKind: [String: Int] = [:]
        var warmupErrors = 0
        for error in tallies.flatMap(\.errors) {
            if error.at < measureStart { warmupErrors += 1 } else { errorsByKind[error.kind, default: 0] += 1 }
        }
        let callbackLatency = LatencySummary(seconds: callbacks)
        let tokenMean = readings.token.flatMap { $0.count > 0 ? $0.sum / $0.count * 1000 : nil }
        let memory = ProcessStats.memoryMegabytes()
        return LoadReport(
            concurrency: options.concurrency, tokenLatencyMilliseconds: options.latencyMs,
            durationSeconds: options.duration, warmupSeconds: options.warmup,
            database: configuration.databaseURL.redactedDescription,
            flows: flows.count, callbacks: callbacks.count,
            flowsPerSecond: Double(flows.count) / options.duration,
            callbacksPerSecond: Double(callbacks.count) / options.duration,
            callbackLatency: callbackLatency, flowLatency: LatencySummary(seconds: flows),
            tokenExchangeMeanMilliseconds: tokenMean,
            callbackBeyondExchangeMilliseconds: tokenMean.map { callbackLatency.mean - $0 },
            loopbackRoundTripMilliseconds: roundTrip,
            errors: errorsByKind.values.reduce(0, +), errorsByKind: errorsByKind, warmupErrors: warmupErrors,
            processCPUCores: readings.cpu / options.duration, cores: ProcessInfo.processInfo.activeProcessorCount,
            peakRSSMegabytes: memory.peak, rssAtEndMegabytes: memory.current,
            loadAverage: ProcessStats.loadAverage())
    }

    /// p50 of 200 sequential GETs of a small static file: one HTTP round trip over loopback, no database.
    private func loopbackRoundTrip(_ http: CurlHTTPClient) async throws -> Double {
        let clock = ContinuousClock()
        var samples: [Double] = []
        for _ in 0..<200 {
            let start = clock.now
            let response = try await http.execute(HTTPClientRequest(url: environment.appURL + "/favicon.svg"))
            guard response.status == 200 else { throw ValidationError("GET /favicon.svg answered \(response.status)") }
            samples.append(VirtualBrowser.seconds(clock.now - start))
        }
        return LatencySummary(seconds: samples).p50
    }

    /// The app's own running totals of successful token-endpoint calls (seconds, count), from `/metrics`.
    private func tokenExchangeTotals(_ http: CurlHTTPClient, appURL: String) async -> (sum: Double, count: Double)? {
        guard let response = try? await http.execute(HTTPClientRequest(url: appURL + "/metrics")), response.status == 200
        else { return nil }
        var sum: Double?
        var count: Double?
        for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n")
        where line.contains("endpoint=\"token\"") && line.contains("result=\"ok\"") {
            let value = line.split(separator: " ").last.flatMap { Double($0) }
            if line.hasPrefix("siwa_apple_call_duration_seconds_sum") { sum = value }
            if line.hasPrefix("siwa_apple_call_duration_seconds_count") { count = value }
        }
        guard let sum, let count else { return (0, 0) }
        return (sum, count)
    }
}
