import Foundation
import JOSE
import SIWAStore

/// A setting that is missing or malformed. Start-up prints `description` as one line naming it.
public struct ConfigurationError: Error, Equatable, CustomStringConvertible {
    public let setting: String
    public let problem: String

    public init(_ setting: String, _ problem: String) {
        self.setting = setting
        self.problem = problem
    }

    public var description: String { "configuration error: \(setting) \(problem)" }
}

/// What to do when a new account has no name anywhere (SPEC §4.7).
public enum ProfileFallback: String, Sendable, CaseIterable {
    /// The recovery page: stop using Sign in with Apple for this site, then sign in again.
    case recovery
    /// A form asking for the name.
    case ask
}

/// The whole service configuration, read once at start-up (SPEC §2). Every setting is read here and
/// nowhere else; each bad value fails with one line naming it.
public struct SIWAConfiguration: Sendable {
    /// Demo mode: no Apple credentials configured, so the emulator stands in for Apple.
    public var isDemo: Bool
    public var teamID: String
    public var clientID: String
    public var keyID: String
    public var privateKey: P256PrivateKey
    public var redirectURI: String
    public var appleBaseURL: String
    public var nativeClientIDs: [String]
    public var publicURL: String
    public var databaseURL: DatabaseURL
    public var host: String
    public var port: Int
    public var tokenEncryptionKey: AESGCMKey
    /// Seconds before any call to Apple gives up.
    public var appleTimeout: Double
    public var emulatorPort: Int
    /// Requests per client IP per minute on the sign-in endpoints; 0 turns the limit off.
    public var rateLimitPerMinute: Int
    public var profileFallback: ProfileFallback
    /// Lifetime of the signed client secret (at most 15,777,000 s, Apple's limit).
    public var clientSecretLifetime: Int
    /// Where demo mode keeps its generated keys and the default SQLite file.
    public var dataDirectory: String
    /// The site's name on its pages (SITE_NAME; defaults to PUBLIC_URL's host).
    public var siteName: String
    /// Most sign-ins in progress (unexpired, unused pending authorizations) at once; past it `/auth/apple`
    /// answers 503. The per-IP rate limit cannot bound this table against many addresses; this can.
    public var maximumPendingAuthorizations: Int = 20_000
    /// Sign-ins one client address (IPv6: its /64) may start in ten minutes — the life of a pending
    /// authorization — so one client cannot use up `maximumPendingAuthorizations` for everyone (SPEC §9);
    /// 0 turns it off (a load test from one address).
    public var maximumPendingAuthorizationsPerClient: Int = 300
    /// Peers whose `X-Forwarded-*` headers are believed (SPEC §9).
    public var trustedProxies: TrustedProxies = .loopback
    /// `SESSION_COOKIE_DOMAIN`: the session cookie's `Domain`, so apps on subdomains share it.
    public var sessionCookieDomain: String?
    /// `ALLOWED_REDIRECT_HOSTS`: hosts besides `PUBLIC_URL`'s that the gateway's `rd` may name (SPEC §10).
    public var allowedRedirectHosts: AllowedRedirectHosts = .none
    /// `METRICS_PORT`: `/metrics` on its own listener (same host) instead of the public one.
    public var metricsPort: Int?
    /// `METRICS_TOKEN`: a bearer token `/metrics` requires on the public listener.
    public var metricsToken: String?
    /// The OpenID Provider (SPEC §11): `OIDC_CLIENTS_FILE` and `OIDC_SIGNING_KEY_PATH`; nil when no client
    /// is registered (demo mode registers its demo client).
    public var oidc: OIDCProviderConfiguration?
    /// What start-up and `siwa doctor` print as warnings (e.g. an `APPLE_BASE_URL` that is not Apple's).
    public var warnings: [String] = []

    /// What the gateway's `rd` may name: `PUBLIC_URL`'s host and `ALLOWED_REDIRECT_HOSTS`.
    public var returnTargetPolicy: ReturnTarget.Policy {
        ReturnTarget.Policy(publicHost: URLComponents(string: publicURL)?.host ?? "", allowedHosts: allowedRedirectHosts)
    }

    /// Whether cookies get `Secure` and responses get HSTS.
    public var isHTTPS: Bool { publicURL.hasPrefix("https://") }

    /// The emulator's origin in demo mode: a *different site* from `localhost`, so the callback is a
    /// real cross-site POST exactly as with Apple.
    public var demoEmulatorURL: String { "http://127.0.0.1:\(emulatorPort)" }

    /// Demo-mode identifiers: clearly not Apple's, so nobody mistakes them for real credentials.
    public enum Demo {
        public static let teamID = "DEMOTEAM01"
        public static let keyID = "DEMOKEY001"
        public static let clientID = "dev.siwa.demo.web"
        public static let nativeClientID = "dev.siwa.demo.ios"
    }

    /// Every setting's name, as an environment variable (and, lower-cased with dashes, a `serve` flag).
    /// README's configuration table lists exactly these (`ConfigurationTests.readmeTable`).
    public static let settingNames = [
        "APPLE_TEAM_ID", "APPLE_CLIENT_ID", "APPLE_KEY_ID", "APPLE_PRIVATE_KEY_PATH", "APPLE_PRIVATE_KEY",
        "APPLE_REDIRECT_URI", "APPLE_BASE_URL", "APPLE_NATIVE_CLIENT_IDS", "PUBLIC_URL", "DATABASE_URL",
        "HOST", "PORT", "TOKEN_ENCRYPTION_KEY", "APPLE_TIMEOUT", "EMULATOR_PORT", "RATE_LIMIT_PER_MINUTE",
        "PROFILE_FALLBACK", "APPLE_CLIENT_SECRET_LIFETIME", "DATA_DIR", "SITE_NAME", "MAX_PENDING_AUTHORIZATIONS",
        "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT", "TRUSTED_PROXIES", "SESSION_COOKIE_DOMAIN", "METRICS_PORT", "METRICS_TOKEN",
        "ALLOWED_REDIRECT_HOSTS", "SIWA_DEMO", "LOG_LEVEL", "OIDC_CLIENTS_FILE", "OIDC_SIGNING_KEY_PATH",
    ]

    /// Reads and validates the configuration from `values` (environment merged with flags).
    /// In demo mode, generates (or reuses) the .p8 key and the token encryption key in `DATA_DIR`.
    public static func load(from values: [String: String]) throws -> SIWAConfiguration {
        let reader = SettingReader(values)
        let dataDirectory = reader.string("DATA_DIR") ?? "data"

        let host = reader.string("HOST") ?? "127.0.0.1"
        let port = try reader.port("PORT", default: 8080)
        let emulatorPort = try reader.port("EMULATOR_PORT", default: port == 65535 ? 65534 : port + 1)
        let publicURL = try reader.url("PUBLIC_URL", default: "http://localhost:\(port)")

        let credentialNames = ["APPLE_TEAM_ID", "APPLE_CLIENT_ID", "APPLE_KEY_ID"]
        let hasKey = reader.string("APPLE_PRIVATE_KEY_PATH") != nil || reader.string("APPLE_PRIVATE_KEY") != nil
        let present = credentialNames.filter { reader.string($0) != nil }
        let forceDemo = try reader.flag("SIWA_DEMO")
        let isDemo = present.isEmpty && !hasKey
        if isDemo && !forceDemo && !Self.isLoopback(host) {
            // A lost secrets mount must not silently start a demo site on a public address (SPEC §9).
            throw ConfigurationError("APPLE_TEAM_ID", "is missing, and demo mode only starts on a loopback HOST (HOST is \(host)): set APPLE_TEAM_ID, APPLE_CLIENT_ID, APPLE_KEY_ID and APPLE_PRIVATE_KEY_PATH, or pass --demo (SIWA_DEMO=1) to run the demo anyway")
        }
        if !isDemo {
            let missing = credentialNames.filter { reader.string($0) == nil } + (hasKey ? [] : ["APPLE_PRIVATE_KEY_PATH"])
            if let first = missing.first {
                throw ConfigurationError(first, "is missing (set all of APPLE_TEAM_ID, APPLE_CLIENT_ID, APPLE_KEY_ID and APPLE_PRIVATE_KEY_PATH or APPLE_PRIVATE_KEY, or none of them for demo mode)")
            }
        }

        let teamID: String
        let clientID: String
        let keyID: String
        let privateKey: P256PrivateKey
        let tokenKey: AESGCMKey
        var nativeClientIDs = reader.list("APPLE_NATIVE_CLIENT_IDS")
        let appleBaseURL: String
        if isDemo {
            teamID = Demo.teamID
            clientID = Demo.clientID
            keyID = Demo.keyID
            let files = DemoFiles(directory: dataDirectory)
            privateKey = try files.appleKey()
            if let encoded = reader.string("TOKEN_ENCRYPTION_KEY") {
                tokenKey = try Self.tokenKey(encoded)
            } else {
                tokenKey = try files.tokenEncryptionKey()
            }
            if nativeClientIDs.isEmpty { nativeClientIDs = [Demo.nativeClientID] }
            appleBaseURL = try reader.url("APPLE_BASE_URL", default: "http://127.0.0.1:\(emulatorPort)")
        } else {
            teamID = reader.string("APPLE_TEAM_ID")!
            guard teamID.count == 10, teamID.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) else {
                throw ConfigurationError("APPLE_TEAM_ID", "must be Apple's 10-character team id (A–Z, 0–9), got \(teamID.count) characters")
            }
            keyID = reader.string("APPLE_KEY_ID")!
            guard keyID.count == 10, keyID.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                throw ConfigurationError("APPLE_KEY_ID", "must be the 10-character id of the .p8 key, got \(keyID.count) characters")
            }
            clientID = reader.string("APPLE_CLIENT_ID")!
            guard !clientID.contains(where: { $0.isWhitespace || $0 == "," }) else {
                throw ConfigurationError("APPLE_CLIENT_ID", "must be a single Services ID such as com.example.web")
            }
            privateKey = try Self.privateKey(reader)
            guard let encoded = reader.string("TOKEN_ENCRYPTION_KEY") else {
                throw ConfigurationError("TOKEN_ENCRYPTION_KEY", "is missing (base64 of 32 random bytes, e.g. `openssl rand -base64 32`)")
            }
            tokenKey = try Self.tokenKey(encoded)
            appleBaseURL = try reader.url("APPLE_BASE_URL", default: "https://appleid.apple.com")
        }

        let redirectURI = try reader.url("APPLE_REDIRECT_URI", default: publicURL + "/auth/apple/callback")
        if !isDemo && !redirectURI.hasPrefix("https://") {
            throw ConfigurationError("APPLE_REDIRECT_URI", "must be https (Apple accepts only https redirect URIs), got \(redirectURI)")
        }
        for nativeID in nativeClientIDs where nativeID.contains(where: \.isWhitespace) || nativeID.isEmpty {
            throw ConfigurationError("APPLE_NATIVE_CLIENT_IDS", "must be comma-separated bundle ids, got \"\(nativeID)\"")
        }

        let databaseString = reader.string("DATABASE_URL") ?? "sqlite:\(dataDirectory)/siwa.sqlite"
        let databaseURL: DatabaseURL
        do {
            databaseURL = try DatabaseURL(databaseString)
        } catch {
            throw ConfigurationError("DATABASE_URL", "must be sqlite:PATH or postgres://user:pass@host:port/db")
        }

        let timeout = try reader.number("APPLE_TIMEOUT", default: 10)
        guard timeout > 0, timeout <= 300 else {
            throw ConfigurationError("APPLE_TIMEOUT", "must be a number of seconds between 0 and 300")
        }
        let rateLimit = try reader.integer("RATE_LIMIT_PER_MINUTE", default: 60)
        guard rateLimit >= 0 else { throw ConfigurationError("RATE_LIMIT_PER_MINUTE", "must be 0 (off) or a positive number") }
        let fallbackValue = reader.string("PROFILE_FALLBACK") ?? "recovery"
        guard let fallback = ProfileFallback(rawValue: fallbackValue) else {
            throw ConfigurationError("PROFILE_FALLBACK", "must be `recovery` or `ask`, got \(fallbackValue)")
        }
        let lifetime = try reader.integer("APPLE_CLIENT_SECRET_LIFETIME", default: 86_400 * 30)
        guard lifetime > 3600, lifetime <= 15_777_000 else {
            throw ConfigurationError("APPLE_CLIENT_SECRET_LIFETIME", "must be between 3601 and 15777000 seconds (Apple's maximum)")
        }

        let maximumPending = try reader.integer("MAX_PENDING_AUTHORIZATIONS", default: 20_000)
        guard maximumPending > 0 else {
            throw ConfigurationError("MAX_PENDING_AUTHORIZATIONS", "must be a positive number of sign-ins in progress")
        }

        let perClient = try reader.integer("MAX_PENDING_AUTHORIZATIONS_PER_CLIENT", default: 300)
        guard perClient >= 0 else {
            throw ConfigurationError("MAX_PENDING_AUTHORIZATIONS_PER_CLIENT", "must be 0 (off) or a positive number of sign-ins per client address")
        }
        let trustedProxies: TrustedProxies
        switch TrustedProxies.parse(reader.string("TRUSTED_PROXIES") ?? "127.0.0.0/8,::1") {
        case .success(let parsed): trustedProxies = parsed
        case .failure(let error):
            throw ConfigurationError("TRUSTED_PROXIES", "must be comma-separated IP addresses or CIDR ranges, got \"\(error.entry)\"")
        }
        let publicHost = URLComponents(string: publicURL)?.host?.lowercased() ?? ""
        var cookieDomain = reader.string("SESSION_COOKIE_DOMAIN")?.lowercased()
        if let domain = cookieDomain {
            // A leading dot is legacy syntax with the same meaning (RFC 6265 §5.2.3).
            let bare = domain.hasPrefix(".") ? String(domain.dropFirst()) : domain
            guard !bare.isEmpty, bare.contains("."), publicHost == bare || publicHost.hasSuffix("." + bare) else {
                throw ConfigurationError("SESSION_COOKIE_DOMAIN", "must be PUBLIC_URL's host (\(publicHost)) or a parent domain of it, got \(domain)")
            }
            cookieDomain = bare
        }
        let allowedRedirectHosts: AllowedRedirectHosts
        switch AllowedRedirectHosts.parse(reader.string("ALLOWED_REDIRECT_HOSTS") ?? "") {
        case .success(let parsed): allowedRedirectHosts = parsed
        case .failure(let error):
            throw ConfigurationError("ALLOWED_REDIRECT_HOSTS", "must be comma-separated host names (app.example.com, or .example.com for a domain and its subdomains; punycode for non-ASCII names), got \"\(error.entry)\"")
        }
        var metricsPort: Int?
        if reader.string("METRICS_PORT") != nil {
            let value = try reader.port("METRICS_PORT", default: 0)
            guard value != port else { throw ConfigurationError("METRICS_PORT", "must differ from PORT (\(port))") }
            metricsPort = value
        }
        let metricsToken = reader.string("METRICS_TOKEN")
        if let token = metricsToken, token.utf8.count < 16 || token.contains(where: { $0.isWhitespace }) {
            throw ConfigurationError("METRICS_TOKEN", "must be at least 16 characters without spaces (e.g. `openssl rand -hex 16`)")
        }
        var warnings: [String] = []
        if !isDemo && appleBaseURL != "https://appleid.apple.com" {
            warnings.append("APPLE_BASE_URL is \(appleBaseURL), not Apple's https://appleid.apple.com: sign-ins are checked against that server's keys (fine for staging with the emulator, never for production)")
        }

        let oidc = try OIDCProviderConfiguration.load(reader, isDemo: isDemo, publicURL: publicURL, dataDirectory: dataDirectory)
        if oidc == nil && reader.string("OIDC_SIGNING_KEY_PATH") != nil {
            warnings.append("OIDC_SIGNING_KEY_PATH is set but OIDC_CLIENTS_FILE is not: the OpenID provider is off")
        }

        var configuration = SIWAConfiguration(
            isDemo: isDemo, teamID: teamID, clientID: clientID, keyID: keyID, privateKey: privateKey,
            redirectURI: redirectURI, appleBaseURL: appleBaseURL, nativeClientIDs: nativeClientIDs,
            publicURL: publicURL, databaseURL: databaseURL, host: host, port: port, tokenEncryptionKey: tokenKey,
            appleTimeout: timeout, emulatorPort: emulatorPort, rateLimitPerMinute: rateLimit,
            profileFallback: fallback, clientSecretLifetime: lifetime, dataDirectory: dataDirectory,
            siteName: reader.string("SITE_NAME") ?? (isDemo ? "siwa demo" : URLComponents(string: publicURL)?.host ?? "siwa"),
            maximumPendingAuthorizations: maximumPending, maximumPendingAuthorizationsPerClient: perClient,
            trustedProxies: trustedProxies, sessionCookieDomain: cookieDomain, allowedRedirectHosts: allowedRedirectHosts,
            metricsPort: metricsPort,
            metricsToken: metricsToken, warnings: warnings
        )
        configuration.oidc = oidc
        return configuration
    }

    /// A loopback listen address: only reachable from this machine.
    static func isLoopback(_ host: String) -> Bool {
        let lowered = host.lowercased()
        if lowered == "localhost" || lowered.hasSuffix(".localhost") { return true }
        guard let address = IPAddress(lowered) else { return false }
        return address.isIPv4 ? address.bytes[0] == 127 : address == IPAddress("::1")
    }

    private static func privateKey(_ reader: SettingReader) throws -> P256PrivateKey {
        if let inline = reader.string("APPLE_PRIVATE_KEY") {
            do {
                // Operators often paste the key with literal "\n" into one-line environment files.
                return try P256PrivateKey(pkcs8PEM: inline.replacingOccurrences(of: "\\n", with: "\n"))
            } catch {
                throw ConfigurationError("APPLE_PRIVATE_KEY", "is not a P-256 .p8 key (PKCS#8 PEM): \(error)")
            }
        }
        let path = reader.string("APPLE_PRIVATE_KEY_PATH")!
        guard let contents = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ConfigurationError("APPLE_PRIVATE_KEY_PATH", "cannot be read: \(path)")
        }
        do {
            return try P256PrivateKey(pkcs8PEM: contents)
        } catch {
            throw ConfigurationError("APPLE_PRIVATE_KEY_PATH", "is not a P-256 .p8 key (PKCS#8 PEM) at \(path): \(error)")
        }
    }

    private static func tokenKey(_ encoded: String) throws -> AESGCMKey {
        guard let bytes = try? Base64.decode(encoded), bytes.count == 32, let key = try? AESGCMKey(bytes: bytes) else {
            throw ConfigurationError("TOKEN_ENCRYPTION_KEY", "must be base64 of exactly 32 bytes (e.g. `openssl rand -base64 32`)")
        }
        return key
    }

    /// A printable summary for `siwa doctor` and the start-up log. Secrets are never included.
    public var summary: [(String, String)] {
        [
            ("mode", isDemo ? "demo (emulator stands in for Apple)" : "production"),
            ("APPLE_TEAM_ID", teamID),
            ("APPLE_CLIENT_ID", clientID),
            ("APPLE_KEY_ID", keyID),
            ("APPLE_PRIVATE_KEY", "P-256 key loaded (public x: \(Base64URL.encode(privateKey.publicKey.x).prefix(12))…)"),
            ("APPLE_REDIRECT_URI", redirectURI),
            ("APPLE_BASE_URL", appleBaseURL),
            ("APPLE_NATIVE_CLIENT_IDS", nativeClientIDs.isEmpty ? "(none)" : nativeClientIDs.joined(separator: ",")),
            ("PUBLIC_URL", publicURL),
            ("DATABASE_URL", databaseURL.redactedDescription),
            ("HOST:PORT", "\(host):\(port)"),
            ("TOKEN_ENCRYPTION_KEY", "set (32 bytes)"),
            ("APPLE_TIMEOUT", "\(appleTimeout) s"),
            ("RATE_LIMIT_PER_MINUTE", rateLimitPerMinute == 0 ? "off" : "\(rateLimitPerMinute)"),
            ("PROFILE_FALLBACK", profileFallback.rawValue),
            ("APPLE_CLIENT_SECRET_LIFETIME", "\(clientSecretLifetime) s"),
            ("MAX_PENDING_AUTHORIZATIONS", "\(maximumPendingAuthorizations)"),
            ("MAX_PENDING_AUTHORIZATIONS_PER_CLIENT", maximumPendingAuthorizationsPerClient == 0 ? "off" : "\(maximumPendingAuthorizationsPerClient)"),
            ("TRUSTED_PROXIES", trustedProxies.description),
            ("SESSION_COOKIE_DOMAIN", sessionCookieDomain ?? "(none: this host only)"),
            ("ALLOWED_REDIRECT_HOSTS", allowedRedirectHosts.description),
            ("METRICS_PORT", metricsPort.map(String.init) ?? "(none: /metrics on PORT)"),
            ("METRICS_TOKEN", metricsToken == nil ? "(none)" : "set"),
            ("OIDC_CLIENTS_FILE", oidc.map { "\($0.clients.clients.count) client(s) from \($0.clientsSource)" } ?? "(none: OpenID provider off)"),
            ("OIDC_SIGNING_KEY_PATH", oidc.map { "\($0.signingKeyPath) (kid \($0.signingKeys.current.kid)\($0.signingKeys.previous == nil ? "" : ", previous key published"))" } ?? "(none)"),
        ]
    }
}

extension DatabaseURL {
    /// The URL without its password, for logs.
    public var redactedDescription: String {
        switch kind {
        case .sqlite(let path): return "sqlite:\(path)"
        case .sqliteInMemory: return "sqlite::memory:"
        case .postgres(let host, let port, let username, _, let database):
            return "postgres://\(username):***@\(host):\(port)/\(database)"
        }
    }
}

/// Reads raw setting strings; empty strings count as unset.
struct SettingReader {
    let values: [String: String]
    init(_ values: [String: String]) { self.values = values }

    func string(_ name: String) -> String? {
        guard let value = values[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else { return nil }
        return value
    }

    func list(_ name: String) -> [String] {
        (string(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    func integer(_ name: String, default value: Int) throws -> Int {
        guard let raw = string(name) else { return value }
        guard let parsed = Int(raw) else { throw ConfigurationError(name, "must be a whole number, got \(raw)") }
        return parsed
    }

    /// `1`/`true`/`yes` or `0`/`false`/`no`; unset is false.
    func flag(_ name: String) throws -> Bool {
        guard let raw = string(name)?.lowercased() else { return false }
        switch raw {
        case "1", "true", "yes": return true
        case "0", "false", "no": return false
        default: throw ConfigurationError(name, "must be 1 or 0, got \(raw)")
        }
    }

    func number(_ name: String, default value: Double) throws -> Double {
        guard let raw = string(name) else { return value }
        guard let parsed = Double(raw), parsed.isFinite else { throw ConfigurationError(name, "must be a number, got \(raw)") }
        return parsed
    }

    func port(_ name: String, default value: Int) throws -> Int {
        let port = try integer(name, default: value)
        guard (1...65535).contains(port) else { throw ConfigurationError(name, "must be a port between 1 and 65535, got \(port)") }
        return port
    }

    /// An absolute http(s) URL without a trailing slash.
    func url(_ name: String, default value: String) throws -> String {
        var raw = string(name) ?? value
        while raw.hasSuffix("/") { raw.removeLast() }
        guard let components = URLComponents(string: raw), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            throw ConfigurationError(name, "must be an absolute http(s) URL, got \(raw)")
        }
        return raw
    }
}

/// Demo mode's generated secrets, kept in the data folder so restarts keep sessions and accounts.
struct DemoFiles {
    let directory: String

    func appleKey() throws -> P256PrivateKey {
        let path = directory + "/demo-apple-key.p8"
        if let pem = try? String(contentsOfFile: path, encoding: .utf8) {
            do { return try P256PrivateKey(pkcs8PEM: pem) } catch {
                throw ConfigurationError("DATA_DIR", "holds an unreadable demo key at \(path): delete it to generate a new one")
            }
        }
        let key = try P256PrivateKey.generate()
        try write(try key.pkcs8PEM(), to: path)
        return key
    }

    func tokenEncryptionKey() throws -> AESGCMKey {
        let path = directory + "/demo-token-encryption.key"
        if let encoded = try? String(contentsOfFile: path, encoding: .utf8) {
            guard let bytes = try? Base64.decode(encoded.trimmingCharacters(in: .whitespacesAndNewlines)),
                  let key = try? AESGCMKey(bytes: bytes)
            else {
                throw ConfigurationError("DATA_DIR", "holds an unreadable demo encryption key at \(path): delete it to generate a new one")
            }
            return key
        }
        let key = AESGCMKey.generate()
        try write(Base64.encode(key.bytes) + "\n", to: path)
        return key
    }

    private func write(_ contents: String, to path: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // Owner-only: these are secrets, even in demo mode.
            guard FileManager.default.createFile(atPath: path, contents: Data(contents.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteUnknown)
            }
        } catch {
            throw ConfigurationError("DATA_DIR", "is not writable (\(directory)): \(error.localizedDescription)")
        }
    }
}
