import CurlHTTP
import Foundation
import JOSE
import Logging

// siwa-bench: every number of the performance section in one run, so the ratios compare figures taken
// under the same load on a shared machine. Usage:
//   siwa-bench [--rounds N] [--seconds S] [--only rs256,rs256-steps,es256,callback] [--quick]

struct Arguments {
    var options = RunnerOptions()
    var groups: Set<String> = ["rs256", "rs256-steps", "es256", "callback"]

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--quick":
                options.rounds = 3
                options.roundTime = .milliseconds(200)
                options.warmupTime = .milliseconds(100)
            case "--rounds":
                guard let value = rest.popFirst().flatMap(Int.init), value > 0 else { throw BenchError("--rounds wants a positive count") }
                options.rounds = value
            case "--seconds":
                guard let value = rest.popFirst().flatMap(Double.init), value > 0, value <= 10 else {
                    throw BenchError("--seconds wants a time per round between 0 and 10")
                }
                options.roundTime = .milliseconds(Int64(value * 1000))
            case "--only":
                guard let value = rest.popFirst() else { throw BenchError("--only wants rs256, rs256-steps, es256 and/or callback") }
                groups = Set(value.split(separator: ",").map(String.init))
            case "--help", "-h":
                print("siwa-bench [--rounds N] [--seconds S] [--only rs256,rs256-steps,es256,callback] [--quick]")
                exit(0)
            default:
                throw BenchError("unknown argument \(argument)")
            }
        }
    }
}

/// What this machine is, printed with the numbers (they mean nothing without it).
func machineDescription() -> String {
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
        .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown CPU"
    let load = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
    let date = ISO8601DateFormatter().string(from: Date())
    return """
        date \(date); \(ProcessInfo.processInfo.activeProcessorCount) cores, \(model); load average \(load)
        \(BareKey.openSSLVersion); release build
        """
}

LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .warning
    return handler
}

do {
    let arguments = try Arguments(Array(CommandLine.arguments.dropFirst()))
    var logger = Logger(label: "siwa.bench")
    logger.logLevel = .warning
    print("# siwa micro-benchmarks")
    print(machineDescription())

    let appleKey = try RSAPrivateKey.generate(bits: 2048)
    let apple = try await LoopbackApple.start(key: appleKey)
    defer { apple.stop() }
    let http = CurlHTTPClient()

    var summary: [String] = []
    if arguments.groups.contains("rs256") {
        let (group, _) = try await IdentityTokenBenchmarks.make(apple: apple, http: http)
        let results = try await Runner.run(group, options: arguments.options)
        print(Runner.report(group, results, options: arguments.options))
        if let ceiling = results.first(where: { $0.benchmark.role == .ceiling }),
           let jwtKit = results.first(where: { $0.benchmark.role == .jwtKit }) {
            for ours in results where ours.benchmark.role == .ours {
                let ofOpenSSL = ours.median / ceiling.median, ofJWTKit = ours.median / jwtKit.median
                summary.append("\(ours.benchmark.name): \(Runner.format(ofOpenSSL, 2)) × OpenSSL (target ≥ 0.80: \(ofOpenSSL >= 0.8 ? "met" : "MISSED")), "
                    + "\(Runner.format(ofJWTKit, 2)) × jwt-kit (target ≥ 1.00: \(ofJWTKit >= 1 ? "met" : "MISSED"))")
            }
        }
    }
    if arguments.groups.contains("rs256-steps") {
        let group = try IdentityTokenBenchmarks.parts(apple: apple)
        print(Runner.report(group, try await Runner.run(group, options: arguments.options), options: arguments.options))
    }
    if arguments.groups.contains("es256") {
        let group = try await ClientSecretBenchmarks.make()
        let results = try await Runner.run(group, options: arguments.options)
        print(Runner.report(group, results, options: arguments.options))
    }
    if arguments.groups.contains("callback") {
        var options = arguments.options
        // A sign-in takes milliseconds: fewer, longer rounds give each round enough operations.
        options.rounds = max(3, options.rounds - 2)
        options.roundTime = options.roundTime * 2
        print(try await CallbackBenchmark.run(apple: apple, options: options, logger: logger))
    }
    await http.shutdown()
    if !summary.isEmpty {
        print("\n## Targets (issue 6)")
        for line in summary { print(line) }
    }
} catch {
    FileHandle.standardError.write(Data("siwa-bench: \(error)\n".utf8))
    exit(1)
}
