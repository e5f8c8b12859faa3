import AppleIDEmulator
import Foundation
import Logging
import ServiceLifecycle
import SIWAWeb

/// `siwa emulator`: the Apple ID emulator on its own, for staging (APPLE_BASE_URL points at it).
public enum StandaloneEmulator {
    /// What `siwa emulator`'s settings ask for (``EmulatorSettings``, its flags over the environment): one
    /// emulator configuration file (`configFile`), or one team given by the one-team settings (`teamID`,
    /// `keyID`, `publicKeyPath`, the client ids, …).
    public struct Options: Sendable {
        public var host: String
        public var port: Int
        /// JSON file with teams, clients and test people.
        public var configFile: String?
        /// JSON file where people, consents and refresh tokens are kept across restarts.
        public var stateFile: String?
        /// Bearer token of the admin routes; nil: none (loopback only).
        public var adminToken: String?
        public var allowInsecureRedirectURIs: Bool
        public var clientIDs: [String]
        public var nativeClientIDs: [String]
        public var teamID: String?
        public var keyID: String?
        public var redirectURIs: [String]
        /// PEM file with the team's P-256 public key (or the .p8 itself).
        public var publicKeyPath: String?
        public var notificationURL: String?
        public var logLevel: Logger.Level
        /// The folder holding `templates/`; nil: where `ResourceLocator` finds it.
        public var resourcesDirectory: String?

        public init(host: String, port: Int, configFile: String?, stateFile: String?, adminToken: String?,
                    allowInsecureRedirectURIs: Bool, clientIDs: [String], nativeClientIDs: [String], teamID: String?,
                    keyID: String?, redirectURIs: [String], publicKeyPath: String?, notificationURL: String?,
                    logLevel: Logger.Level, resourcesDirectory: String? = nil) {
            self.host = host
            self.port = port
            self.configFile = configFile
            self.stateFile = stateFile
            self.adminToken = adminToken
            self.allowInsecureRedirectURIs = allowInsecureRedirectURIs
            self.clientIDs = clientIDs
            self.nativeClientIDs = nativeClientIDs
            self.teamID = teamID
            self.keyID = keyID
            self.redirectURIs = redirectURIs
            self.publicKeyPath = publicKeyPath
            self.notificationURL = notificationURL
            self.logLevel = logLevel
            self.resourcesDirectory = resourcesDirectory
        }
    }

    /// Serves the emulator until SIGTERM or SIGINT, then saves its state. A configuration it refuses (a
    /// non-loopback host without an admin token, an unreadable key, a bad configuration file) is a
    /// ``SiteFailure``.
    public static func run(_ options: Options) async throws {
        let token = options.adminToken
        if let problem = EmulatorSettings.adminTokenProblem(host: options.host, token: token) {
            throw SiteFailure(problem)
        }
        let templates = SiteResources(root: options.resourcesDirectory ?? ResourceLocator.defaultRoot()).emulatorTemplatesDirectory
        var configuration: EmulatorConfiguration
        do throws(EmulatorConfigurationError) {
            if let configFile = options.configFile {
                configuration = try EmulatorConfigurationFile.load(
                    path: configFile, templatesDirectory: templates, allowInsecureRedirectURIs: options.allowInsecureRedirectURIs)
            } else {
                configuration = try oneTeamConfiguration(options, templatesDirectory: templates)
            }
            configuration.adminToken = token
            configuration.stateFile = options.stateFile
            try configuration.validate()
        } catch {
            throw SiteFailure(error.description)
        }
        var logger = Logger(label: "siwa")
        logger.logLevel = options.logLevel
        let state: AppleIDEmulatorState
        do { state = try AppleIDEmulatorState(configuration: configuration) } catch let error as EmulatorConfigurationError {
            throw SiteFailure(error.description)
        }
        let app = try await buildEmulatorApplication(configuration: configuration, state: state, host: options.host,
                                                     port: options.port, logger: logger)
        announceListening(options, configuration: configuration)
        try await ServiceGroup(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger).run()
        await state.shutdown()
        logger.info("Apple ID emulator stopped")
    }

    /// What it prints once it listens: a few lines on standard output in the `text` format; one `info`
    /// line with the same facts as fields with `LOG_FORMAT=json` (``ProcessLog``).
    private static func announceListening(_ options: Options, configuration: EmulatorConfiguration) {
        let listening = "Apple ID emulator listening on http://\(options.host):\(options.port)"
        let teams = Set(configuration.clients.map(\.teamID))
        let clients = "\(configuration.clients.count) client(s) of \(teams.count) team(s): "
            + configuration.clients.map(\.clientID).joined(separator: ", ")
        var lines = [listening + " (event log: /emulator)", "  " + clients]
        var metadata: Logger.Metadata = [
            "host": "\(options.host)", "port": "\(options.port)", "event_log": "/emulator",
            "clients": .array(configuration.clients.map { .string($0.clientID) }), "teams": "\(teams.count)",
            "admin_token_required": "\(options.adminToken != nil)",
        ]
        if let stateFile = options.stateFile {
            lines.append("  state file: \(stateFile)")
            metadata["state_file"] = "\(stateFile)"
        }
        if options.adminToken != nil { lines.append("  admin API: Bearer token required") }
        ProcessLog.announce(lines.joined(separator: "\n"), message: listening, metadata: metadata)
    }

    /// The one team of the one-team options, with a Services ID per `clientIDs` and an app per `nativeClientIDs`.
    private static func oneTeamConfiguration(_ options: Options, templatesDirectory: String) throws(EmulatorConfigurationError)
        -> EmulatorConfiguration {
        guard let teamID = options.teamID, let keyID = options.keyID, let publicKeyPath = options.publicKeyPath else {
            throw EmulatorConfigurationError("\(EmulatorSettings.requiredKeyFlags) are required")
        }
        let flag = EmulatorSettings.publicKeyPath.flagName
        guard let pem = try? String(contentsOfFile: publicKeyPath, encoding: .utf8) else {
            throw EmulatorConfigurationError("\(flag): cannot read \(publicKeyPath)")
        }
        guard let key = EmulatorConfigurationFile.publicKey(pem: pem) else {
            throw EmulatorConfigurationError("\(flag): \(publicKeyPath) holds neither a P-256 public key nor a .p8 private key")
        }
        var clients = options.clientIDs.map {
            EmulatorClient(clientID: $0, teamID: teamID, keyID: keyID, publicKey: key, redirectURIs: options.redirectURIs,
                           notificationURL: options.notificationURL)
        }
        clients += options.nativeClientIDs.map {
            EmulatorClient(clientID: $0, teamID: teamID, keyID: keyID, publicKey: key, redirectURIs: [],
                           notificationURL: options.notificationURL)
        }
        return EmulatorConfiguration(
            clients: clients, templatesDirectory: templatesDirectory, allowInsecureRedirectURIs: options.allowInsecureRedirectURIs)
    }
}
