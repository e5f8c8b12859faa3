import Foundation
import Logging
import SIWATestSupport
import Testing

@testable import SIWASite

/// `siwa emulator`'s settings table (``EmulatorSettings``): the flags it always had, the environment
/// behind them, the rules between them, and docs/staging.md's table.
@Suite("EmulatorSettings")
struct EmulatorSettingsTests {
    typealias S = EmulatorSettings

    /// The options of `arguments` over `environment`.
    func options(_ arguments: [String], _ environment: [String: String] = [:]) throws -> StandaloneEmulator.Options {
        try S.options(arguments: arguments, environment: environment)
    }

    /// The one line the command would print, or nil when the options are accepted.
    func failure(_ arguments: [String], _ environment: [String: String] = [:]) -> String? {
        do {
            _ = try options(arguments, environment)
            return nil
        } catch {
            return String(describing: error)
        }
    }

    static let oneTeam = ["--team-id", Fixture.teamID, "--key-id", Fixture.keyID, "--public-key", "/keys/team.pem"]

    @Test("every flag the emulator always had still parses, lists repeated, in both spellings")
    func existingFlags() throws {
        // setup
        let arguments = Self.oneTeam + [
            "--host", "0.0.0.0", "--port=9090", "--state-file", "/tmp/state.json", "--admin-token", "0123456789abcdef0123",
            "--allow-insecure-redirect-uris", "--client-id", Fixture.webClientID, "--client-id=\(Fixture.otherClientID)",
            "--native-client-id", Fixture.nativeClientID, "--redirect-uri", "https://example.com/cb?a=1,2",
            "--redirect-uri", "https://example.com/other", "--notification-url", "https://example.com/notify",
            "--log-level", "NOTICE", "--resources-dir", "/srv/siwa",
        ]
        // MUT
        let parsed = try options(arguments)
        // validate
        #expect(parsed.host == "0.0.0.0" && parsed.port == 9090)
        #expect(parsed.configFile == nil && parsed.stateFile == "/tmp/state.json")
        #expect(parsed.adminToken == "0123456789abcdef0123" && parsed.allowInsecureRedirectURIs)
        #expect(parsed.teamID == Fixture.teamID && parsed.keyID == Fixture.keyID && parsed.publicKeyPath == "/keys/team.pem")
        #expect(parsed.clientIDs == [Fixture.webClientID, Fixture.otherClientID] && parsed.nativeClientIDs == [Fixture.nativeClientID])
        // a repeated flag's value is taken whole: a comma inside a URI does not split it
        #expect(parsed.redirectURIs == ["https://example.com/cb?a=1,2", "https://example.com/other"])
        #expect(parsed.notificationURL == "https://example.com/notify" && parsed.logLevel == .notice)
        #expect(parsed.resourcesDirectory == "/srv/siwa")
    }

    @Test("defaults: loopback 8081, no token, secure redirect URIs, info")
    func defaults() throws {
        let parsed = try options(["--config", "emulator.json"])
        #expect(parsed.host == "127.0.0.1" && parsed.port == 8081 && parsed.configFile == "emulator.json")
        #expect(parsed.adminToken == nil && parsed.stateFile == nil && !parsed.allowInsecureRedirectURIs)
        #expect(parsed.logLevel == .info && parsed.clientIDs.isEmpty && parsed.resourcesDirectory == nil)
    }

    @Test("each setting is also its environment variable; a flag wins; lists are comma-separated")
    func environment() throws {
        // setup
        let environment = [
            S.host.name: "0.0.0.0", S.port.name: "9191", S.configFile.name: "from-env.json",
            S.adminToken.name: "env-token-0123456789", S.allowInsecureRedirectURIs.name: "1", S.logLevel.name: "debug",
        ]
        // MUT, validate
        let fromEnvironment = try options([], environment)
        #expect(fromEnvironment.host == "0.0.0.0" && fromEnvironment.port == 9191 && fromEnvironment.configFile == "from-env.json")
        #expect(fromEnvironment.adminToken == "env-token-0123456789" && fromEnvironment.allowInsecureRedirectURIs)
        #expect(fromEnvironment.logLevel == .debug)
        let flagsWin = try options(["--port", "9292", "--admin-token", "flag-token-0123456789", "--config", "flag.json"],
                                   environment)
        #expect(flagsWin.port == 9292 && flagsWin.adminToken == "flag-token-0123456789" && flagsWin.configFile == "flag.json")
        #expect(flagsWin.host == "0.0.0.0")

        let team = [S.teamID.name: Fixture.teamID, S.keyID.name: Fixture.keyID, S.publicKeyPath.name: "/keys/team.pem",
                    S.clientIDs.name: "\(Fixture.webClientID), \(Fixture.otherClientID)", S.redirectURIs.name: "https://example.com/cb"]
        let oneTeam = try options([], team)
        #expect(oneTeam.clientIDs == [Fixture.webClientID, Fixture.otherClientID] && oneTeam.redirectURIs == ["https://example.com/cb"])
        let repeated = try options(["--client-id", "com.example.flag"], team)
        #expect(repeated.clientIDs == ["com.example.flag"])
    }

    @Test("siwa serve's EMULATOR_PORT (demo mode's emulator) does not move the standalone emulator")
    func demoPortIsNotTheListenPort() throws {
        #expect(S.port.name != SiteSettings.emulatorPort.name)
        let parsed = try options(["--config", "emulator.json"], [SiteSettings.emulatorPort.name: "7000"])
        #expect(parsed.port == 8081)
        // no variable of siwa serve's but the resources folder, which means the same for both
        let shared = Set(S.all.map(\.name)).intersection(SiteSettings.all.map(\.name))
        #expect(shared == [SiteSettings.resourcesDirectory.name])
    }

    @Test("the rules between settings, each naming them through the table")
    func rules() {
        #expect(failure(["--config", "emulator.json", "--team-id", Fixture.teamID])
            == "\(S.configFile.flagName) replaces the one-team flags (\(S.teamID.flagName), \(S.clientIDs.flagName), …): give one or the other")
        #expect(failure(["--config", "emulator.json"], [S.clientIDs.name: Fixture.webClientID]) != nil)
        #expect(failure(["--team-id", Fixture.teamID])
            == "\(S.teamID.flagName), \(S.keyID.flagName) and \(S.publicKeyPath.flagName) are required (or \(S.configFile.flagName) emulator.json)")
        #expect(failure(Self.oneTeam) == "\(S.clientIDs.flagName) or \(S.nativeClientIDs.flagName) is required")
        #expect(failure(Self.oneTeam + ["--client-id", Fixture.webClientID])
            == "\(S.redirectURIs.flagName) is required with \(S.clientIDs.flagName)")
        #expect(failure(Self.oneTeam + ["--native-client-id", Fixture.nativeClientID]) == nil)
    }

    @Test("a malformed value or an unknown flag is one line naming it")
    func malformed() {
        #expect(failure(["--config", "e.json", "--port", "abc"]) == "configuration error: \(S.port.name) must be a whole number, got abc")
        #expect(failure(["--config", "e.json"], [S.allowInsecureRedirectURIs.name: "maybe"])
            == "configuration error: \(S.allowInsecureRedirectURIs.name) must be 1 or 0, got maybe")
        #expect(failure(["--config", "e.json", "--allow-insecure-redirect-uris=1"]) == "--allow-insecure-redirect-uris takes no value")
        #expect(failure(["--config", "e.json", "--demo"]) == "unknown option --demo (the settings are listed by --help)")
        #expect(failure(["--config"]) == "--config needs a value (\(S.configFile.name))")
    }

    @Test("the admin token: required beyond loopback, 16 characters at least, secret")
    func adminToken() {
        #expect(S.adminToken.row.isSecret && S.all.filter(\.isSecret).map(\.name) == [S.adminToken.name])
        #expect(S.adminTokenProblem(host: "127.0.0.1", token: nil) == nil)
        #expect(S.adminTokenProblem(host: "0.0.0.0", token: "0123456789abcdef") == nil)
        #expect(S.adminTokenProblem(host: "0.0.0.0", token: nil)
            == "\(S.host.flagName) 0.0.0.0 is not a loopback address: the admin API needs \(S.adminToken.flagName) (or \(S.adminToken.name))")
        #expect(S.adminTokenProblem(host: "::1", token: "short")
            == "\(S.adminToken.flagName): use at least 16 characters (e.g. openssl rand -hex 32)")
    }

    @Test("--help lists every setting's flag and variable, no line past 79 columns")
    func help() {
        for row in S.all {
            #expect(S.helpText.contains("--\(row.flag)") && S.helpText.contains(row.name))
        }
        let settings = SettingFlags.helpText(table: S.all).split(separator: "\n")
        #expect(settings.allSatisfy { $0.count < 80 }, "\(settings.filter { $0.count >= 80 })")
        #expect(Set(S.all.map(\.flag)).count == S.all.count && Set(S.all.map(\.name)).count == S.all.count)
    }

    @Test("docs/staging.md's table is the settings table")
    func stagingDocTable() throws {
        let guide = try String(contentsOfFile: ResourceLocator.packageRoot + "/docs/staging.md", encoding: .utf8)
        let section = try #require(guide.components(separatedBy: "\n## Running it\n").dropFirst().first?
            .components(separatedBy: "\n## ").first)
        let documented = section.split(separator: "\n").filter { $0.hasPrefix("|") }.joined(separator: "\n")
        #expect(documented == S.markdownTable, "docs/staging.md's table should read:\n\(S.markdownTable)")
    }
}
