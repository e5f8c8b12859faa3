import AppleIDEmulator
import CurlHTTP
import Foundation
import JOSE
import Logging
import SIWASite
import SIWAWeb

/// The app and the Apple ID emulator on loopback for one load run. By default the app is a separate
/// `siwa serve` process (its CPU and memory are then its own) and the emulator runs in this process beside
/// the load generator; `inProcess` runs the app here too, built as `siwa serve` builds it (SIWASite's
/// ``Site/makeDependencies(configuration:logger:overrides:sealingKey:)``).
struct LoadEnvironment: Sendable {
    let configuration: SIWAConfiguration
    let emulator: AppleIDEmulatorState
    let dataDirectory: String
    /// The server's own process, or nil when it runs in this one.
    let server: ServerProcess?

    var appURL: String { configuration.publicURL }
    /// Where the server's CPU time and memory are read.
    var serverStats: ProcessStats { server.map { ProcessStats(pid: $0.pid) } ?? .current }

    /// Starts both servers, runs `body`, and stops them again (also when `body` throws). `overrides` are
    /// settings of the app given on the command line; they win over the load test's own.
    static func run<T: Sendable>(
        siwaBinary: String?, databaseURL: String?, inProcess: Bool, logLevel: String, overrides: [String: String] = [:],
        logger: Logger,
        _ body: @escaping @Sendable (LoadEnvironment) async throws -> T
    ) async throws -> T {
        let dataDirectory = NSTemporaryDirectory() + "siwa-loadtest-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let (appPort, emulatorPort) = try await SiteWithEmulator.freePorts()
        // Like the chaos stacks: the load comes from one address, so no per-client limits.
        var values = ["DATA_DIR": dataDirectory, "PORT": String(appPort), "HOST": "127.0.0.1",
                      "RATE_LIMIT_PER_MINUTE": "0", "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT": "0", "APPLE_TIMEOUT": "10",
                      "DATABASE_URL": databaseURL ?? "sqlite:\(dataDirectory)/siwa.sqlite", "LOG_LEVEL": logLevel]
        values.merge(overrides) { $1 }
        if inProcess {
            // Demo mode's generated keys; the emulator is started below on EMULATOR_PORT.
            values["EMULATOR_PORT"] = String(emulatorPort)
            return try await runInProcess(values: values, emulatorPort: emulatorPort,
                                          dataDirectory: dataDirectory, logger: logger, body)
        }
        // A production configuration pointed at the emulator, as `scripts/chaos` runs it.
        let keyPath = dataDirectory + "/loadtest-apple-key.p8"
        try Data(try P256PrivateKey.generate().pkcs8PEM().utf8).write(to: URL(fileURLWithPath: keyPath))
        values.merge([
            "APPLE_TEAM_ID": "LOADTEST01", "APPLE_KEY_ID": "LOADKEY001", "APPLE_CLIENT_ID": "dev.siwa.loadtest.web",
            "APPLE_PRIVATE_KEY_PATH": keyPath, "APPLE_BASE_URL": "http://127.0.0.1:\(emulatorPort)",
            "PUBLIC_URL": "http://localhost:\(appPort)",
            // Apple requires https redirect URIs; the emulator is told to accept this one (allowInsecureRedirectURIs).
            "APPLE_REDIRECT_URI": "https://localhost:\(appPort)/auth/apple/callback",
            "TOKEN_ENCRYPTION_KEY": Base64.encode(AESGCMKey.generate().bytes),
        ]) { $1 }
        values.merge(overrides) { $1 }
        // Resolved and checked before either server starts: a missing `siwa` is the first thing said.
        let binary = try siwaBinary ?? ServerProcess.siwaBesideThisExecutable()
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw LoadTestError("no siwa executable at \(binary)") }
        return try await runWithServerProcess(binary: binary, values: values, emulatorPort: emulatorPort,
                                              dataDirectory: dataDirectory, logger: logger, body)
    }

    private static func runInProcess<T: Sendable>(
        values: [String: String], emulatorPort: Int, dataDirectory: String, logger: Logger,
        _ body: @escaping @Sendable (LoadEnvironment) async throws -> T
    ) async throws -> T {
        let configuration = try SIWAConfiguration.load(from: values)
        var value: T?
        // The app with the same dependencies `siwa serve` builds: pools, HTTP client and templates as in production.
        try await runWithEmulator(configuration, appInProcess: true, emulatorPort: emulatorPort, logger: logger) { emulator in
            value = try await body(LoadEnvironment(configuration: configuration, emulator: emulator,
                                                   dataDirectory: dataDirectory, server: nil))
        }
        guard let value else { throw LoadTestError("the app and the emulator stopped before the load ran") }
        return value
    }

    private static func runWithServerProcess<T: Sendable>(
        binary: String, values: [String: String], emulatorPort: Int, dataDirectory: String, logger: Logger,
        _ body: @escaping @Sendable (LoadEnvironment) async throws -> T
    ) async throws -> T {
        let configuration = try SIWAConfiguration.load(from: values)
        // The server sees only its settings (and where to find templates/ and Public/), never this process's
        // environment: a DATABASE_URL exported in the shell must not point the load at a real database.
        var serverEnvironment = values
        serverEnvironment["SIWA_RESOURCES_DIR"] = configuration.resources.root
        for name in ["PATH", "HOME", "TMPDIR", "LANG"] {
            if let value = ProcessInfo.processInfo.environment[name] { serverEnvironment[name] = value }
        }
        // No notifications from the emulator: the load never triggers one (`appInProcess` false).
        var value: T?
        try await runWithEmulator(configuration, appInProcess: false, emulatorPort: emulatorPort, logger: logger) { emulator in
            let server = try ServerProcess.startServe(binary: binary, environment: serverEnvironment,
                                                      logPath: dataDirectory + "/server.log")
            do {
                try await waitUntilHealthy(server, url: configuration.publicURL + "/healthz")
                value = try await body(LoadEnvironment(configuration: configuration, emulator: emulator,
                                                       dataDirectory: dataDirectory, server: server))
                await server.stop()
            } catch {
                await server.stop()
                throw error
            }
        }
        guard let value else { throw LoadTestError("the emulator stopped before the load ran") }
        return value
    }

    /// Starts the emulator for `configuration` on 127.0.0.1:`emulatorPort` and, when `appInProcess`, the app
    /// too, built by ``Site/makeDependencies(configuration:logger:overrides:sealingKey:)`` as `siwa serve`
    /// builds it (only then does the emulator send the app Apple's notifications); runs `body` with the
    /// emulator's state once both listen (``SiteWithEmulator``), and stops them again, also when `body` throws.
    private static func runWithEmulator(
        _ configuration: SIWAConfiguration, appInProcess: Bool, emulatorPort: Int, logger: Logger,
        _ body: (AppleIDEmulatorState) async throws -> Void
    ) async throws {
        let dependencies: SIWADependencies? =
            if appInProcess { try await Site.makeDependencies(configuration: configuration, logger: logger) } else { nil }
        let emulatorConfiguration = EmulatorConfiguration.forSite(configuration, notifyApp: appInProcess)
        let emulator = try AppleIDEmulatorState(configuration: emulatorConfiguration)
        do {
            try await SiteWithEmulator.run(
                dependencies: dependencies, emulatorConfiguration: emulatorConfiguration, emulator: emulator,
                emulatorPort: emulatorPort, appLogger: logger, logger: logger) { try await body(emulator) }
        } catch {
            await emulator.shutdown()
            throw error
        }
        await emulator.shutdown()
    }

    /// Polls `/healthz` until it answers 200 (the server has migrated and listens), for at most a minute.
    private static func waitUntilHealthy(_ server: ServerProcess, url: String) async throws {
        let http = CurlHTTPClient()
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        var problem: String?
        while problem == nil {
            if !server.isRunning {
                problem = "`siwa serve` exited before it was healthy"
            } else if ContinuousClock.now >= deadline {
                problem = "`siwa serve` did not answer \(url) with 200 within 60 s"
            } else if let response = try? await http.execute(HTTPClientRequest(url: url, timeout: .seconds(2))), response.status == 200 {
                break
            } else {
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        await http.shutdown()
        if let problem { throw LoadTestError("\(problem); its log ends:\n\(server.logTail())") }
    }
}
