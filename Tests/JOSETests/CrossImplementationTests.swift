import Foundation
import SIWATestSupport
import Testing
@testable import JOSE

@Suite("Python's cryptography verifies our ES256 tokens")
struct CrossImplementationTests {
    /// Whether python3 with the cryptography package can run here.
    static let pythonAvailable: Bool = {
        guard let python = findPython() else { return false }
        return (try? run(python, ["-c", "import cryptography"]).status) == 0
    }()

    static func findPython() -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("python3")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }

    static func run(_ executable: URL, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    @Test("verify_es256.py accepts our signatures and rejects a tampered one",
          .enabled(if: pythonAvailable, "python3 with the cryptography package is not installed"))
    func pythonVerifiesOurTokens() throws {
        let python = try #require(Self.findPython())
        let script = try Fixtures.url("verify_es256.py").path
        let key = try P256PrivateKey.generate()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jose-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pemFile = directory.appendingPathComponent("public.pem")
        try key.publicKey.pem().write(to: pemFile, atomically: true, encoding: .utf8)

        for index in 0..<5 {
            let token = try CompactJWS.signES256(payload: ["iss": Fixture.teamID, "n": "\(index)"], key: key, kid: "K\(index)")
            let result = try Self.run(python, [script, pemFile.path, token])
            #expect(result.status == 0, "python rejected our token: \(result.output)")
        }
        // The script is a real check: a token signed by another key fails.
        let other = try CompactJWS.signES256(payload: ["iss": "x"], key: try P256PrivateKey.generate(), kid: nil)
        let rejected = try Self.run(python, [script, pemFile.path, other])
        #expect(rejected.status == 1, "python accepted a forged token: \(rejected.output)")
    }

    @Test("Python verifies a token signed with the Python-made .p8 loaded by us",
          .enabled(if: pythonAvailable, "python3 with the cryptography package is not installed"))
    func pythonVerifiesFixtureKey() throws {
        let python = try #require(Self.findPython())
        let script = try Fixtures.url("verify_es256.py").path
        let key = try P256PrivateKey(pkcs8PEM: Fixtures.text("AuthKey_PYFIXTURE1.p8"))
        let pemFile = FileManager.default.temporaryDirectory.appendingPathComponent("jose-\(UUID().uuidString).pem")
        // Python's own SPKI PEM of the key: no part of the check comes from our code but the signature.
        try #require(try Fixtures.strings("es256.json")["public_key_pem"]).write(to: pemFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: pemFile) }
        let token = try CompactJWS.signES256(payload: ["sub": Fixture.webClientID], key: key, kid: "PYFIXTURE1")
        let result = try Self.run(python, [script, pemFile.path, token])
        #expect(result.status == 0, "python rejected our token: \(result.output)")
    }
}
