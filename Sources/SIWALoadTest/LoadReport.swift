import Foundation

/// Latency percentiles of one kind of sample, in milliseconds (nearest-rank on the sorted samples).
struct LatencySummary: Codable, Sendable {
    var count: Int
    var p50: Double
    var p90: Double
    var p99: Double
    var max: Double
    var mean: Double

    init(seconds samples: [Double]) {
        let sorted = samples.sorted()
        func rank(_ fraction: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let index = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
            return sorted[min(sorted.count - 1, Swift.max(0, index))] * 1000
        }
        count = sorted.count
        p50 = rank(0.50)
        p90 = rank(0.90)
        p99 = rank(0.99)
        max = (sorted.last ?? 0) * 1000
        mean = sorted.isEmpty ? 0 : sorted.reduce(0, +) / Double(sorted.count) * 1000
    }

    var line: String {
        String(format: "p50 %7.1f   p90 %7.1f   p99 %7.1f   max %7.1f   mean %7.1f  (n=%ld)", p50, p90, p99, max, mean, count)
    }
}

/// Everything one run measured; printed as text and as the `RESULT {json}` line.
public struct LoadReport: Codable, Sendable {
    /// `process`: the app ran as its own `siwa serve`; `in-process`: beside the emulator and the load generator.
    var server: String
    /// The `siwa` binary started as the server (`process`); nil in-process.
    var serverBinary: String?
    var concurrency: Int
    var tokenLatencyMilliseconds: Int
    var durationSeconds: Double
    var warmupSeconds: Double
    var database: String
    var flows: Int
    var callbacks: Int
    var flowsPerSecond: Double
    var callbacksPerSecond: Double
    var callbackLatency: LatencySummary
    var flowLatency: LatencySummary
    /// Mean of the app's own timing of its token-endpoint calls in the window (from `/metrics`).
    var tokenExchangeMeanMilliseconds: Double?
    /// Mean callback latency minus the mean token exchange: what the callback adds around the exchange.
    var callbackBeyondExchangeMilliseconds: Double?
    /// p50 of sequential GETs of a static file before the load: one loopback HTTP round trip.
    var loopbackRoundTripMilliseconds: Double
    public var errors: Int
    var errorsByKind: [String: Int]
    var warmupErrors: Int
    /// The server's CPU time (user + system, all threads) in the window divided by the sign-ins completed
    /// in it, in microseconds. In-process, the emulator's and the load generator's CPU is counted too.
    var serverCPUMicrosecondsPerSignIn: Double
    /// Two RS256 id_token verifications by the app's JOSE code, timed in this run (CPU microseconds).
    var floorMicrosecondsPerSignIn: Double
    /// `serverCPUMicrosecondsPerSignIn / floorMicrosecondsPerSignIn`.
    var ratioToFloor: Double
    /// The same two verifications timed one at a time, each after sleeping `floorIdleMilliseconds` (the
    /// mean interval between sign-ins, 1–20 ms), after the load: what this machine charges for running
    /// after an idle moment, on code that is neither HTTP nor the database.
    var floorAfterIdleMicrosecondsPerSignIn: Double
    var floorIdleMilliseconds: Double
    /// `serverCPUMicrosecondsPerSignIn / floorAfterIdleMicrosecondsPerSignIn`.
    var ratioToFloorAfterIdle: Double
    /// The server's CPU seconds per second of the window.
    var serverCPUCores: Double
    /// This process's (emulator and load generator) CPU seconds per second; nil in-process.
    var loadGeneratorCPUCores: Double?
    /// "batch" when this process's threads ran under `SCHED_BATCH` beside the server's process
    /// (`--yield-to-server`, the default), else "normal" and why.
    var loadGeneratorScheduling: String
    var cores: Int
    /// Peak resident memory (VmHWM) of the server's process, in MB; in-process it includes everything.
    var serverPeakRSSMegabytes: Double
    var serverRSSAtEndMegabytes: Double
    /// This process's peak RSS; nil in-process.
    var loadGeneratorPeakRSSMegabytes: Double?
    /// The machine's 1-minute load average at the end (/proc/loadavg): other processes compete for the cores.
    var loadAverage: Double

    public func printText() {
        let errorKinds = errorsByKind.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: "; ")
        let errorLine = "\(errors)" + (errorKinds.isEmpty ? "" : "  " + errorKinds)
            + (warmupErrors > 0 ? "   (and \(warmupErrors) during warm-up)" : "")
        let tokenMean = tokenExchangeMeanMilliseconds.map { fmt($0) } ?? "n/a"
        let beyond = callbackBeyondExchangeMilliseconds.map { fmt($0) } ?? "n/a"
        print("""

        siwa-loadtest — server \(server)\(serverBinary.map { " (\($0) serve)" } ?? ""), \(concurrency) virtual browsers, token endpoint latency \(tokenLatencyMilliseconds) ms, \
        \(fmt(durationSeconds)) s measured after \(fmt(warmupSeconds)) s warm-up, database \(database)
          flows completed       \(flows)   (\(fmt(flowsPerSecond)) flows/s)
          callbacks completed   \(callbacks)   (\(fmt(callbacksPerSecond)) callbacks/s)
          callback latency ms   \(callbackLatency.line)
          flow latency ms       \(flowLatency.line)
          token exchange ms     \(tokenMean) mean as the app timed it; the callback adds \(beyond) ms around it \
        (one loopback round trip: \(fmt(loopbackRoundTripMilliseconds)) ms)
          errors                \(errorLine)
          server CPU            \(fmt(serverCPUMicrosecondsPerSignIn)) µs per sign-in (\(fmt(serverCPUCores)) of \(cores) cores)\
        \(server == "process" ? "" : " (\(inProcessNote))")
          floor                 \(fmt(floorMicrosecondsPerSignIn)) µs per sign-in (two RS256 id_token verifications by JOSE, \
        timed in this run); server CPU is \(fmt(ratioToFloor)) × the floor
          floor after idle      \(fmt(floorAfterIdleMicrosecondsPerSignIn)) µs per sign-in (the same verifications one at a time, \
        each after \(fmt(floorIdleMilliseconds)) ms asleep, the mean interval between sign-ins); server CPU is \
        \(fmt(ratioToFloorAfterIdle)) × that
          load generator        \(loadGeneratorCPUCores.map { "\(fmt($0)) cores (emulator and browsers, this process)" } ?? "in the server's process"), \
        scheduling \(loadGeneratorScheduling); machine load average \(fmt(loadAverage))
          server peak RSS       \(fmt(serverPeakRSSMegabytes)) MB (VmHWM of the server's process\(server == "process" ? "" : ", \(inProcessNote)")); \
        \(fmt(serverRSSAtEndMegabytes)) MB at the end
        """)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        print("RESULT \(json)")
    }

    private var inProcessNote: String { "in-process: includes the emulator and the load generator" }

    private func fmt(_ value: Double) -> String { String(format: "%.1f", value) }
}
