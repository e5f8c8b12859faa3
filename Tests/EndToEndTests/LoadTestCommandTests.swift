import Foundation
import SIWATestSupport
import Testing

/// `siwa-loadtest`, the tool the performance numbers come from, run as a person runs it: the executable
/// beside `siwa` in the build folder, which starts that `siwa` as the server.
@Suite("siwa-loadtest")
struct LoadTestCommandTests {
    /// `siwa-loadtest` beside the built `siwa` (`swift build --build-tests` builds both).
    static var binary: String? {
        guard let siwa = SIWABinary.path else { return nil }
        let path = URL(fileURLWithPath: siwa).deletingLastPathComponent().appendingPathComponent("siwa-loadtest").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    @Test("it starts siwa serve as its own process, reports its CPU per sign-in beside the floor, and stops it",
          .enabled(if: LoadTestCommandTests.binary != nil))
    func measuresTheServerAlone() async throws {
        let binary = try #require(Self.binary)
        let siwa = try #require(SIWABinary.path)
        var environment = ProcessInfo.processInfo.environment
        // The server must not inherit these from the shell (the load test passes it only its own settings).
        environment["DATABASE_URL"] = "postgres://nobody:wrong@127.0.0.1:1/none"
        environment["LOG_LEVEL"] = "trace"
        let (status, output) = try await SIWABinary.run(binary, [
            "--concurrency", "4", "--latency-ms", "0", "--duration", "2", "--warmup", "1",
        ], environment: environment)
        #expect(status == 0, "\(output.suffix(2_000))")

        let resultLine = try #require(output.split(separator: "\n").last { $0.hasPrefix("RESULT ") }, "\(output.suffix(2_000))")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(resultLine.dropFirst("RESULT ".count).utf8)) as? [String: Any])
        #expect(json["server"] as? String == "process")
        // the siwa of the same build, not the load generator's own binary
        #expect(json["serverBinary"] as? String == URL(fileURLWithPath: siwa).resolvingSymlinksInPath().path)
        #expect(json["errors"] as? Int == 0)
        let flows = try #require(json["flows"] as? Int)
        #expect(flows > 0)
        let cpu = try #require(json["serverCPUMicrosecondsPerSignIn"] as? Double)
        let floor = try #require(json["floorMicrosecondsPerSignIn"] as? Double)
        let ratio = try #require(json["ratioToFloor"] as? Double)
        #expect(cpu > 0 && floor > 0 && floor < 10_000)
        #expect(abs(ratio - cpu / floor) < 0.01 * ratio)
        // The same floor after idle moments of the mean interval between sign-ins (kept within 1–20 ms).
        let idleFloor = try #require(json["floorAfterIdleMicrosecondsPerSignIn"] as? Double)
        let idle = try #require(json["floorIdleMilliseconds"] as? Double)
        let idleRatio = try #require(json["ratioToFloorAfterIdle"] as? Double)
        #expect(idleFloor > 0 && idleFloor < 10_000)
        #expect(idle >= 1 && idle <= 20 && abs(idle - min(max(2_000 / Double(flows), 1), 20)) < 0.01)
        #expect(abs(idleRatio - cpu / idleFloor) < 0.01 * idleRatio)
        #expect(try #require(json["serverPeakRSSMegabytes"] as? Double) > 1)
        #expect(json["loadGeneratorCPUCores"] is Double)
        // Its own threads yield to the server's (--yield-to-server, the default); a refusal would say why.
        #expect(json["loadGeneratorScheduling"] as? String == "batch")
        #expect(String(describing: json["database"] ?? "").hasPrefix("sqlite:"))
        #expect(output.contains("server CPU") && output.contains("floor") && output.contains("floor after idle"))

        // The server it started is gone: its port no longer answers.
        let appLine = try #require(output.split(separator: "\n").first { $0.hasPrefix("siwa-loadtest: app ") })
        let port = try #require(appLine.split(separator: ",").first?.split(separator: ":").last.flatMap { Int($0) })
        let probe = try? await ChildProcess.run("/usr/bin/env", ["python3", "-c",
            "import socket; s=socket.socket(); s.settimeout(2); exit(0 if s.connect_ex(('127.0.0.1', \(port))) != 0 else 1)"])
        #expect(probe?.status == 0, "siwa serve still listens on \(port)")
    }

    @Test("--server-setting reaches the server's settings: a bad value stops the run with the settings table's one-line reason",
          .enabled(if: LoadTestCommandTests.binary != nil))
    func serverSettings() async throws {
        let binary = try #require(Self.binary)
        let (status, output) = try await SIWABinary.run(binary, [
            "--concurrency", "1", "--duration", "1", "--warmup", "0", "--server-setting", "EVENT_LOOP_THREADS=0",
        ], environment: ProcessInfo.processInfo.environment)
        #expect(status != 0)
        #expect(output.contains("EVENT_LOOP_THREADS"), "\(output.suffix(2_000))")
        let (usageStatus, usage) = try await SIWABinary.run(binary, ["--server-setting", "EVENT_LOOP_THREADS"],
                                                           environment: ProcessInfo.processInfo.environment)
        #expect(usageStatus != 0)
        #expect(usage.contains("NAME=VALUE"), "\(usage.suffix(2_000))")
    }

    @Test("siwa itself has no loadtest any more: it serves, and the load generator is siwa-loadtest",
          .enabled(if: SIWABinary.path != nil))
    func notInSiwa() async throws {
        let siwa = try #require(SIWABinary.path)
        let (status, help) = try await SIWABinary.run(siwa, ["--help"], environment: ProcessInfo.processInfo.environment)
        #expect(status == 0)
        #expect(help.contains("serve") && help.contains("doctor") && !help.contains("loadtest"), "\(help)")
        let (refused, _) = try await SIWABinary.run(siwa, ["loadtest"], environment: ProcessInfo.processInfo.environment)
        #expect(refused != 0)
    }
}
