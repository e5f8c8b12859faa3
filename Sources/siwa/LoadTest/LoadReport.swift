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
struct LoadReport: Codable, Sendable {
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
    var errors: Int
    var errorsByKind: [String: Int]
    var warmupErrors: Int
    /// CPU seconds the whole process used per second of the window (app, emulator and load generator).
    var processCPUCores: Double
    var cores: Int
    /// Peak resident memory of the process (VmHWM), in MB: app, emulator and load generator together.
    var peakRSSMegabytes: Double
    var rssAtEndMegabytes: Double
    /// The machine's 1-minute load average at the end (/proc/loadavg): other processes compete for the cores.
    var loadAverage: Double

    func printText() {
        let errorKinds = errorsByKind.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }.joined(separator: "; ")
        let errorLine = "\(errors)" + (errorKinds.isEmpty ? "" : "  " + errorKinds)
            + (warmupErrors > 0 ? "   (and \(warmupErrors) during warm-up)" : "")
        let tokenMean = tokenExchangeMeanMilliseconds.map { fmt($0) } ?? "n/a"
        let beyond = callbackBeyondExchangeMilliseconds.map { fmt($0) } ?? "n/a"
        print("""

        siwa loadtest — \(concurrency) virtual browsers, token endpoint latency \(tokenLatencyMilliseconds) ms, \
        \(fmt(durationSeconds)) s measured after \(fmt(warmupSeconds)) s warm-up, database \(database)
          flows completed       \(flows)   (\(fmt(flowsPerSecond)) flows/s)
          callbacks completed   \(callbacks)   (\(fmt(callbacksPerSecond)) callbacks/s)
          callback latency ms   \(callbackLatency.line)
          flow latency ms       \(flowLatency.line)
          token exchange ms     \(tokenMean) mean as the app timed it; the callback adds \(beyond) ms around it \
        (one loopback round trip: \(fmt(loopbackRoundTripMilliseconds)) ms)
          errors                \(errorLine)
          CPU                   \(fmt(processCPUCores)) of \(cores) cores busy (this process: app, emulator and load generator); \
        machine load average \(fmt(loadAverage))
          peak RSS              \(fmt(peakRSSMegabytes)) MB (VmHWM of this process: the server runs in-process, so this \
        includes the emulator and the load generator); \(fmt(rssAtEndMegabytes)) MB at the end
        """)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        print("RESULT \(json)")
    }

    private func fmt(_ value: Double) -> String { String(format: "%.1f", value) }
}

/// Readings of this process from /proc (Linux).
enum ProcessStats {
    /// Peak and current resident set size in MB, from /proc/self/status (VmHWM, VmRSS).
    static func memoryMegabytes() -> (peak: Double, current: Double) {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
        func kilobytes(_ field: String) -> Double {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return 0 }
            return Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return (kilobytes("VmHWM") / 1024, kilobytes("VmRSS") / 1024)
    }

    /// The 1-minute load average of the machine.
    static func loadAverage() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return 0 }
        return Double(text.split(separator: " ").first ?? "") ?? 0
    }

    /// User + system CPU seconds used so far, from /proc/self/stat (fields 14 and 15, in clock ticks).
    static func cpuSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        // After the command name in parentheses: field 3 is at offset 0, so utime (14) is at 11.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
