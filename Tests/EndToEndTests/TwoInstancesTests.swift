import AppleIDEmulator
import CurlHTTP
import Foundation
import Hummingbird
import JOSE
import ServiceLifecycle
import SIWAStore
import SIWASite
import SIWATestSupport
@testable import SIWAWeb

import Testing

/// Two app instances on one PostgreSQL database and schema, as behind a load balancer: both have the
/// same PUBLIC_URL (so the same redirect URI), keys and token-encryption key, each its own pool and port.
struct TwoInstances: Sendable {
    let urls: [String]
    let databases: [SIWADatabase]
    let metrics: [SIWAMetrics]
    let configuration: SIWAConfiguration
    let http: CurlHTTPClient

    /// Opens the database twice (two pools, like two processes), starts both apps and, when given, the
    /// service that stands in for Apple (on the emulator port), runs `body`, and stops everything.
    /// `settings` are added to both instances' (e.g. `APPLE_BASE_URL` of a loopback Apple).
    static func run(
        location: (url: DatabaseURL, schema: String?), settings: [String: String] = [:],
        beforeStart: @escaping @Sendable (SIWADatabase, SIWAConfiguration) async throws -> Void = { _, _ in },
        apple: (@Sendable (SIWAConfiguration, Int, @escaping @Sendable () -> Void) async throws -> any Service)? = nil,
        _ body: @escaping @Sendable (TwoInstances) async throws -> Void
    ) async throws {
        let dataDirectory = EndToEnd.dataDirectory()
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let (portA, emulatorPort) = try await SiteWithEmulator.freePorts()
        let (portB, _) = try await SiteWithEmulator.freePorts()
        let shared = ["DATA_DIR": dataDirectory, "EMULATOR_PORT": String(emulatorPort), "PUBLIC_URL": "http://localhost:\(portA)",
                      "RATE_LIMIT_PER_MINUTE": "0", "APPLE_TIMEOUT": "10"].merging(settings) { $1 }
        let logger = TestDatabase.quietLogger
        var apps: [any Service] = []
        var databases: [SIWADatabase] = []
        var metrics: [SIWAMetrics] = []
        var configurations: [SIWAConfiguration] = []
        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        for port in [portA, portB] {
            let configuration = try SIWAConfiguration.load(from: shared.merging(["PORT": String(port)]) { $1 })
            let database = try await SIWADatabase.open(location.url, logger: logger, postgresSchema: location.schema)
            try await database.migrate()
            if databases.isEmpty { try await beforeStart(database, configuration) }
            let instanceMetrics = SIWAMetrics()
            let dependencies = try await Site.makeDependencies(configuration: configuration, logger: logger,
                                                               overrides: SiteOverrides(database: database, metrics: instanceMetrics))
            apps.append(buildApplication(dependencies, logger: logger) { _ in startedContinuation.yield() })
            databases.append(database)
            metrics.append(instanceMetrics)
            configurations.append(configuration)
        }
        var services = apps
        if let apple { services.insert(try await apple(configurations[0], emulatorPort) { startedContinuation.yield() }, at: 0) }
        let group = ServiceGroup(services: services, gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }
        // Both apps (and Apple's stand-in, when it runs here) are listening.
        var iterator = started.makeAsyncIterator()
        for _ in 0..<services.count { _ = await iterator.next() }

        let client = CurlHTTPClient()
        let instances = TwoInstances(urls: ["http://localhost:\(portA)", "http://localhost:\(portB)"], databases: databases,
                                     metrics: metrics, configuration: configurations[0], http: client)
        let outcome: Result<Void, any Error>
        do { outcome = .success(try await body(instances)) } catch { outcome = .failure(error) }
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        await client.shutdown()
        try outcome.get()
    }

    /// Revocations Apple accepted, as one instance counted them (its `/metrics` counter).
    func acceptedRevocations(instance: Int) -> Int {
        var buffer: [UInt8] = []
        metrics[instance].registry.emit(into: &buffer)
        return PrometheusText.count(in: buffer, metric: "siwa_revocation_attempts_total", label: #"result="accepted""#)
    }
}

/// PostgreSQL only: SQLite is one file for one host, not a database shared by instances.
@Suite("Two app instances sharing PostgreSQL")
struct TwoInstancesTests {
    @Test("a sign-in started on one instance completes on the other, both ways; its state is then spent on both")
    func flowAcrossInstances() async throws {
        try await withDatabase(.postgres) { test in
            let emulatorBox = EmulatorBox()
            try await TwoInstances.run(location: (test.url, test.schema), apple: { configuration, port, onRunning in
                let emulatorConfiguration = EmulatorConfiguration.forSite(configuration, notifyApp: false)
                let state = try AppleIDEmulatorState(configuration: emulatorConfiguration)
                emulatorBox.set(state)
                return try await buildEmulatorApplication(configuration: emulatorConfiguration, state: state, host: "127.0.0.1",
                                                          port: port, logger: TestDatabase.quietLogger, onServerRunning: { _ in onRunning() })
            }) { instances in
                let emulator = try #require(emulatorBox.value)
                for (first, second, person) in [(0, 1, "p1"), (1, 0, "p2")] {
                    // setup: one browser; the load balancer sends its first request to one instance, the next to the other
                    let browser = WebClient(http: instances.http)
                    let start = try await browser.get(instances.urls[first] + "/auth/apple")
                    #expect(start.status == 303)
                    let items = URLComponents(string: try #require(start.header("Location")))?.queryItems ?? []
                    let state = try #require(items.first { $0.name == "state" }?.value)
                    let nonce = try #require(items.first { $0.name == "nonce" }?.value)
                    let fields = try await emulator.approve(ApprovalRequest(
                        clientID: instances.configuration.clientID, redirectURI: instances.configuration.redirectURI,
                        state: state, nonce: nonce, personID: person))
                    // MUT: the callback arrives at the other instance
                    let callback = try await browser.postForm(instances.urls[second] + "/auth/apple/callback", fields.formFields)
                    // validate: signed in; the session is honoured by both instances
                    #expect(callback.status == 303, "\(callback.text)")
                    #expect(callback.header("Location") == "/account")
                    for url in instances.urls {
                        let account = try await browser.get(url + "/account")
                        #expect(account.status == 200 && account.page == "account", "\(url)")
                    }
                    // the pending authorization was consumed in the shared database: a replay fails on either instance
                    for url in instances.urls {
                        let replay = try await browser.postForm(url + "/auth/apple/callback", fields.formFields)
                        #expect(replay.status == 400 && replay.page == "error", "\(url)")
                    }
                }
                // both accounts are in the one database, whichever pool asks
                let subs = [try await emulator.sub(personID: "p1", clientID: instances.configuration.clientID),
                            try await emulator.sub(personID: "p2", clientID: instances.configuration.clientID)]
                for database in instances.databases {
                    for sub in subs { #expect(try await database.accounts.user(sub: sub) != nil) }
                }
            }
        }
    }

    @Test("the revocation outbox is drained by both instances' workers, each token revoked exactly once")
    func revocationExactlyOnce() async throws {
        try await withDatabase(.postgres) { test in
            let itemCount = 240
            let tokens = (0..<itemCount).map { "rt.\($0).\(SecureRandom.token(byteCount: 12))" }
            try await LoopbackApple.with { apple in
                // Apple's revoke endpoint takes 10 ms a call, so that both instances' workers are busy at once.
                apple.setBehaviour(.delay(.milliseconds(10)), for: "/auth/revoke")
                try await TwoInstances.run(location: (test.url, test.schema), settings: ["APPLE_BASE_URL": apple.baseURL],
                                           beforeStart: { database, configuration in
                    // setup: deletions queued before either instance runs, so both workers find a full outbox at once
                    let cipher = TokenCipher(key: configuration.tokenEncryptionKey)
                    let now = Int64(Date().timeIntervalSince1970)
                    for token in tokens {
                        let id = UUID().uuidString
                        try await database.outbox.enqueueRevocation(RevocationItem(
                            id: id, clientID: configuration.clientID,
                            token: try cipher.seal(token, for: .revocation(id: id)), tokenTypeHint: "refresh_token",
                            createdAt: now, nextAttemptAt: now))
                    }
                }) { instances in
                    // MUT: both workers run from start-up. Waited on while they make progress: a loaded machine (CI runs
                    // browsers and proxies beside this) drained 206 of the 240 in a fixed minute, so what fails here is a
                    // stall — no item done for 30 s, longer than a retry's backoff or the poll interval — not slowness.
                    var pending = try await instances.databases[0].outbox.revocationCounts().pending
                    var lastProgress = Date()
                    while pending > 0, Date().timeIntervalSince(lastProgress) < 30 {
                        try await Task.sleep(for: .milliseconds(100))
                        let now = try await instances.databases[0].outbox.revocationCounts().pending
                        if now < pending { lastProgress = Date() }
                        pending = now
                    }
                    // validate
                    let counts = try await instances.databases[0].outbox.revocationCounts()
                    #expect(counts.pending == 0, "left: \(counts.pending), of which failed at least once: \(counts.failing)")
                    let perToken = apple.requests(to: "/auth/revoke").reduce(into: [String: Int]()) { $0[$1["token"] ?? "", default: 0] += 1 }
                    #expect(Set(perToken.keys) == Set(tokens))
                    let repeated = perToken.filter { $0.value != 1 }
                    #expect(repeated.isEmpty, "tokens revoked more than once: \(repeated.count)")
                    let accepted = (instances.acceptedRevocations(instance: 0), instances.acceptedRevocations(instance: 1))
                    #expect(accepted.0 + accepted.1 == itemCount)
                    // Each call takes ≥ 10 ms, so one worker alone would need ≥ 2.4 s: both must have taken a share.
                    #expect(accepted.0 > 0 && accepted.1 > 0, "accepted per instance: \(accepted)")
                }
            }
        }
    }
}
