import AppleIDEmulator
import Foundation
import Logging
import SIWAWeb

/// The table of `siwa emulator`'s settings: each entry is the environment variable, the flag (the
/// flags it always had), what it means, its default and its parser, built like ``SiteSettings``;
/// `siwa emulator --help`, the reading of flags over the environment (``options(arguments:environment:)``)
/// and docs/staging.md's table (checked by `EmulatorSettingsTests`) are made from it.
///
/// The variables are `EMULATOR_…`, none of them `siwa serve`'s: a staging host may run both from one
/// environment, and `siwa serve`'s `EMULATOR_PORT` (where demo mode's emulator listens, `PORT`+1) or
/// `APPLE_TEAM_ID` (the real team) must not move or reconfigure a standalone emulator. So the listen port
/// is `EMULATOR_LISTEN_PORT`. The one row shared with `siwa serve` is `SIWA_RESOURCES_DIR`, which means
/// the same for both.
public enum EmulatorSettings {
    static let host = Setting<String>(
        "EMULATOR_HOST", flag: "host",
        meaning: "address to listen on; beyond loopback the admin API needs `EMULATOR_ADMIN_TOKEN`",
        default: "127.0.0.1", defaultText: "`127.0.0.1`", parse: Parse.text, summary: none)
    static let port = Setting<Int>(
        "EMULATOR_LISTEN_PORT", flag: "port",
        meaning: "port to listen on (`siwa serve`'s `EMULATOR_PORT` is demo mode's emulator, not this one)",
        default: 8081, defaultText: "`8081`", parse: Parse.port, summary: none)
    static let configFile = Setting<String>(
        "EMULATOR_CONFIG", flag: "config",
        meaning: "JSON file with teams, Services IDs, app bundle ids and test people, instead of the one-team settings below (`deploy/emulator.json` is an example)",
        defaultText: "unset: one team", parse: Parse.text, summary: none)
    static let stateFile = Setting<String>(
        "EMULATOR_STATE_FILE", flag: "state-file",
        meaning: "JSON file where people, consents and refresh tokens are kept across restarts",
        defaultText: "unset: nothing kept", parse: Parse.text, summary: none)
    static let adminToken = Setting<String>(
        "EMULATOR_ADMIN_TOKEN", flag: "admin-token",
        meaning: "bearer token every admin route requires (16+ characters); required when the host is not a loopback address",
        defaultText: "unset: admin API open (loopback only)", secret: true, parse: Parse.text, summary: none)
    static let allowInsecureRedirectURIs = Setting<Bool>(
        "EMULATOR_ALLOW_INSECURE_REDIRECT_URIS", flag: "allow-insecure-redirect-uris",
        meaning: "`1` (or the flag): accept http, IP-address and localhost redirect URIs, which Apple refuses (loopback test setups only)",
        default: false, defaultText: "unset", isSwitch: true, parse: Parse.onOff, summary: none)
    static let teamID = Setting<String>(
        "EMULATOR_TEAM_ID", flag: "team-id", meaning: "one team: the operator's team id",
        defaultText: "—", parse: Parse.text, summary: none)
    static let keyID = Setting<String>(
        "EMULATOR_KEY_ID", flag: "key-id", meaning: "one team: the .p8 key's id",
        defaultText: "—", parse: Parse.text, summary: none)
    static let publicKeyPath = Setting<String>(
        "EMULATOR_PUBLIC_KEY_PATH", flag: "public-key",
        meaning: "one team: PEM file with the team's P-256 public key (or the .p8 itself)",
        defaultText: "—", parse: Parse.text, summary: none)
    static let clientIDs = Setting<[String]>(
        "EMULATOR_CLIENT_IDS", flag: "client-id", meaning: "one team: its Services IDs (comma-separated; repeat the flag)",
        defaultText: "none", isList: true, parse: Parse.element, summary: none)
    static let nativeClientIDs = Setting<[String]>(
        "EMULATOR_NATIVE_CLIENT_IDS", flag: "native-client-id",
        meaning: "one team: app bundle ids accepted for native sign-in (comma-separated; repeat the flag)",
        defaultText: "none", isList: true, parse: Parse.element, summary: none)
    static let redirectURIs = Setting<[String]>(
        "EMULATOR_REDIRECT_URIS", flag: "redirect-uri",
        meaning: "one team: the redirect URIs registered for its Services IDs (comma-separated; repeat the flag)",
        defaultText: "none", isList: true, parse: Parse.element, summary: none)
    static let notificationURL = Setting<String>(
        "EMULATOR_NOTIFICATION_URL", flag: "notification-url",
        meaning: "one team: where to send server-to-server notifications", defaultText: "unset: none sent",
        parse: Parse.text, summary: none)
    static let logLevel = Setting<Logger.Level>(
        "EMULATOR_LOG_LEVEL", flag: "log-level", meaning: "`trace` … `error`", default: .info, defaultText: "`info`",
        parse: Parse.logLevel, summary: none)
    /// `siwa serve`'s `SIWA_RESOURCES_DIR`, worded for the emulator, which reads only `templates/emulator/`.
    static let resourcesDirectory = Setting<String>(
        SiteSettings.resourcesDirectory.name, flag: SiteSettings.resourcesDirectory.row.flag,
        meaning: "the folder holding `templates/emulator/` (an installed binary's: docs/operating.md, systemd)",
        defaultText: SiteSettings.resourcesDirectory.row.defaultText, parse: Parse.text, summary: none)

    /// Every setting, in the order `--help` and docs/staging.md list them.
    public static let all: [SettingRow] = [
        host.row, port.row, configFile.row, stateFile.row, adminToken.row, allowInsecureRedirectURIs.row, teamID.row,
        keyID.row, publicKeyPath.row, clientIDs.row, nativeClientIDs.row, redirectURIs.row, notificationURL.row,
        logLevel.row, resourcesDirectory.row,
    ]

    /// The settings of one team, which ``configFile`` replaces.
    static var oneTeamRows: [SettingRow] {
        [teamID.row, keyID.row, publicKeyPath.row, clientIDs.row, nativeClientIDs.row, redirectURIs.row, notificationURL.row]
    }

    /// `siwa emulator --help`'s text: what the command is for, then every setting.
    public static var helpText: String {
        """
        One team: \(teamID.flagName), \(keyID.flagName), \(publicKeyPath.flagName), \(clientIDs.flagName)/\(nativeClientIDs.flagName) and \(redirectURIs.flagName).

        Several teams, Services IDs, app bundle ids and test people: \(configFile.flagName) emulator.json (deploy/emulator.json is an example).

        \(stateFile.flagName) keeps people, consents and refresh tokens across restarts. Beyond loopback, the admin API needs \(adminToken.flagName).


        """ + SettingFlags.helpText(table: all)
    }

    /// docs/staging.md's table of the settings, as the table makes it (`EmulatorSettingsTests` compares the two).
    public static var markdownTable: String {
        (["| flag | variable | meaning | default |", "|---|---|---|---|"]
            + all.map { row in
                let flag = "--\(row.flag)" + (row.isSwitch ? "" : " VALUE") + (row.isList ? " …" : "")
                return "| `\(flag)` | `\(row.name)` | \(row.meaning) | \(row.defaultText) |"
            }).joined(separator: "\n")
    }

    /// The options `siwa emulator` runs with: its `arguments` (the flags, which win) over `environment`.
    /// A flag the table does not know, a malformed value, or a set of settings that describes no emulator
    /// (the configuration file beside one-team settings, one team without its key) is an error whose
    /// description is the one line to print.
    public static func options(arguments: [String], environment: [String: String]) throws -> StandaloneEmulator.Options {
        let flags = try SettingFlags.parse(arguments, table: all)
        return try options(from: SettingSources(environment: environment, flags: flags.values, lists: flags.lists, table: all))
    }

    static func options(from sources: SettingSources) throws -> StandaloneEmulator.Options {
        let options = StandaloneEmulator.Options(
            host: try sources.defaulted(host), port: try sources.defaulted(port), configFile: try sources.value(configFile),
            stateFile: try sources.value(stateFile), adminToken: try sources.value(adminToken),
            allowInsecureRedirectURIs: try sources.defaulted(allowInsecureRedirectURIs),
            clientIDs: try sources.list(clientIDs), nativeClientIDs: try sources.list(nativeClientIDs),
            teamID: try sources.value(teamID), keyID: try sources.value(keyID), redirectURIs: try sources.list(redirectURIs),
            publicKeyPath: try sources.value(publicKeyPath), notificationURL: try sources.value(notificationURL),
            logLevel: try sources.defaulted(logLevel), resourcesDirectory: try sources.value(resourcesDirectory))
        if options.configFile != nil {
            let oneTeam = options.teamID != nil || options.keyID != nil || options.publicKeyPath != nil
                || !options.clientIDs.isEmpty || !options.nativeClientIDs.isEmpty || !options.redirectURIs.isEmpty
                || options.notificationURL != nil
            if oneTeam {
                throw SiteFailure("\(configFile.flagName) replaces the one-team flags (\(teamID.flagName), \(clientIDs.flagName), …): give one or the other")
            }
            return options
        }
        if options.teamID == nil || options.keyID == nil || options.publicKeyPath == nil {
            throw SiteFailure("\(requiredKeyFlags) are required (or \(configFile.flagName) emulator.json)")
        }
        if options.clientIDs.isEmpty && options.nativeClientIDs.isEmpty {
            throw SiteFailure("\(clientIDs.flagName) or \(nativeClientIDs.flagName) is required")
        }
        if !options.clientIDs.isEmpty && options.redirectURIs.isEmpty {
            throw SiteFailure("\(redirectURIs.flagName) is required with \(clientIDs.flagName)")
        }
        return options
    }

    /// "--team-id, --key-id and --public-key": the three a team cannot go without.
    static var requiredKeyFlags: String { "\(teamID.flagName), \(keyID.flagName) and \(publicKeyPath.flagName)" }

    /// Why an emulator listening on `host` with this admin token must not start, or nil: the token is too
    /// short, or there is none and the host is not loopback (whoever reaches the admin API can approve a
    /// sign-in as any test person). The rule of `EmulatorConfiguration.adminTokenProblem`, worded with
    /// the table's names.
    static func adminTokenProblem(host listenHost: String, token: String?) -> String? {
        if let token, token.count < 16 { return "\(adminToken.flagName): use at least 16 characters (e.g. openssl rand -hex 32)" }
        guard token == nil, !EmulatorConfiguration.isLoopback(listenHost) else { return nil }
        return "\(host.flagName) \(listenHost) is not a loopback address: the admin API needs \(adminToken.flagName) (or \(adminToken.name))"
    }

    /// The rows have no `siwa doctor` summary: the emulator has no doctor.
    private static let none: @Sendable (SIWAConfiguration) -> String? = { _ in nil }
}

extension Parse {
    /// One element of a list setting, as given.
    static func element(_ raw: String) -> [String] { [raw] }
}
