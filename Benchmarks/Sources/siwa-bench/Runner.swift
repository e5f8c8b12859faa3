import Foundation

/// Who a measured case stands for, so the table can print the ratios the issue asks for.
enum Role: Sendable {
    /// The bare OpenSSL loop in C: what the same signature work costs with nothing around it.
    case ceiling
    /// Our code (JOSE, AppleSignIn, SIWAWeb).
    case ours
    /// vapor/jwt-kit, the library a Swift server would otherwise use.
    case jwtKit
    /// One step of our code, measured alone to show where the time goes (no ratio printed).
    case part
}

/// One measured operation. `run(n)` performs `n` operations and returns the time they took, so a
/// case can leave out set-up work that is not part of what it measures (the callback case does not
/// count minting Apple's id_token, which is Apple's work, not ours).
struct BenchmarkCase: Sendable {
    let name: String
    let role: Role
    /// Operations per call of `run`, enough that the clock reads and the call cost vanish.
    let batch: Int
    let run: @Sendable (Int) async throws -> Duration
}

/// Cases measured together: their rounds interleave, so a burst of load from the other people on this
/// machine hits every case alike and the ratios within a group stay meaningful.
struct BenchmarkGroup: Sendable {
    let title: String
    let detail: String
    let cases: [BenchmarkCase]
}

/// The options of one run.
struct RunnerOptions: Sendable {
    /// Rounds per case; the reported figure is the median round.
    var rounds = 7
    /// Wall time each case runs in each round.
    var roundTime: Duration = .milliseconds(700)
    /// Wall time each case runs before the first round (page faults, caches, JIT-less warm-up of Foundation).
    var warmupTime: Duration = .milliseconds(300)
}

/// What one case measured: operations per second in each round.
struct CaseResult: Sendable {
    let benchmark: BenchmarkCase
    var rates: [Double] = []

    var median: Double {
        let sorted = rates.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    var minimum: Double { rates.min() ?? 0 }
    var maximum: Double { rates.max() ?? 0 }
    /// Microseconds per operation at the median rate.
    var microsecondsPerOperation: Double { median > 0 ? 1_000_000 / median : 0 }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Times `body` on the continuous clock.
func timed(_ body: () async throws -> Void) async rethrows -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    try await body()
    return clock.now - start
}

enum Runner {
    /// Runs `benchmark` in batches until `budget` of wall time has passed; returns operations per
    /// second over the time the case itself reported.
    static func measure(_ benchmark: BenchmarkCase, for budget: Duration) async throws -> Double {
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        var operations = 0
        var measured = Duration.zero
        repeat {
            measured += try await benchmark.run(benchmark.batch)
            operations += benchmark.batch
        } while clock.now < deadline
        return Double(operations) / measured.seconds
    }

    /// Warms every case up, then runs `options.rounds` interleaved rounds.
    static func run(_ group: BenchmarkGroup, options: RunnerOptions) async throws -> [CaseResult] {
        var results = group.cases.map { CaseResult(benchmark: $0) }
        for benchmark in group.cases {
            _ = try await measure(benchmark, for: options.warmupTime)
        }
        for _ in 0..<options.rounds {
            for index in results.indices {
                results[index].rates.append(try await measure(results[index].benchmark, for: options.roundTime))
            }
        }
        return results
    }

    /// The group's table: ops/s (median, min–max of the rounds), µs per op, and each of our cases as a
    /// ratio of the OpenSSL ceiling and of jwt-kit.
    static func report(_ group: BenchmarkGroup, _ results: [CaseResult], options: RunnerOptions) -> String {
        var lines: [String] = []
        lines.append("")
        lines.append("## \(group.title)")
        lines.append(group.detail)
        lines.append("median of \(options.rounds) interleaved rounds of \(format(options.roundTime.seconds, 1)) s per case, one task")
        lines.append("")
        let nameWidth = max(40, results.map(\.benchmark.name.count).max() ?? 0)
        lines.append(pad("case", nameWidth) + lpad("ops/s", 11) + lpad("min..max", 20) + lpad("µs/op", 10))
        lines.append(String(repeating: "-", count: nameWidth + 41))
        for result in results {
            lines.append(pad(result.benchmark.name, nameWidth)
                + lpad(format(result.median, 0), 11)
                + lpad(format(result.minimum, 0) + ".." + format(result.maximum, 0), 20)
                + lpad(format(result.microsecondsPerOperation, 2), 10))
        }
        let ceiling = results.first { $0.benchmark.role == .ceiling }
        let jwtKit = results.first { $0.benchmark.role == .jwtKit }
        let ours = results.filter { $0.benchmark.role == .ours }
        if !ours.isEmpty, ceiling != nil || jwtKit != nil {
            lines.append("")
            for result in ours {
                var parts: [String] = []
                if let ceiling { parts.append("ours/OpenSSL = \(format(result.median / ceiling.median, 2))") }
                if let jwtKit { parts.append("ours/jwt-kit = \(format(result.median / jwtKit.median, 2))") }
                lines.append("ratio  \(pad(result.benchmark.name, nameWidth))  " + parts.joined(separator: "   "))
            }
        }
        return lines.joined(separator: "\n")
    }

    static func format(_ value: Double, _ decimals: Int) -> String {
        String(format: "%.\(decimals)f", value)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    static func lpad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }
}
