import ArgumentParser
import SIWASite

/// `siwa emulator`: its options; SIWASite runs the emulator (``StandaloneEmulator``).
struct EmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emulator",
        abstract: "Runs the Apple ID emulator alone, e.g. for a staging deployment (APPLE_BASE_URL points at it).",
        discussion: """
            One team: --team-id, --key-id, --public-key, --client-id/--native-client-id and --redirect-uri.

            Several teams, Services IDs, app bundle ids and test people: --config emulator.json (deploy/emulator.json is an example).

            --state-file keeps people, consents and refresh tokens across restarts. Beyond loopback, the admin API needs --admin-token.
            """
    )

    @Option(help: "Address to listen on") var host = "127.0.0.1"
    @Option(help: "Port to listen on") var port = 8081
    @Option(help: "JSON file with teams, clients and test people (instead of the one-team flags)") var config: String?
    @Option(help: "JSON file where people, consents and refresh tokens are kept across restarts") var stateFile: String?
    @Option(help: ArgumentHelp(
        "Bearer token every admin route requires; required when --host is not loopback (or EMULATOR_ADMIN_TOKEN)",
        valueName: "token")) var adminToken: String?
    @Flag(help: "Accept http, IP-address and localhost redirect URIs, which Apple refuses (loopback test setups only)")
    var allowInsecureRedirectUris = false
    @Option(help: "The Services ID (repeatable)") var clientId: [String] = []
    @Option(help: "App bundle ids accepted for native sign-in (repeatable)") var nativeClientId: [String] = []
    @Option(help: "The operator's team id") var teamId: String?
    @Option(help: "The .p8 key's id") var keyId: String?
    @Option(help: "Registered redirect URI (repeatable)") var redirectUri: [String] = []
    @Option(help: "PEM file with the operator's P-256 public key (or the .p8 itself)") var publicKey: String?
    @Option(help: "Where to send server-to-server notifications") var notificationUrl: String?
    @Option(help: "Log level") var logLevel: String?

    func validate() throws {
        let oneTeamFlags = teamId != nil || keyId != nil || publicKey != nil || !clientId.isEmpty || !nativeClientId.isEmpty
            || !redirectUri.isEmpty || notificationUrl != nil
        if config != nil {
            if oneTeamFlags { throw ValidationError("--config replaces the one-team flags (--team-id, --client-id, …): give one or the other") }
            return
        }
        if teamId == nil || keyId == nil || publicKey == nil {
            throw ValidationError("--team-id, --key-id and --public-key are required (or --config emulator.json)")
        }
        if clientId.isEmpty && nativeClientId.isEmpty { throw ValidationError("--client-id or --native-client-id is required") }
        if !clientId.isEmpty && redirectUri.isEmpty { throw ValidationError("--redirect-uri is required with --client-id") }
    }

    func run() async throws {
        try await StandaloneEmulator.run(StandaloneEmulator.Options(
            host: host, port: port, configFile: config, stateFile: stateFile, adminToken: adminToken,
            allowInsecureRedirectURIs: allowInsecureRedirectUris, clientIDs: clientId, nativeClientIDs: nativeClientId,
            teamID: teamId, keyID: keyId, redirectURIs: redirectUri, publicKeyPath: publicKey,
            notificationURL: notificationUrl, logLevel: logLevel))
    }
}
