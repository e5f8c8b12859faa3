import Foundation
import Testing

@testable import CurlHTTP

/// `openssl s_server` on 127.0.0.1 with a throwaway self-signed certificate: a real
/// TLS peer that verification must reject, without leaving the machine.
struct SelfSignedTLSServer {
    let process: Process
    let port: Int
    let folder: URL

    static let opensslPath = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static func start() async throws -> SelfSignedTLSServer {
        let openssl = try #require(opensslPath)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlhttp-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let key = folder.appendingPathComponent("key.pem").path
        let certificate = folder.appendingPathComponent("cert.pem").path
        let status = try await run(openssl, [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", certificate, "-subj", "/CN=localhost", "-days", "1",
        ])
        try #require(status == 0)

        let output = folder.appendingPathComponent("server.log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: openssl)
        // -www answers every request with a status page; -accept port 0 lets the kernel choose.
        server.arguments = ["s_server", "-accept", "127.0.0.1:0", "-cert", certificate, "-key", key, "-www"]
        server.standardOutput = try FileHandle(forWritingTo: output)
        server.standardError = FileHandle.nullDevice
        try server.run()

        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let text = String(decoding: FileManager.default.contents(atPath: output.path) ?? Data(), as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT ") }),
                let port = line.split(separator: ":").last.flatMap({ Int($0) })
            {
                return SelfSignedTLSServer(process: server, port: port, folder: folder)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(server.processIdentifier, SIGKILL)
        throw TestServerError.didNotStart
    }

    /// Runs a command to its end without blocking a thread of the cooperative pool.
    private static func run(_ executable: String, _ arguments: [String]) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
    }

    func stop() async {
        // SIGKILL, not Process.terminate(): the test runner blocks SIGTERM, and its
        // children inherit that mask, so a SIGTERM would never arrive.
        kill(process.processIdentifier, SIGKILL)
        let deadline = ContinuousClock.now + .seconds(5)
        while process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        try? FileManager.default.removeItem(at: folder)
    }
}

@Suite("TLS verification against a self-signed loopback server", .enabled(if: SelfSignedTLSServer.opensslPath != nil))
struct TLSVerificationTests {
    @Test("verification on (the default) rejects the certificate; off, the same server answers")
    func selfSignedCertificate() async throws {
        let server = try await SelfSignedTLSServer.start()
        do {
            try await check(url: "https://127.0.0.1:\(server.port)/")
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    private func check(url: String) async throws {
        try await withClient { client in
            let error = await httpError { try await client.execute(HTTPClientRequest(url: url)) }
            guard case .tlsFailure(let message) = error else {
                Issue.record("expected tlsFailure, got \(String(describing: error))")
                return
            }
            #expect(!message.isEmpty)
        }

        let insecure = CurlHTTPClient.Configuration.with { $0.verifyTLS = false }
        try await withClient(insecure) { client in
            let response = try await client.execute(HTTPClientRequest(url: url))
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self).contains("s_server"))
        }
    }
}
