import AppleIDEmulator
import AppleSignIn
import CurlHTTP
import Foundation
import Logging
import SIWAStore
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWASite
@testable import SIWAWeb

/// What an operator watches: the app's log as `LOG_FORMAT=json` writes it, and `/metrics` as the files in
/// `deploy/` (the Grafana dashboard, the Prometheus alert rules) query it, after one journey through the
/// app and the emulator: sign-ins, the gateway, an error page, the consent check, a server-to-server
/// notification, an account deletion and its revocation.
@Suite("End to end: JSON log lines and the monitoring files")
struct MonitoringEndToEndTests {
    final class Lines: TextOutputStream, Sendable {
        let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
    }

    /// The app's dependencies, for work a test starts itself (a consent-check pass).
    struct Journey: Sendable {
        let e2e: EndToEnd
        let dependencies: SIWADependencies
    }

    /// `EndToEnd.run` on SQLite, with the app's dependencies (and so its metrics) in hand.
    static func run(logger appLogger: Logger, _ body: @escaping @Sendable (Journey) async throws -> Void) async throws {
        try await withDatabase(.sqlite) { test in
            let (appPort, emulatorPort) = try await SiteWithEmulator.freePorts()
            let configuration = try SIWAConfiguration.load(from: [
                "DATA_DIR": EndToEnd.dataDirectory(), "PORT": String(appPort), "EMULATOR_PORT": String(emulatorPort),
                "RATE_LIMIT_PER_MINUTE": "0", "APPLE_TIMEOUT": "10", "DATABASE_URL": "sqlite::memory:", "LOG_FORMAT": "json",
            ])
            #expect(configuration.logFormat == .json)
            let http = CurlHTTPClient()
            let dependencies = try await Site.makeDependencies(configuration: configuration, logger: appLogger,
                                                               overrides: SiteOverrides(database: test.db, http: http))
            let emulatorConfiguration = EmulatorConfiguration.forSite(configuration)
            let emulator = try AppleIDEmulatorState(configuration: emulatorConfiguration)
            let e2e = EndToEnd(appURL: configuration.publicURL, emulatorURL: configuration.appleBaseURL, emulator: emulator,
                               database: test.db, configuration: configuration, http: http)
            do {
                try await SiteWithEmulator.run(
                    dependencies: dependencies, emulatorConfiguration: emulatorConfiguration, emulator: emulator,
                    emulatorPort: emulatorPort, appLogger: appLogger, logger: TestDatabase.quietLogger
                ) { try await body(Journey(e2e: e2e, dependencies: dependencies)) }
            } catch {
                await http.shutdown()
                throw error
            }
            await http.shutdown()
        }
    }

    /// The `csrf` field of a page's form.
    static func csrf(_ page: HTTPClientResponse) throws -> String {
        try #require(page.text.range(of: "name=\"csrf\" value=\"").map { String(page.text[$0.upperBound...].prefix { $0 != "\"" }) })
    }

    @Test("LOG_FORMAT=json: every line of a journey (sign-in, gateway, error page, consent check, notification, deletion, revocation) is one JSON object with time, level, message, logger and source; request lines carry request_id, method and path; sign-in and deletion carry the user; a hostile path and Apple `error` stay one line each; /metrics has every metric deploy/ queries")
    func journey() async throws {
        // setup: the app logs JSON at debug level (the request lines) into `lines`
        let lines = Lines()
        var debugLogger = Logger(label: "siwa") { SiteLogHandler(label: $0, format: .json, output: lines) }
        debugLogger.logLevel = .debug
        let appLogger = debugLogger
        let hostilePath = "/nope%0A2025-01-01T00:00:00Z%20error%20siwa:%20forged%E2%80%A8%22%5C"
        let hostileError = "user_cancelled_authorize\n2025-01-01T00:00:00Z error siwa: forged\u{2028}\u{202e}\"\\ é"
        let metricsText = Mutex("")

        // MUT: the journey
        try await Self.run(logger: appLogger) { journey in
            let e2e = journey.e2e
            let ada = WebClient(http: e2e.http)
            #expect(try await e2e.approveAndPost(ada, try await e2e.start(ada), person: "p1").header("Location") == "/account")
            let account = try await ada.get(e2e.appURL + "/account")
            #expect(account.page == "account")
            // the gateway: Ada's session passes, nobody's does not
            #expect(try await ada.get(e2e.appURL + "/oauth2/auth").status == 202)
            #expect(try await WebClient(http: e2e.http).get(e2e.appURL + "/oauth2/auth").status == 401)
            // an error page, from a path someone typed
            #expect(try await WebClient(http: e2e.http).get(e2e.appURL + hostilePath).status == 404)
            // Apple's `error` field, which anyone can post to the callback
            #expect(try await WebClient(http: e2e.http).postForm(e2e.appURL + "/auth/apple/callback", [("error", hostileError)]).status == 303)
            // a pass of the consent check, two days on
            var consentConfiguration = ConsentCheckService.Configuration()
            consentConfiguration.callSpacing = .zero
            let consent = ConsentCheckService(dependencies: journey.dependencies, logger: appLogger, configuration: consentConfiguration,
                                              now: { Int64(Date().timeIntervalSince1970) + 2 * 86_400 })
            #expect(await consent.runOnce().valid == 1)
            // a server-to-server notification: Grace stops using Sign in with Apple at Apple
            let grace = WebClient(http: e2e.http)
            #expect(try await e2e.approveAndPost(grace, try await e2e.start(grace), person: "p3").status == 303)
            #expect(try await e2e.emulator.stopUsing(personID: "p3", clientID: e2e.configuration.clientID)?.status == 200)
            // Ada deletes her account; the revocation reaches the emulator
            let deleted = try await ada.postForm(e2e.appURL + "/account/delete", [("csrf", try Self.csrf(account)), ("confirm", "yes")])
            #expect(deleted.page == "deleted")
            let revoked = try await e2e.eventually {
                let sent = await !e2e.revokeEvents().isEmpty
                let pending = try await e2e.database.outbox.revocationCounts().pending
                return sent && pending == 0
            }
            #expect(revoked)
            let metrics = try await WebClient(http: e2e.http).get(e2e.appURL + "/metrics")
            #expect(metrics.status == 200)
            metricsText.withLock { $0 = metrics.text }
        }

        // validate: the log
        let text = lines.text.withLock { $0 }
        #expect(text.hasSuffix("\n"))
        var objects: [[String: Any]] = []
        for line in text.split(separator: "\n") {
            let parsed = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            let object = try #require(parsed, "not a JSON object: \(line)")
            objects.append(object)
            for field in ["time", "level", "message", "logger", "source"] {
                #expect(object[field] is String, "\(field) missing: \(line)")
            }
            #expect((object["time"] as? String)?.hasSuffix("Z") == true)
            if object["path"] != nil {
                #expect(object["request_id"] is String && object["method"] is String, "\(line)")
            }
        }
        let requests = objects.filter { $0["message"] as? String == "Request" }
        #expect(requests.count >= 10)
        #expect(Set(requests.compactMap { $0["request_id"] as? String }).count == requests.count, "one request id per request")
        for path in ["/auth/apple", "/auth/apple/callback", "/account", "/oauth2/auth", "/account/delete", "/auth/apple/notifications", "/metrics"] {
            #expect(requests.contains { $0["path"] as? String == path }, "no request line for \(path)")
        }
        // request-borne text: the path as it came (percent-encoded), Apple's `error` as LogSafe made it; one line each
        #expect(requests.contains { $0["path"] as? String == hostilePath })
        let ended = try #require(objects.first { $0["message"] as? String == "sign-in ended at Apple" })
        #expect(ended["error"] as? String == LogSafe.text(hostileError, limit: 64) && ended["request_id"] is String)
        #expect(!text.contains("\u{2028}") && !text.contains("\u{202e}") && text.split(separator: "\n").count == objects.count)
        let signedIn = objects.filter { $0["message"] as? String == "signed in" }
        #expect(signedIn.count == 2 && signedIn.allSatisfy { $0["user"] is String && $0["request_id"] is String })
        let deletion = try #require(objects.first { $0["message"] as? String == "account deleted" })
        #expect(deletion["user"] as? String == signedIn.first?["user"] as? String && deletion["request_id"] is String)
        #expect(objects.contains { $0["message"] as? String == "notification applied" && $0["request_id"] is String })
        #expect(objects.contains { $0["message"] as? String == "revocation accepted by Apple" && $0["request_id"] == nil })
        #expect(!text.contains("<redacted>"), "siwa logs no credential under any name")

        // validate: every metric the dashboard and the alert rules query is on /metrics
        let exported = Self.sampleNames(metricsText.withLock { $0 })
        let queried = try Self.queriedMetrics()
        #expect(queried.count >= 10)
        for name in queried.sorted() {
            #expect(exported.contains(name), "\(name) is queried by deploy/ but not on /metrics after the journey")
        }
    }

    /// The metric names `/metrics` has samples for (`siwa_x_bucket`, `siwa_x_count`, `siwa_x_sum` for a histogram).
    static func sampleNames(_ exposition: String) -> Set<String> {
        Set(exposition.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in
            line.split(whereSeparator: { $0 == "{" || $0 == " " }).first.map(String.init)
        })
    }

    /// Every `siwa_…` metric named in a PromQL expression of `deploy/grafana-dashboard.json` (its panels'
    /// `expr` and its variables' queries) and `deploy/prometheus-alerts.yml` (its `expr:` lines).
    static func queriedMetrics() throws -> Set<String> {
        let deploy = ResourceLocator.packageRoot + "/deploy/"
        var expressions: [String] = []
        let dashboard = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: deploy + "grafana-dashboard.json")))
        func collect(_ value: Any) {
            if let object = value as? [String: Any] {
                for (key, element) in object {
                    if ["expr", "query", "definition"].contains(key), let text = element as? String { expressions.append(text) }
                    collect(element)
                }
            } else if let array = value as? [Any] {
                array.forEach(collect)
            }
        }
        collect(dashboard)
        let rules = try String(contentsOfFile: deploy + "prometheus-alerts.yml", encoding: .utf8)
        let exprLines = rules.split(separator: "\n").compactMap { $0.firstMatch(of: /^\s*expr:\s*(.+)$/).map { String($0.1) } }
        #expect(exprLines.count >= 8)
        expressions += exprLines
        var names: Set<String> = []
        for expression in expressions {
            for match in expression.matches(of: /(?:^|[^A-Za-z0-9_:.])(siwa_[A-Za-z0-9_:]+)(?=[\s{\[),]|$)/) {
                names.insert(String(match.1))
            }
        }
        return names
    }
}
