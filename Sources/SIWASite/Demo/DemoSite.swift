import AppleIDEmulator
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SIWAWeb

extension EmulatorConfiguration {
    /// The emulator for the site `configuration` describes, as demo mode runs it: its Services ID
    /// and app bundles, verified with its key, and Apple's notifications sent to the app on
    /// 127.0.0.1:PORT (`notifyApp: false` sends none). Demo mode, the load test and the end-to-end
    /// tests run the site on `http://localhost`, a redirect URI Apple refuses: so the emulator is told
    /// to accept it (`allowInsecureRedirectURIs`), and says so in its log and on its dashboard.
    public static func forSite(_ configuration: SIWAConfiguration, notifyApp: Bool = true) -> EmulatorConfiguration {
        forSite(
            teamID: configuration.teamID, keyID: configuration.keyID, publicKey: configuration.privateKey.publicKey,
            webClientID: configuration.clientID, redirectURI: configuration.redirectURI,
            nativeClientIDs: configuration.nativeClientIDs,
            notificationURL: notifyApp ? "http://127.0.0.1:\(configuration.port)/auth/apple/notifications" : nil,
            templatesDirectory: configuration.resources.emulatorTemplatesDirectory,
            allowInsecureRedirectURIs: true)
    }
}

/// Demo mode's emulator: registered with the generated key, the demo Services ID and app bundle, on
/// 127.0.0.1 — another *site* than `localhost`, so the callback is a real cross-site POST.
public enum DemoEmulator {
    public static func application(for configuration: SIWAConfiguration, logger: Logger) async throws -> any Service {
        let emulatorConfiguration = EmulatorConfiguration.forSite(configuration)
        let state = try AppleIDEmulatorState(configuration: emulatorConfiguration)
        var emulatorLogger = logger
        emulatorLogger[metadataKey: "component"] = "emulator"
        return try await buildEmulatorApplication(configuration: emulatorConfiguration, state: state,
                                                  host: "127.0.0.1", port: configuration.emulatorPort, logger: emulatorLogger)
    }
}

/// The app and its Apple ID emulator run together on loopback in this process: what `siwa-loadtest`
/// starts, and what the end-to-end tests start.
public enum SiteWithEmulator {
    /// Starts the emulator on `127.0.0.1:emulatorPort` and, given its dependencies, the app (on its
    /// configured port) in one service group, runs `body` once they listen, and stops them again, also
    /// when `body` throws. Without dependencies only the emulator runs (the load test's app is a process
    /// of its own).
    public static func run<T>(
        dependencies: SIWADependencies?, emulatorConfiguration: EmulatorConfiguration, emulator: AppleIDEmulatorState,
        emulatorPort: Int, appLogger: Logger, logger: Logger, _ body: () async throws -> T
    ) async throws -> T {
        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        var services: [any Service] = [try await buildEmulatorApplication(
            configuration: emulatorConfiguration, state: emulator, host: "127.0.0.1", port: emulatorPort, logger: logger,
            onServerRunning: { _ in startedContinuation.yield() })]
        if let dependencies {
            services.append(buildApplication(dependencies, logger: appLogger) { _ in startedContinuation.yield() })
        }
        let group = ServiceGroup(services: services, gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }
        var iterator = started.makeAsyncIterator()
        for _ in services { _ = await iterator.next() }

        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        return try result.get()
    }

    /// Two free loopback ports, found by binding port 0 and letting go.
    public static func freePorts() async throws -> (Int, Int) {
        var ports: [Int] = []
        var channels: [any Channel] = []
        for _ in 0..<2 {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .bind(host: "127.0.0.1", port: 0).get()
            ports.append(channel.localAddress?.port ?? 0)
            channels.append(channel)
        }
        for channel in channels { try await channel.close() }
        return (ports[0], ports[1])
    }
}

/// What `siwa serve` prints once it listens.
public enum Banner {
    public static func text(_ configuration: SIWAConfiguration) -> String {
        guard configuration.isDemo else {
            return "siwa is listening on \(configuration.host):\(configuration.port) — \(configuration.publicURL)"
        }
        return """

        ┌──────────────────────────────────────────────────────────────────────┐
          siwa — demo mode (no Apple credentials configured)

          Open  \(configuration.publicURL)  in a browser and click "Sign in with Apple".

          The Apple ID emulator stands in for Apple at \(configuration.appleBaseURL)
          (what it has seen: \(configuration.appleBaseURL)/emulator).
          Keys and the database are in \(configuration.dataDirectory)/.
          OpenID provider: \(configuration.publicURL)/.well-known/openid-configuration
          (demo client siwa-demo-rp; try it with scripts/oidc-sample).
          Set APPLE_TEAM_ID, APPLE_CLIENT_ID, APPLE_KEY_ID and APPLE_PRIVATE_KEY_PATH
          (see README) to talk to the real Apple.
        └──────────────────────────────────────────────────────────────────────┘

        """
    }
}
