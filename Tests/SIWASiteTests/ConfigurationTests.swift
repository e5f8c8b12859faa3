import Foundation
import JOSE
import SIWAStore
import SIWATestSupport
import SIWAWeb
import Testing

@testable import SIWASite

@Suite("Configuration")
struct ConfigurationTests {
    let key = try! P256PrivateKey.generate()

    var productionSettings: [String: String] {
        [
            "APPLE_TEAM_ID": Fixture.teamID, "APPLE_CLIENT_ID": Fixture.webClientID, "APPLE_KEY_ID": Fixture.keyID,
            "APPLE_PRIVATE_KEY": try! key.pkcs8PEM(), "PUBLIC_URL": "https://example.com",
            "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)), "DATABASE_URL": "sqlite::memory:",
        ]
    }

    func failure(_ values: [String: String]) -> ConfigurationError? {
        do {
            _ = try SIWAConfiguration.load(from: values)
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test("a complete production configuration loads with SPEC defaults")
    func production() throws {
        let configuration = try SIWAConfiguration.load(from: productionSettings)
        #expect(!configuration.isDemo)
        #expect(configuration.redirectURI == "https://example.com/auth/apple/callback")
        #expect(configuration.appleBaseURL == "https://appleid.apple.com")
        #expect(configuration.host == "127.0.0.1" && configuration.port == 8080)
        #expect(configuration.appleTimeout == .seconds(10) && configuration.rateLimitPerMinute == 60)
        #expect(configuration.clientSecretLifetime == .seconds(2_592_000))
        #expect(configuration.profileFallback == .recovery)
        #expect(configuration.isHTTPS)
    }

    @Test("each bad setting fails with one line naming it", arguments: [
        ("APPLE_TEAM_ID", "SHORT"),
        ("APPLE_KEY_ID", "TOO-LONG-KEY-ID"),
        ("APPLE_PRIVATE_KEY", "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----"),
        ("APPLE_REDIRECT_URI", "http://example.com/callback"),
        ("TOKEN_ENCRYPTION_KEY", "c2hvcnQ="),
        ("DATABASE_URL", "mysql://x"),
        ("PORT", "70000"),
        ("APPLE_TIMEOUT", "-1"),
        ("RATE_LIMIT_PER_MINUTE", "lots"),
        ("PROFILE_FALLBACK", "guess"),
        ("PUBLIC_URL", "not a url"),
        ("APPLE_CLIENT_SECRET_LIFETIME", "99999999"),
        ("TRUSTED_PROXIES", "10.0.0.0/8, proxy.internal"),
        ("TRUSTED_PROXIES", "10.0.0.0/33"),
        ("SESSION_COOKIE_DOMAIN", "evil.com"),
        ("SESSION_COOKIE_DOMAIN", "com"),
        ("MAX_PENDING_AUTHORIZATIONS_PER_CLIENT", "-1"),
        ("METRICS_PORT", "8080"),
        ("METRICS_TOKEN", "short"),
        ("SIWA_DEMO", "maybe"),
        ("EVENT_LOOP_THREADS", "0"),
        ("EVENT_LOOP_THREADS", "many"),
        ("POSTGRES_MAX_CONNECTIONS", "0"),
        ("POSTGRES_MAX_CONNECTIONS", "lots"),
        ("SESSION_LIFETIME_SECONDS", "0"),
        ("SESSION_LIFETIME_SECONDS", "-60"),
        ("SESSION_LIFETIME_SECONDS", "30d"),
        ("SESSION_LIFETIME_SECONDS", "315360001"),
        ("SESSION_IDLE_TIMEOUT_SECONDS", "-1"),
        ("SESSION_IDLE_TIMEOUT_SECONDS", "two weeks"),
        ("SESSION_IDLE_TIMEOUT_SECONDS", "600.5"),
        ("APP_ACCESS_TOKEN_LIFETIME_SECONDS", "0"),
        ("APP_ACCESS_TOKEN_LIFETIME_SECONDS", "2592001"),
        ("APP_ACCESS_TOKEN_LIFETIME_SECONDS", "1h"),
        ("APP_REFRESH_TOKEN_LIFETIME_SECONDS", "-7776000"),
        ("APP_REFRESH_TOKEN_LIFETIME_SECONDS", "many"),
    ])
    func badSetting(name: String, value: String) throws {
        var values = productionSettings
        values[name] = value
        let error = try #require(failure(values))
        #expect(error.setting == name)
        #expect(!error.description.contains("\n"))
        #expect(error.description.contains(name))
    }

    @Test("a P-384 or RSA key is refused as not P-256")
    func wrongKeyKind() throws {
        var values = productionSettings
        values["APPLE_PRIVATE_KEY"] = try RSAPrivateKey.generate().pkcs8PEM()
        #expect(failure(values)?.setting == "APPLE_PRIVATE_KEY")
        values["APPLE_PRIVATE_KEY"] = nil
        values["APPLE_PRIVATE_KEY_PATH"] = "/nonexistent/AuthKey.p8"
        #expect(failure(values)?.setting == "APPLE_PRIVATE_KEY_PATH")
    }

    @Test("partial credentials name what is missing; none at all is demo mode")
    func demoOrMissing() throws {
        var values = productionSettings
        values["APPLE_KEY_ID"] = nil
        #expect(failure(values)?.setting == "APPLE_KEY_ID")
        values = productionSettings
        values["TOKEN_ENCRYPTION_KEY"] = nil
        #expect(failure(values)?.setting == "TOKEN_ENCRYPTION_KEY")

        let directory = TestScratch.path("siwa-demo")
        let demo = try SIWAConfiguration.load(from: ["DATA_DIR": directory, "PORT": "9090"])
        #expect(demo.isDemo)
        #expect(demo.publicURL == "http://localhost:9090")
        #expect(demo.appleBaseURL == "http://127.0.0.1:9091")
        #expect(demo.redirectURI == "http://localhost:9090/auth/apple/callback")
        #expect(demo.databaseURL.redactedDescription == "sqlite:\(directory)/siwa.sqlite")
        // keys are generated once and reused
        let again = try SIWAConfiguration.load(from: ["DATA_DIR": directory, "PORT": "9090"])
        #expect(try again.privateKey.pkcs8PEM() == (try demo.privateKey.pkcs8PEM()))
        #expect(again.tokenEncryptionKey == demo.tokenEncryptionKey)
        let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/demo-apple-key.p8")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test("the summary never prints secrets")
    func summary() throws {
        let values = productionSettings
        let configuration = try SIWAConfiguration.load(from: values)
        let text = configuration.summary.map { "\($0.0) \($0.1)" }.joined(separator: "\n")
        #expect(!text.contains(values["TOKEN_ENCRYPTION_KEY"]!))
        #expect(!text.contains("PRIVATE KEY"))
    }

    @Test("demo mode starts only on a loopback HOST, unless forced (SPEC §9)")
    func demoOnlyOnLoopback() throws {
        let directory = NSTemporaryDirectory() + "siwa-demo-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for host in ["127.0.0.1", "localhost", "::1", "127.0.0.2"] {
            #expect(try SIWAConfiguration.load(from: ["DATA_DIR": directory, "HOST": host]).isDemo, "\(host)")
        }
        for host in ["0.0.0.0", "::", "192.0.2.10", "app.example.com"] {
            let error = try #require(failure(["DATA_DIR": directory, "HOST": host]))
            #expect(error.setting == "APPLE_TEAM_ID" && error.description.contains("--demo") && !error.description.contains("\n"))
        }
        #expect(try SIWAConfiguration.load(from: ["DATA_DIR": directory, "HOST": "0.0.0.0", "SIWA_DEMO": "1"]).isDemo)
    }

    @Test("outside demo mode an APPLE_BASE_URL that is not Apple's is a warning")
    func baseURLWarning() throws {
        #expect(try SIWAConfiguration.load(from: productionSettings).warnings.isEmpty)
        var values = productionSettings
        values["APPLE_BASE_URL"] = "https://apple-emulator.staging.example.com"
        let warnings = try SIWAConfiguration.load(from: values).warnings
        #expect(warnings.count == 1 && warnings[0].contains("APPLE_BASE_URL") && warnings[0].contains("apple-emulator.staging.example.com"))
    }

    @Test("proxy settings: defaults and parsed values")
    func proxySettings() throws {
        let defaults = try SIWAConfiguration.load(from: productionSettings)
        #expect(defaults.trustedProxies.description == "127.0.0.0/8,::1/128")
        #expect(defaults.sessionCookieDomain == nil && defaults.metricsPort == nil && defaults.metricsToken == nil)
        #expect(defaults.maximumPendingAuthorizationsPerClient == 300)
        var values = productionSettings
        values["PUBLIC_URL"] = "https://login.example.com"
        values["TRUSTED_PROXIES"] = "10.0.0.0/8, 2001:db8::/32"
        values["SESSION_COOKIE_DOMAIN"] = ".Example.com"
        let configured = try SIWAConfiguration.load(from: values)
        #expect(configured.trustedProxies.description == "10.0.0.0/8,2001:db8::/32")
        #expect(configured.sessionCookieDomain == "example.com")
        values["TRUSTED_PROXIES"] = ""
        #expect(try SIWAConfiguration.load(from: values).trustedProxies.networks.isEmpty == false)   // empty = unset = default
    }

    @Test("durations are typed: APPLE_TIMEOUT takes fractions of a second, the secret lifetime whole seconds")
    func durations() throws {
        var values = productionSettings
        values["APPLE_TIMEOUT"] = "2.5"
        values["APPLE_CLIENT_SECRET_LIFETIME"] = "7200"
        let configuration = try SIWAConfiguration.load(from: values)
        #expect(configuration.appleTimeout == .milliseconds(2_500))
        #expect(configuration.clientSecretLifetime == .seconds(7_200))
        values["APPLE_CLIENT_SECRET_LIFETIME"] = "7200.5"
        #expect(failure(values)?.setting == "APPLE_CLIENT_SECRET_LIFETIME")
    }

    @Test("POSTGRES_MAX_CONNECTIONS: 4 per core, at least 16, by default; the pool size for PostgreSQL only")
    func postgresMaxConnections() throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var values = productionSettings
        let sqlite = try SIWAConfiguration.load(from: values)
        #expect(sqlite.postgresMaxConnections == max(16, 4 * cores))
        #expect(sqlite.databasePoolSize == nil)
        values["DATABASE_URL"] = "postgres://siwa:secret@db.internal:5432/siwa"
        #expect(try SIWAConfiguration.load(from: values).databasePoolSize == max(16, 4 * cores))
        values["POSTGRES_MAX_CONNECTIONS"] = "40"
        #expect(try SIWAConfiguration.load(from: values).databasePoolSize == 40)
        #expect(try SIWAConfiguration.load(SettingSources(environment: values, flags: ["POSTGRES_MAX_CONNECTIONS": "12"])).databasePoolSize == 12)
    }

    @Test("session lifetimes (SPEC §13): 30 days, 14 days idle, 1 hour access token, 90 days refresh by default; set as seconds; idle 0 = none")
    func sessionLifetimes() throws {
        let defaults = try SIWAConfiguration.load(from: productionSettings)
        #expect(defaults.sessionLifetime == 2_592_000 && defaults.sessionIdleTimeout == 1_209_600)
        #expect(defaults.appAccessTokenLifetime == 3_600 && defaults.appRefreshTokenLifetime == 7_776_000)
        #expect(defaults.sessionTouch == SessionTouch(idleTimeout: 1_209_600) && defaults.sessionTouch.interval == 3_600)
        #expect(defaults.summary.contains { $0 == ("SESSION_IDLE_TIMEOUT_SECONDS", "1209600 s") })
        var values = productionSettings
        values["SESSION_LIFETIME_SECONDS"] = "86400"
        values["SESSION_IDLE_TIMEOUT_SECONDS"] = "600"
        values["APP_ACCESS_TOKEN_LIFETIME_SECONDS"] = "900"
        values["APP_REFRESH_TOKEN_LIFETIME_SECONDS"] = "2592000"
        let set = try SIWAConfiguration.load(from: values)
        #expect(set.sessionLifetime == 86_400 && set.sessionIdleTimeout == 600)
        #expect(set.appAccessTokenLifetime == 900 && set.appRefreshTokenLifetime == 2_592_000)
        #expect(set.sessionTouch.interval == 60)
        // 0: no idle deadline (the session lives its lifetime), its last use still recorded hourly
        values["SESSION_IDLE_TIMEOUT_SECONDS"] = "0"
        let none = try SIWAConfiguration.load(from: values)
        #expect(none.sessionIdleTimeout == 0 && none.sessionTouch.interval == 3_600)
        #expect(none.sessionTouch.idleDeadline(now: 1_000, expiresAt: 90_000) == nil)
        #expect(none.summary.contains { $0 == ("SESSION_IDLE_TIMEOUT_SECONDS", "none") })
        // flags, as for every setting
        let flags = try SettingFlags.parse(["--session-lifetime", "3600", "--session-idle-timeout=0",
                                            "--app-access-token-lifetime", "60", "--app-refresh-token-lifetime=86400"])
        let flagged = try SIWAConfiguration.load(SettingSources(environment: productionSettings, flags: flags))
        #expect(flagged.sessionLifetime == 3_600 && flagged.sessionIdleTimeout == 0)
        #expect(flagged.appAccessTokenLifetime == 60 && flagged.appRefreshTokenLifetime == 86_400)
        // a refusal names the setting and what it takes
        values["SESSION_IDLE_TIMEOUT_SECONDS"] = "-1"
        #expect(failure(values)?.description.contains("0 (none)") == true)
    }

    @Test("EVENT_LOOP_THREADS: half the cores by default, at least one; read alone (before the event loops start), a bad value counts as unset")
    func eventLoopThreads() throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        #expect(try SIWAConfiguration.load(from: productionSettings).eventLoopThreads == max(1, cores / 2))
        var values = productionSettings
        values["EVENT_LOOP_THREADS"] = "3"
        #expect(try SIWAConfiguration.load(from: values).eventLoopThreads == 3)
        #expect(SiteSettings.eventLoopThreads(in: SettingSources(environment: values)) == 3)
        #expect(SiteSettings.eventLoopThreads(in: SettingSources(environment: values, flags: ["EVENT_LOOP_THREADS": "5"])) == 5)
        values["EVENT_LOOP_THREADS"] = "257"
        #expect(SiteSettings.eventLoopThreads(in: SettingSources(environment: values)) == max(1, cores / 2))
        #expect(failure(values)?.setting == "EVENT_LOOP_THREADS")
    }

    @Test("flags come from the table: `--name value`, `--name=value` and switches; a flag wins over the environment")
    func flags() throws {
        let flags = try SettingFlags.parse(["--port", "9000", "--site-name=Example Site", "--demo", "--trusted-proxies", "10.0.0.0/8"])
        #expect(flags == ["PORT": "9000", "SITE_NAME": "Example Site", "SIWA_DEMO": "1", "TRUSTED_PROXIES": "10.0.0.0/8"])
        let configuration = try SIWAConfiguration.load(SettingSources(environment: productionSettings.merging(["PORT": "1234"]) { $1 },
                                                                      flags: ["PORT": "9000"]))
        #expect(configuration.port == 9000)
        #expect(throws: SettingFlags.UsageError.self) { try SettingFlags.parse(["--no-such-setting", "1"]) }
        #expect(throws: SettingFlags.UsageError.self) { try SettingFlags.parse(["--port"]) }
        #expect(throws: SettingFlags.UsageError.self) { try SettingFlags.parse(["--demo=1"]) }
        // Every setting has one flag, and `--help` lists every one of them.
        #expect(Set(SiteSettings.all.map(\.flag)).count == SiteSettings.all.count)
        for row in SiteSettings.all {
            #expect(SettingFlags.helpText.contains("--\(row.flag)") && SettingFlags.helpText.contains(row.name))
        }
    }

    @Test("the summary has a row per setting in effect, derived from the table")
    func summaryRows() throws {
        let configuration = try SIWAConfiguration.load(from: productionSettings)
        let names = configuration.summary.map(\.0)
        #expect(names.first == "mode")
        #expect(names.contains("APPLE_TIMEOUT") && names.contains("LOG_LEVEL") && names.contains("SIWA_RESOURCES_DIR"))
        #expect(configuration.summary.contains { $0 == ("APPLE_TIMEOUT", "10 s") })
        #expect(configuration.summary.contains { $0 == ("TOKEN_ENCRYPTION_KEY", "set (32 bytes)") })
    }

    @Test("docs/operating.md's configuration table is the settings table: every name, meaning and default")
    func operatingDocTable() throws {
        let guide = try String(contentsOfFile: ResourceLocator.packageRoot + "/docs/operating.md", encoding: .utf8)
        let section = try #require(guide.components(separatedBy: "\n## Configuration\n").dropFirst().first?
            .components(separatedBy: "\n## ").first)
        let documented = section.split(separator: "\n").filter { $0.hasPrefix("|") }.joined(separator: "\n")
        #expect(documented == SettingFlags.markdownTable, "docs/operating.md's table should read:\n\(SettingFlags.markdownTable)")
    }
}
