import AppleIDEmulator
import ArgumentParser
import Foundation
import Hummingbird
import JOSE
import ServiceLifecycle
import SIWAWeb

/// `siwa emulator`: the Apple ID emulator on its own, for staging (point APPLE_BASE_URL at it).
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulator",
        abstract: "Runs the Apple ID emulator alone, e.g. for a staging deployment (APPLE_BASE_URL points at it)."
    )

    @Option(help: "Address to listen on") var host = "127.0.0.1"
    @Option(help: "Port to listen on") var port = 8081
    @Option(help: "The Services ID (repeatable)") var clientId: [String] = []
    @Option(help: "App bundle ids accepted for native sign-in (repeatable)") var nativeClientId: [String] = []
    @Option(help: "The operator's team id") var teamId: String
    @Option(help: "The .p8 key's id") var keyId: String
    @Option(help: "Registered redirect URI (repeatable)") var redirectUri: [String] = []
    @Option(help: "PEM file with the operator's P-256 public key (or the .p8 itself)") var publicKey: String
    @Option(help: "Where to send server-to-server notifications") var notificationUrl: String?
    @Option(help: "Log level") var logLevel: String?

    func validate() throws {
        if clientId.isEmpty && nativeClientId.isEmpty { throw ValidationError("--client-id or --native-client-id is required") }
        if !clientId.isEmpty && redirectUri.isEmpty { throw ValidationError("--redirect-uri is required with --client-id") }
    }

    func run() async throws {
        let key = try loadPublicKey(publicKey)
        var clients = clientId.map {
            EmulatorClient(clientID: $0, teamID: teamId, keyID: keyId, publicKey: key, redirectURIs: redirectUri, notificationURL: notificationUrl)
        }
        clients += nativeClientId.map {
            EmulatorClient(clientID: $0, teamID: teamId, keyID: keyId, publicKey: key, redirectURIs: [], notificationURL: notificationUrl)
        }
        let configuration = EmulatorConfiguration(clients: clients, templatesDirectory: ResourceLocator.directory("templates") + "/emulator")
        let state = try AppleIDEmulatorState(configuration: configuration)
        let logger = makeLogger(level: logLevel)
        let app = try await buildEmulatorApplication(configuration: configuration, state: state, host: host, port: port, logger: logger)
        print("Apple ID emulator listening on http://\(host):\(port) (event log: /emulator)")
        try await ServiceGroup(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger).run()
    }

    private func loadPublicKey(_ path: String) throws -> P256PublicKey {
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
            printError("--public-key: cannot read \(path)")
            throw ExitCode(1)
        }
        if let key = try? P256PublicKey(pem: pem) { return key }
        if let key = try? P256PrivateKey(pkcs8PEM: pem) { return key.publicKey }
        printError("--public-key: \(path) holds neither a P-256 public key nor a .p8 private key")
        throw ExitCode(1)
    }
}
