import AppleIDEmulator
import CurlHTTP
import Foundation
import JOSE

/// One load run over a started environment.
struct LoadRun: Sendable {
    let options: LoadOptions
    let environment: LoadEnvironment

    func run() async throws -> LoadReport {
        var clientConfiguration = CurlHTTPClient.Configuration()
        // One keep-alive connection per browser, as real browsers would each hold their own.
        clientConfiguration.maximumConnectionsPerHost = options.concurrency + 8
        clientConfiguration.maximumTotalConnections = options.concurrency + 8
        clientConfiguration.defaultTimeout = .seconds(30)
        let http = CurlHTTPClient(configuration: clientConfiguration)
        do {
            let report = try await run(http)
            await http.shutdown()
            return report
        } catch {
            await http.shutdown()
            throw error
        }
    }

    private func run(_ http: CurlHTTPClient) async throws -> LoadReport {
        let configuration = environment.configuration
        let appURL = environment.appURL
        // Only beside a server of its own process; in-process the server's threads are this process's.
        let scheduling = environment.server != nil && options.yieldToServer ? LoadGeneratorScheduling.yieldToServer() : "normal"
        let roundTrip = try await loopbackRoundTrip(http)
        let (floor, floorProbe) = try await cryptoFloor(http)
        await environment.emulator.injectFault(
            EmulatorFault(kind: .latency, latencyMilliseconds: options.latencyMs), for: .token)

        var browsers: [VirtualBrowser] = []
        for index in 0..<options.concurrency {
            let person = await environment.emulator.createPerson(
                givenName: "Load", familyName: "Tester \(index + 1)", email: "load\(index + 1)@example.com")
            browsers.append(VirtualBrowser(http: http, emulator: environment.emulator, appURL: appURL,
                                           clientID: configuration.clientID, redirectURI: configuration.redirectURI,
                                           personID: person.id))
        }

        let clock = ContinuousClock()
        let measureStart = clock.now.advanced(by: .milliseconds(Int64(options.warmup * 1000)))
        let end = measureStart.advanced(by: .milliseconds(Int64(options.duration * 1000)))
        print("siwa-loadtest: app \(appURL), emulator \(configuration.appleBaseURL), \(options.concurrency) browsers, "
              + "token latency \(options.latencyMs) ms, warm-up \(options.warmup) s, measuring \(options.duration) s …")

        // Readings at the window's edges, taken beside the load.
        let server = environment.serverStats
        let window = Task { () -> (serverCPU: Double, ownCPU: Double, token: (sum: Double, count: Double)?) in
            try? await Task.sleep(until: measureStart, clock: clock)
            let (serverStart, ownStart) = (server.cpuSeconds(), ProcessStats.current.cpuSeconds())
            let tokenStart = await tokenExchangeTotals(http, appURL: appURL)
            try? await Task.sleep(until: end, clock: clock)
            let (serverCPU, ownCPU) = (server.cpuSeconds() - serverStart, ProcessStats.current.cpuSeconds() - ownStart)
            let tokenEnd = await tokenExchangeTotals(http, appURL: appURL)
            guard let tokenStart, let tokenEnd else { return (serverCPU, ownCPU, nil) }
            return (serverCPU, ownCPU, (tokenEnd.sum - tokenStart.sum, tokenEnd.count - tokenStart.count))
        }

        let tallies = await withTaskGroup(of: BrowserTally.self) { group in
            for browser in browsers { group.addTask { await browser.run(until: end) } }
            var all: [BrowserTally] = []
            for await tally in group { all.append(tally) }
            return all
        }
        let readings = await window.value
        await environment.emulator.clearFaults()

        let inWindow = { (instant: ContinuousClock.Instant) in instant >= measureStart && instant <= end }
        let callbacks = tallies.flatMap(\.callbacks).filter { inWindow($0.at) }.map(\.seconds)
        let flows = tallies.flatMap(\.flows).filter { inWindow($0.at) }.map(\.seconds)
        var errorsByKind: [String: Int] = [:]
        var warmupErrors = 0
        for error in tallies.flatMap(\.errors) {
            if error.at < measureStart { warmupErrors += 1 } else { errorsByKind[error.kind, default: 0] += 1 }
        }
        let callbackLatency = LatencySummary(seconds: callbacks)
        let tokenMean = readings.token.flatMap { $0.count > 0 ? $0.sum / $0.count * 1000 : nil }
        let serverMemory = server.memoryMegabytes()
        let ownMemory = ProcessStats.current.memoryMegabytes()
        let cpuPerSignIn = flows.isEmpty ? 0 : readings.serverCPU / Double(flows.count) * 1_000_000
        // Taken after the load, with the server idle: one verification per mean interval between sign-ins.
        let idleSeconds = min(max(options.duration / Double(max(flows.count, 1)), Self.idleRange.lowerBound), Self.idleRange.upperBound)
        let floorAfterIdle = try await CryptoFloor.twoVerificationsAfterIdleMicroseconds(
            idToken: floorProbe.idToken, key: floorProbe.key, idle: .microseconds(Int64(idleSeconds * 1_000_000)))
        return LoadReport(
            server: environment.server == nil ? "in-process" : "process", serverBinary: environment.server?.binary,
            concurrency: options.concurrency, tokenLatencyMilliseconds: options.latencyMs,
            durationSeconds: options.duration, warmupSeconds: options.warmup,
            database: configuration.databaseURL.redactedDescription,
            flows: flows.count, callbacks: callbacks.count,
            flowsPerSecond: Double(flows.count) / options.duration,
            callbacksPerSecond: Double(callbacks.count) / options.duration,
            callbackLatency: callbackLatency, flowLatency: LatencySummary(seconds: flows),
            tokenExchangeMeanMilliseconds: tokenMean,
            callbackBeyondExchangeMilliseconds: tokenMean.map { callbackLatency.mean - $0 },
            loopbackRoundTripMilliseconds: roundTrip,
            errors: errorsByKind.values.reduce(0, +), errorsByKind: errorsByKind, warmupErrors: warmupErrors,
            serverCPUMicrosecondsPerSignIn: cpuPerSignIn,
            floorMicrosecondsPerSignIn: floor,
            ratioToFloor: floor > 0 ? cpuPerSignIn / floor : 0,
            floorAfterIdleMicrosecondsPerSignIn: floorAfterIdle,
            floorIdleMilliseconds: idleSeconds * 1000,
            ratioToFloorAfterIdle: floorAfterIdle > 0 ? cpuPerSignIn / floorAfterIdle : 0,
            serverCPUCores: readings.serverCPU / options.duration,
            loadGeneratorCPUCores: environment.server == nil ? nil : readings.ownCPU / options.duration,
            loadGeneratorScheduling: scheduling,
            cores: ProcessInfo.processInfo.activeProcessorCount,
            serverPeakRSSMegabytes: serverMemory.peak, serverRSSAtEndMegabytes: serverMemory.current,
            loadGeneratorPeakRSSMegabytes: environment.server == nil ? nil : ownMemory.peak,
            loadAverage: ProcessStats.loadAverage())
    }

    /// The pause before each verification of the floor after idle: the mean interval between sign-ins,
    /// kept within these seconds.
    static let idleRange = 0.001...0.020

    /// The floor of one sign-in on this machine, now: the app's JOSE code verifying two id_tokens as the
    /// emulator signs them, with the key the emulator publishes (fetched like the app fetches it); and
    /// the token and key, for the floor after idle.
    private func cryptoFloor(_ http: CurlHTTPClient) async throws -> (Double, (idToken: String, key: RSAPublicKey)) {
        let configuration = environment.configuration
        let person = await environment.emulator.createPerson(givenName: "Floor", familyName: "Probe", email: "floor@example.com")
        let fields = try await environment.emulator.approve(ApprovalRequest(
            clientID: configuration.clientID, redirectURI: configuration.redirectURI, state: "floor-probe",
            nonce: "floor-probe", personID: person.id))
        let keysResponse = try await http.execute(HTTPClientRequest(url: configuration.appleBaseURL + "/auth/keys"))
        guard let idToken = fields.idToken, keysResponse.status == 200,
              let keys = try? JSONDecoder().decode(JWKSet.self, from: Data(keysResponse.body)),
              let kid = try? CompactJWS(compact: idToken).header.kid,
              let jwk = keys.keys.first(where: { $0.kid == kid })
        else { throw LoadTestError("could not get an id_token and its key from the emulator to time the floor") }
        let key = try RSAPublicKey(jwk: jwk)
        return (try CryptoFloor.twoVerificationsMicroseconds(idToken: idToken, key: key), (idToken, key))
    }

    /// p50 of 200 sequential GETs of a small static file: one HTTP round trip over loopback, no database.
    private func loopbackRoundTrip(_ http: CurlHTTPClient) async throws -> Double {
        let clock = ContinuousClock()
        var samples: [Double] = []
        for _ in 0..<200 {
            let start = clock.now
            let response = try await http.execute(HTTPClientRequest(url: environment.appURL + "/favicon.svg"))
            guard response.status == 200 else { throw LoadTestError("GET /favicon.svg answered \(response.status)") }
            samples.append(VirtualBrowser.seconds(clock.now - start))
        }
        return LatencySummary(seconds: samples).p50
    }

    /// The app's own running totals of successful token-endpoint calls (seconds, count), from `/metrics`.
    private func tokenExchangeTotals(_ http: CurlHTTPClient, appURL: String) async -> (sum: Double, count: Double)? {
        guard let response = try? await http.execute(HTTPClientRequest(url: appURL + "/metrics")), response.status == 200
        else { return nil }
        var sum: Double?
        var count: Double?
        for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n")
        where line.contains("endpoint=\"token\"") && line.contains("result=\"ok\"") {
            let value = line.split(separator: " ").last.flatMap { Double($0) }
            if line.hasPrefix("siwa_apple_call_duration_seconds_sum") { sum = value }
            if line.hasPrefix("siwa_apple_call_duration_seconds_count") { count = value }
        }
        guard let sum, let count else { return (0, 0) }
        return (sum, count)
    }
}
