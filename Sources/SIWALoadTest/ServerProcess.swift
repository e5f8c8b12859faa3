import Foundation

/// `siwa serve` started as a child process of the load test, so that its CPU time and memory are its own
/// (read from `/proc/PID`) and not mixed with the emulator's and the load generator's. The server is the
/// `siwa` binary itself (the one that is deployed), not this one: `siwa-loadtest` serves nothing.
///
/// `@unchecked Sendable`: Foundation's `Process` is a class without Sendable annotations; this type only
/// reads its pid and running state and sends it signals, which are thread-safe.
final class ServerProcess: @unchecked Sendable {
    private let process: Process
    let pid: Int32
    /// The `siwa` binary it runs.
    let binary: String
    /// Where the server's standard output and error go.
    let logPath: String

    private init(process: Process, binary: String, logPath: String) {
        self.process = process
        self.pid = process.processIdentifier
        self.binary = binary
        self.logPath = logPath
    }

    /// Starts the `siwa` binary at `binary` as `siwa serve` with exactly `environment` (no variable of the
    /// load test's own environment leaks into the server's settings).
    static func startServe(binary: String, environment: [String: String], logPath: String) throws -> ServerProcess {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw LoadTestError("no siwa executable at \(binary)")
        }
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        guard let log = FileHandle(forWritingAtPath: logPath) else {
            throw LoadTestError("cannot write the server's log at \(logPath)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve"]
        process.environment = environment
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return ServerProcess(process: process, binary: binary, logPath: logPath)
    }

    /// The `siwa` of the same build: beside this executable (`swift build` puts both products in one folder,
    /// `.build/release/siwa` beside `.build/release/siwa-loadtest`), symbolic links resolved.
    static func siwaBesideThisExecutable() throws -> String {
        let executable: String
        do {
            executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        } catch {
            throw LoadTestError("cannot find this executable through /proc/self/exe (Linux only): \(error); give --siwa PATH")
        }
        let siwa = URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("siwa").path
        guard FileManager.default.isExecutableFile(atPath: siwa) else {
            throw LoadTestError("no siwa beside this executable (\(siwa)): build it too (swift build --product siwa, with the same -c), or give --siwa PATH")
        }
        return siwa
    }

    var isRunning: Bool { process.isRunning }

    /// SIGTERM (a graceful shutdown), then SIGKILL after `grace`; returns once the process is gone.
    func stop(grace: Duration = .seconds(15)) async {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = ContinuousClock.now.advanced(by: grace)
        while process.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    /// The last `count` lines of the server's log (to say why it did not start).
    func logTail(_ count: Int = 20) -> String {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(count).joined(separator: "\n")
    }
}

/// A load test that could not run, said in one line.
public struct LoadTestError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
