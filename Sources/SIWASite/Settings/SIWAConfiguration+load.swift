import Foundation
import JOSE
import SIWAStore
import SIWAWeb

extension SIWAConfiguration {
    /// Reads and validates the configuration from `values` (a test's settings, or the environment).
    public static func load(from values: [String: String]) throws -> SIWAConfiguration {
        try load(SettingSources(environment: values))
    }

    /// Reads and validates every setting of the table from `sources`; the first bad one fails with one
    /// line naming it. In demo mode, generates (or reuses) the .p8 key, the token encryption key and the
    /// OpenID signing key in `DATA_DIR`.
    public static func load(_ sources: SettingSources) throws -> SIWAConfiguration {
        typealias S = SiteSettings
        let dataDirectory = try sources.defaulted(S.dataDirectory)
        let host = try sources.defaulted(S.host)
        let port = try sources.defaulted(S.port)
        let emulatorPort = try sources.value(S.emulatorPort) ?? (port == 65535 ? 65534 : port + 1)
        let publicURL = try sources.value(S.publicURL) ?? "http://localhost:\(port)"

        // Demo mode: none of the credentials. Some of them is an operator's mistake, named below.
        let credentials = [S.teamID, S.clientID, S.keyID]
        let hasKey = sources.isSet(S.privateKeyPath) || sources.isSet(S.privateKey)
        let isDemo = !credentials.contains(where: sources.isSet) && !hasKey
        let forceDemo = try sources.defaulted(S.demo)
        if isDemo && !forceDemo && !isLoopback(host) {
            // A lost secrets mount must not silently start a demo site on a public address (SPEC §9).
            throw ConfigurationError(SiteSettings.teamID.name, "is missing, and demo mode only starts on a loopback HOST (HOST is \(host)): set APPLE_TEAM_ID, APPLE_CLIENT_ID, APPLE_KEY_ID and APPLE_PRIVATE_KEY_PATH, or pass --demo (SIWA_DEMO=1) to run the demo anyway")
        }
        if !isDemo {
            let missing = credentials.filter { !sources.isSet($0) }.map(\.row.name) + (hasKey ? [] : [S.privateKeyPath.name])
            if let first = missing.first {
                throw ConfigurationError(first, "is missing (set all of APPLE_TEAM_ID, APPLE_CLIENT_ID, APPLE_KEY_ID and APPLE_PRIVATE_KEY_PATH or APPLE_PRIVATE_KEY, or none of them for demo mode)")
            }
        }

        let teamID, clientID, keyID, appleBaseURL: String
        let privateKey: P256PrivateKey
        let tokenKey: AESGCMKey
        var nativeClientIDs = try sources.value(S.nativeClientIDs) ?? []
        if isDemo {
            teamID = Demo.teamID
            clientID = Demo.clientID
            keyID = Demo.keyID
            let files = DemoFiles(directory: dataDirectory)
            privateKey = try files.appleKey()
            tokenKey = try sources.value(S.tokenEncryptionKey) ?? files.tokenEncryptionKey()
            if nativeClientIDs.isEmpty { nativeClientIDs = [Demo.nativeClientID] }
            appleBaseURL = try sources.value(S.appleBaseURL) ?? "http://127.0.0.1:\(emulatorPort)"
        } else {
            teamID = try sources.value(S.teamID)!
            keyID = try sources.value(S.keyID)!
            clientID = try sources.value(S.clientID)!
            // The inline key wins over the path, as it always has.
            privateKey = try sources.value(S.privateKey) ?? sources.value(S.privateKeyPath)!
            guard let key = try sources.value(S.tokenEncryptionKey) else {
                throw ConfigurationError(SiteSettings.tokenEncryptionKey.name, "is missing (base64 of 32 random bytes, e.g. `openssl rand -base64 32`)")
            }
            tokenKey = key
            appleBaseURL = try sources.value(S.appleBaseURL) ?? "https://appleid.apple.com"
        }

        let redirectURI = try sources.value(S.redirectURI) ?? publicURL + "/auth/apple/callback"
        if !isDemo && !redirectURI.hasPrefix("https://") {
            throw ConfigurationError(SiteSettings.redirectURI.name, "must be https (Apple accepts only https redirect URIs), got \(redirectURI)")
        }
        let databaseURL: DatabaseURL
        do {
            databaseURL = try sources.value(S.databaseURL) ?? Parse.databaseURL("sqlite:\(dataDirectory)/siwa.sqlite")
        } catch let problem as SettingProblem {
            throw ConfigurationError(SiteSettings.dataDirectory.name, "does not make a SQLite path (\(dataDirectory)): DATABASE_URL \(problem.text)")
        }
        let siteName = try sources.value(S.siteName) ?? (isDemo ? "siwa demo" : URLComponents(string: publicURL)?.host ?? "siwa")
        let resources = SiteResources(root: try sources.value(S.resourcesDirectory) ?? ResourceLocator.defaultRoot())

        var configuration = SIWAConfiguration(
            isDemo: isDemo, teamID: teamID, clientID: clientID, keyID: keyID, privateKey: privateKey,
            redirectURI: redirectURI, appleBaseURL: appleBaseURL, nativeClientIDs: nativeClientIDs, publicURL: publicURL,
            databaseURL: databaseURL, host: host, port: port, tokenEncryptionKey: tokenKey, emulatorPort: emulatorPort,
            dataDirectory: dataDirectory, siteName: siteName, resources: resources)
        configuration.tokenEncryptionKeyPrevious = try sources.value(S.tokenEncryptionKeyPrevious)
        if configuration.tokenEncryptionKeyPrevious == tokenKey {
            configuration.warnings.append("TOKEN_ENCRYPTION_KEY_PREVIOUS is TOKEN_ENCRYPTION_KEY itself: nothing to move; unset it")
        }
        configuration.appleTimeout = try sources.defaulted(S.appleTimeout)
        configuration.revocationInterval = try sources.defaulted(S.revocationInterval)
        configuration.revocationLease = try outlastingAppleCalls(S.revocationLease, sources, appleTimeout: configuration.appleTimeout)
        configuration.consentCheckInterval = try sources.defaulted(S.consentCheckInterval)
        configuration.consentCheckPassInterval = try sources.defaulted(S.consentCheckPassInterval)
        configuration.consentCheckClaim = try outlastingAppleCalls(S.consentCheckClaim, sources, appleTimeout: configuration.appleTimeout)
        configuration.rateLimitPerMinute = try sources.defaulted(S.rateLimitPerMinute)
        configuration.profileFallback = try sources.defaulted(S.profileFallback)
        configuration.clientSecretLifetime = try sources.defaulted(S.clientSecretLifetime)
        configuration.logLevel = try sources.defaulted(S.logLevel)
        configuration.logFormat = try sources.defaulted(S.logFormat)
        configuration.eventLoopThreads = try sources.defaulted(S.eventLoopThreads)
        configuration.postgresMaxConnections = try sources.defaulted(S.postgresMaxConnections)
        configuration.gatewaySessionCache = try sources.defaulted(S.gatewaySessionCache)
        configuration.sessionLifetime = try sources.defaulted(S.sessionLifetime)
        configuration.sessionIdleTimeout = try sources.defaulted(S.sessionIdleTimeout)
        configuration.appAccessTokenLifetime = try sources.defaulted(S.appAccessTokenLifetime)
        configuration.appRefreshTokenLifetime = try sources.defaulted(S.appRefreshTokenLifetime)
        configuration.maximumPendingAuthorizations = try sources.defaulted(S.maximumPendingAuthorizations)
        configuration.maximumPendingAuthorizationsPerClient = try sources.defaulted(S.maximumPendingAuthorizationsPerClient)
        configuration.httpHeadTimeout = try sources.defaulted(S.httpHeadTimeout)
        configuration.httpBodyTimeout = try sources.defaulted(S.httpBodyTimeout)
        configuration.httpIdleTimeout = try sources.defaulted(S.httpIdleTimeout)
        configuration.httpServer = try sources.defaulted(S.httpServer)
        configuration.trustedProxies = try sources.defaulted(S.trustedProxies)
        if let domain = try sources.value(S.sessionCookieDomain) {
            let publicHost = URLComponents(string: publicURL)?.host?.lowercased() ?? ""
            guard !domain.isEmpty, domain.contains("."), publicHost == domain || publicHost.hasSuffix("." + domain) else {
                throw ConfigurationError(SiteSettings.sessionCookieDomain.name, "must be PUBLIC_URL's host (\(publicHost)) or a parent domain of it, got \(sources.raw(S.sessionCookieDomain.row)!.lowercased())")
            }
            configuration.sessionCookieDomain = domain
        }
        configuration.allowedRedirectHosts = try sources.defaulted(S.allowedRedirectHosts)
        if let metricsPort = try sources.value(S.metricsPort) {
            guard metricsPort != port else { throw ConfigurationError(SiteSettings.metricsPort.name, "must differ from PORT (\(port))") }
            configuration.metricsPort = metricsPort
        }
        configuration.metricsToken = try sources.value(S.metricsToken)
        if !isDemo && appleBaseURL != "https://appleid.apple.com" {
            configuration.warnings.append("APPLE_BASE_URL is \(appleBaseURL), not Apple's https://appleid.apple.com: sign-ins are checked against that server's keys (fine for staging with the emulator, never for production)")
        }
        configuration.oidc = try OIDCProviderConfiguration.load(sources, isDemo: isDemo, publicURL: publicURL, dataDirectory: dataDirectory)
        if configuration.oidc == nil && sources.isSet(S.oidcSigningKeyPath) {
            configuration.warnings.append("OIDC_SIGNING_KEY_PATH is set but OIDC_CLIENTS_FILE is not: the OpenID provider is off")
        }
        return configuration
    }

    /// A lease on background work (a revocation's, the consent check's claim), which its holder renews before
    /// each call to Apple: it has to outlast one call, `APPLE_TIMEOUT`, plus up to a second lost to the
    /// whole-second clock and a second for the database write that records the answer. Unset, it is the
    /// table's default or `APPLE_TIMEOUT` + 2 s when that is longer; set shorter, start-up fails.
    static func outlastingAppleCalls(_ setting: Setting<Duration>, _ sources: SettingSources, appleTimeout: Duration) throws -> Duration {
        let minimum = appleTimeout + .seconds(2)
        let wholeMinimum = Duration.seconds(minimum.components.seconds + (minimum.components.attoseconds == 0 ? 0 : 1))
        guard sources.isSet(setting), let lease = try sources.value(setting) else {
            return max(try sources.defaulted(setting), wholeMinimum)
        }
        guard lease >= minimum else {
            throw ConfigurationError(setting.row.name, "must be at least APPLE_TIMEOUT + 2 seconds (\(wholeMinimum.components.seconds)), so that a lease outlasts a call to Apple; got \(lease.components.seconds)")
        }
        return lease
    }

    /// A loopback listen address: only reachable from this machine.
    static func isLoopback(_ host: String) -> Bool {
        let lowered = host.lowercased()
        if lowered == "localhost" || lowered.hasSuffix(".localhost") { return true }
        guard let address = IPAddress(lowered) else { return false }
        return address.isIPv4 ? address.bytes[0] == 127 : address == IPAddress("::1")
    }

    /// The configuration as `siwa doctor` and the start-up log print it, one row per setting of the
    /// table (secrets only as "set"), after the mode.
    public var summary: [(String, String)] {
        [("mode", isDemo ? "demo (emulator stands in for Apple)" : "production")]
            + SiteSettings.all.compactMap { row in row.summary(self).map { (row.name, $0) } }
    }
}

extension OIDCProviderConfiguration {
    /// Reads `OIDC_CLIENTS_FILE` and `OIDC_SIGNING_KEY_PATH`. No clients file: no provider, except in demo
    /// mode, where the demo client is registered and the key is generated into `dataDirectory`.
    static func load(_ sources: SettingSources, isDemo: Bool, publicURL: String, dataDirectory: String) throws -> OIDCProviderConfiguration? {
        let clients: OIDCClientRegistry
        let source: String
        if let path = try sources.value(SiteSettings.oidcClientsFile) {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError(SiteSettings.oidcClientsFile.name, "cannot be read: \(path)")
            }
            clients = try OIDCClientRegistry.parse(data)
            source = path
        } else if isDemo {
            clients = OIDCClientRegistry(clients: [Demo.client])
            source = "demo client \(Demo.clientID)"
        } else {
            return nil
        }
        let keyPath: String
        if let path = try sources.value(SiteSettings.oidcSigningKeyPath) {
            keyPath = path
        } else if isDemo {
            keyPath = dataDirectory + "/oidc-signing-key.pem"
        } else {
            throw ConfigurationError(SiteSettings.oidcSigningKeyPath.name, "is missing: the OpenID provider (OIDC_CLIENTS_FILE is set) signs ID tokens with this RSA key (create one with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out oidc.pem`)")
        }
        let keys = try OIDCSigningKeys.load(path: keyPath, generate: isDemo)
        return OIDCProviderConfiguration(issuer: publicURL, clients: clients, signingKeys: keys, clientsSource: source, signingKeyPath: keyPath,
                                         refreshTokenLifetime: Int64(try sources.defaulted(SiteSettings.oidcRefreshTokenLifetime)))
    }
}
