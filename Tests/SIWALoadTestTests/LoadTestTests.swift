import CurlHTTP
import Foundation
import Testing

@testable import SIWALoadTest

/// A short load against the demo site with the emulator: counts and errors of a real run, in this process
/// and against a `siwa serve` it starts.
@Suite("siwa-loadtest runs")
struct LoadRunTests {
    /// A second of load by two browsers; this process's threads keep their scheduling (the test runner's
    /// other suites share them).
    static func options(inProcess: Bool, siwa: String? = nil) -> LoadOptions {
        LoadOptions(concurrency: 2, latencyMs: 0, duration: 1, warmup: 0.5, yieldToServer: false, databaseURL: nil,
                    inProcess: inProcess, siwaBinary: siwa, logLevel: "error", serverSettings: [:])
    }

    /// `siwa` beside the test bundle (`swift build --build-tests` builds it too), where the load test looks.
    static var siwaBesideTests: String? { try? ServerProcess.siwaBesideThisExecutable() }

    /// What every good run reports: sign-ins in the window, no errors, the figures derived from the counts.
    static func expectGoodRun(_ report: LoadReport) {
        #expect(report.errors == 0 && report.errorsByKind.isEmpty, "\(report.errorsByKind)")
        #expect(report.flows > 0)
        // a flow and its callback are counted by when each ended: at most one of each browser's flows straddles
        // either edge of the window
        #expect(abs(report.callbacks - report.flows) <= report.concurrency, "\(report.callbacks) callbacks, \(report.flows) flows")
        #expect(report.callbackLatency.count == report.callbacks && report.flowLatency.count == report.flows)
        #expect(report.flowsPerSecond == Double(report.flows) / report.durationSeconds)
        #expect(report.callbacksPerSecond == Double(report.callbacks) / report.durationSeconds)
        #expect(report.flowLatency.p50 >= report.callbackLatency.p50 && report.flowLatency.p50 > 0)
        #expect(report.concurrency == 2 && report.durationSeconds == 1 && report.warmupSeconds == 0.5)
        #expect(report.floorMicrosecondsPerSignIn > 0 && report.floorMicrosecondsPerSignIn < 10_000)
        #expect(report.serverCPUMicrosecondsPerSignIn > 0)
        #expect(abs(report.ratioToFloor - report.serverCPUMicrosecondsPerSignIn / report.floorMicrosecondsPerSignIn) < 1e-9)
        #expect(report.loopbackRoundTripMilliseconds > 0)
        #expect(report.database.hasPrefix("sqlite:") && report.database.hasSuffix("/siwa.sqlite"))
    }

    @Test("in-process: the site SIWASite assembles, beside the emulator, signs people in without an error")
    func inProcess() async throws {
        let report = try await LoadTest.run(Self.options(inProcess: true))
        Self.expectGoodRun(report)
        #expect(report.server == "in-process" && report.serverBinary == nil)
        #expect(report.loadGeneratorCPUCores == nil && report.loadGeneratorScheduling == "normal")
    }

    @Test("a process: the siwa of the same build, started as siwa serve, signs people in without an error",
          .enabled(if: LoadRunTests.siwaBesideTests != nil))
    func serverProcess() async throws {
        let siwa = try #require(Self.siwaBesideTests)
        let report = try await LoadTest.run(Self.options(inProcess: false))
        Self.expectGoodRun(report)
        #expect(report.server == "process" && report.serverBinary == siwa)
        #expect(report.loadGeneratorCPUCores != nil && report.serverPeakRSSMegabytes > 1)
        // --no-yield-to-server: this process's threads were left alone
        #expect(report.loadGeneratorScheduling == "normal")
    }

    @Test("a siwa that is not there stops the run with one line naming the path")
    func missingSiwa() async throws {
        let path = NSTemporaryDirectory() + "no-such-siwa-\(UUID().uuidString)"
        do {
            _ = try await LoadTest.run(Self.options(inProcess: false, siwa: path))
            Issue.record("the run started without a siwa")
        } catch let error as LoadTestError {
            #expect(error.description.contains(path) && !error.description.contains("\n"), "\(error)")
        }
    }
}

/// `siwa-loadtest`'s arguments, parsed and checked, as plain values.
@Suite("siwa-loadtest arguments")
struct LoadTestArgumentTests {
    @Test("the defaults: 64 browsers, 10 s after 2 s of warm-up, a siwa serve of the same build, yielding to it")
    func defaults() throws {
        let options = try LoadTestCommand.parse([]).options
        #expect(options.concurrency == 64 && options.latencyMs == 0 && options.duration == 10 && options.warmup == 2)
        #expect(!options.inProcess && options.siwaBinary == nil && options.yieldToServer)
        #expect(options.databaseURL == nil && options.logLevel == "warning" && options.serverSettings.isEmpty)
    }

    @Test("every option reaches the run's options; --server-setting splits at the first =")
    func everyOption() throws {
        let command = try LoadTestCommand.parse([
            "--concurrency", "16", "--latency-ms", "200", "--duration", "3.5", "--warmup", "0",
            "--database-url", "postgres://load:secret@127.0.0.1:5432/scratch", "--log-level", "debug",
            "--server-setting", "EVENT_LOOP_THREADS=2", "--server-setting", "METRICS_TOKEN=a=b", "--no-yield-to-server",
            "--siwa", "/opt/siwa/bin/siwa",
        ])
        let options = try command.options
        #expect(options.concurrency == 16 && options.latencyMs == 200 && options.duration == 3.5 && options.warmup == 0)
        #expect(options.databaseURL == "postgres://load:secret@127.0.0.1:5432/scratch" && options.logLevel == "debug")
        #expect(options.serverSettings == ["EVENT_LOOP_THREADS": "2", "METRICS_TOKEN": "a=b"])
        #expect(!options.yieldToServer && !options.inProcess && options.siwaBinary == "/opt/siwa/bin/siwa")
        #expect(try LoadTestCommand.parse(["--in-process"]).options.inProcess)
    }

    @Test("out of range or malformed: refused before anything starts, the message naming the option", arguments: [
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "10001"], "--concurrency"),
        (["--latency-ms", "-1"], "--latency-ms"),
        (["--duration", "0"], "--duration"),
        (["--duration", "3601"], "--duration"),
        (["--warmup", "-1"], "--warmup"),
        (["--warmup", "601"], "--warmup"),
        (["--server-setting", "EVENT_LOOP_THREADS"], "NAME=VALUE"),
        (["--server-setting", "=2"], "NAME=VALUE"),
        (["--in-process", "--siwa", "/usr/bin/siwa"], "--siwa"),
        (["loadtest"], "loadtest"),
    ])
    func refused(arguments: [String], named: String) {
        do {
            _ = try LoadTestCommand.parse(arguments)
            Issue.record("\(arguments) was accepted")
        } catch {
            let message = LoadTestCommand.message(for: error)
            #expect(message.contains(named), "\(arguments): \(message)")
        }
    }
}

/// The report's arithmetic and the readings it is made of, on plain values.
@Suite("siwa-loadtest figures")
struct LoadFigureTests {
    @Test("percentiles are nearest-rank on the sorted samples, in milliseconds")
    func percentiles() {
        // 1 … 100 ms, shuffled
        let summary = LatencySummary(seconds: (1...100).map { Double($0) / 1000 }.shuffled())
        #expect(summary.count == 100)
        #expect(abs(summary.p50 - 50) < 1e-9 && abs(summary.p90 - 90) < 1e-9 && abs(summary.p99 - 99) < 1e-9)
        #expect(abs(summary.max - 100) < 1e-9 && abs(summary.mean - 50.5) < 1e-9)
        // nearest rank rounds up: of 3 samples the median is the 2nd, the 90th and 99th percentiles the 3rd
        let three = LatencySummary(seconds: [0.030, 0.010, 0.020])
        #expect(three.p50 == 20 && three.p90 == 30 && three.p99 == 30 && three.max == 30 && abs(three.mean - 20) < 1e-9)
        let one = LatencySummary(seconds: [0.004])
        #expect(one.p50 == 4 && one.p99 == 4 && one.max == 4 && one.mean == 4 && one.count == 1)
        let none = LatencySummary(seconds: [])
        #expect(none.count == 0 && none.p50 == 0 && none.p99 == 0 && none.max == 0 && none.mean == 0)
        #expect(three.line.contains("p50    20.0") && three.line.hasSuffix("(n=3)"))
    }

    @Test("CPU seconds from /proc/PID/stat: utime + stime, counted from the last ')' of the command name")
    func cpuSeconds() {
        // fields 14 and 15 are utime 250 and stime 50 ticks; the name holds spaces and parentheses
        let stat = "4242 (siwa (serve) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 12345 0 0"
        #expect(ProcessStats.cpuSeconds(stat: stat, ticksPerSecond: 100) == 3)
        #expect(ProcessStats.cpuSeconds(stat: "no name", ticksPerSecond: 100) == 0)
        #expect(ProcessStats.cpuSeconds(stat: "1 (short) S 1 2", ticksPerSecond: 100) == 0)
        // this process's own reading moves forward
        #expect(ProcessStats.current.cpuSeconds() > 0)
    }

    @Test("a response's cookies (attributes dropped) and the page kind of <body data-page>")
    func responseReading() {
        let response = HTTPClientResponse(status: 303, headers: [
            HTTPHeader("Set-Cookie", "siwa_binding=abc=; Path=/auth/apple; HttpOnly"),
            HTTPHeader("set-cookie", "siwa_session=s1"),
            HTTPHeader("Location", "/account"),
            HTTPHeader("Set-Cookie", "broken"),
        ], body: Array(#"<html><body data-page="account">"#.utf8))
        #expect(VirtualBrowser.cookies(of: response) == ["siwa_binding": "abc=", "siwa_session": "s1"])
        #expect(VirtualBrowser.pageKind(response) == "account")
        #expect(VirtualBrowser.pageKind(HTTPClientResponse(status: 200, headers: [], body: Array("plain".utf8))) == nil)
        #expect(VirtualBrowser.seconds(.milliseconds(1_500)) == 1.5)
    }
}
