import Foundation

/// Runs a child process (siwa, python3, curl, nginx …) and collects its output.
public enum ChildProcess {
    /// Waits for the process to end; standard output and error together.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(returning: String(decoding: data, as: UTF8.self))
            }
        }
        return (process.terminationStatus, output)
    }

    /// `curl` from a chosen loopback source address (`--interface`), with the path exactly as
    /// given: answers the status code, or nil when curl failed.
    public static func curlStatus(_ url: String, from source: String, headers: [(String, String)] = [], method: String = "GET") async throws -> Int? {
        var arguments = ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--path-as-is", "--max-time", "10",
                         "--interface", source, "-X", method]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        arguments.append(url)
        let (status, output) = try await run("/usr/bin/curl", arguments)
        return status == 0 ? Int(output) : nil
    }

    /// Like `curlStatus`, also answering the `Location` header (empty when there is none).
    public static func curlRedirect(_ url: String, from source: String, headers: [(String, String)] = []) async throws -> (status: Int, location: String)? {
        var arguments = ["-s", "-o", "/dev/null", "-w", "%{http_code} %header{location}", "--path-as-is", "--max-time", "10",
                         "--interface", source]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        arguments.append(url)
        let (status, output) = try await run("/usr/bin/curl", arguments)
        guard status == 0, let space = output.firstIndex(of: " "), let code = Int(output[..<space]) else { return nil }
        return (code, String(output[output.index(after: space)...]))
    }
}
