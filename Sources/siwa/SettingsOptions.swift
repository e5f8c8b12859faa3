import ArgumentParser
import Foundation

/// Every setting of SPEC §2 as a flag; a flag wins over the environment variable of the same name.
struct SettingsOptions: ParsableArguments {
    @Option(help: "APPLE_TEAM_ID: 10-character team id") var teamId: String?
    @Option(help: "APPLE_CLIENT_ID: the Services ID") var clientId: String?
    @Option(help: "APPLE_KEY_ID: the .p8 key's id") var keyId: String?
    @Option(help: "APPLE_PRIVATE_KEY_PATH: path of the .p8 file") var privateKeyPath: String?
    @Option(help: "APPLE_PRIVATE_KEY: the .p8 contents (prefer the path or the environment)") var privateKey: String?
    @Option(help: "APPLE_REDIRECT_URI (default PUBLIC_URL/auth/apple/callback)") var redirectUri: String?
    @Option(help: "APPLE_BASE_URL (default https://appleid.apple.com)") var appleBaseUrl: String?
    @Option(help: "APPLE_NATIVE_CLIENT_IDS: comma-separated bundle ids") var nativeClientIds: String?
    @Option(help: "PUBLIC_URL (default http://localhost:PORT)") var publicUrl: String?
    @Option(help: "DATABASE_URL: sqlite:PATH or postgres://user:pass@host:port/db") var databaseUrl: String?
    @Option(help: "HOST (default 127.0.0.1)") var host: String?
    @Option(help: "PORT (default 8080)") var port: String?
    @Option(help: "TOKEN_ENCRYPTION_KEY: base64 of 32 bytes") var tokenEncryptionKey: String?
    @Option(help: "APPLE_TIMEOUT in seconds (default 10)") var appleTimeout: String?
    @Option(help: "EMULATOR_PORT for demo mode (default PORT+1)") var emulatorPort: String?
    @Option(help: "RATE_LIMIT_PER_MINUTE (default 60, 0 = off)") var rateLimitPerMinute: String?
    @Option(help: "PROFILE_FALLBACK: recovery or ask") var profileFallback: String?
    @Option(help: "APPLE_CLIENT_SECRET_LIFETIME in seconds (default 30 days)") var clientSecretLifetime: String?
    @Option(help: "DATA_DIR for demo keys and the default SQLite file (default data)") var dataDir: String?
    @Option(help: "SITE_NAME shown on pages") var siteName: String?
    @Option(help: "MAX_PENDING_AUTHORIZATIONS: sign-ins in progress at once (default 20000)") var maxPendingAuthorizations: String?
    @Option(help: "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT: sign-ins one client address may start in 10 minutes (default 300, 0 = off)") var maxPendingAuthorizationsPerClient: String?
    @Option(help: "TRUSTED_PROXIES: addresses/CIDR ranges whose X-Forwarded-* headers are believed (default 127.0.0.0/8,::1)") var trustedProxies: String?
    @Option(help: "SESSION_COOKIE_DOMAIN: share the session cookie with subdomains (e.g. example.com)") var sessionCookieDomain: String?
    @Option(help: "ALLOWED_REDIRECT_HOSTS: hosts the gateway's rd may name besides PUBLIC_URL's (app.example.com, .example.com)") var allowedRedirectHosts: String?
    @Option(help: "METRICS_PORT: serve /metrics on its own port instead of PORT") var metricsPort: String?
    @Option(help: "METRICS_TOKEN: bearer token /metrics requires") var metricsToken: String?
    @Option(help: "OIDC_CLIENTS_FILE: JSON array of OpenID Connect clients (turns the provider on)") var oidcClientsFile: String?
    @Option(help: "OIDC_SIGNING_KEY_PATH: RSA private key (PEM) signing ID tokens; PATH.previous is published too") var oidcSigningKeyPath: String?
    @Flag(help: "SIWA_DEMO=1: demo mode even when HOST is not a loopback address") var demo = false

    /// The environment with the given flags laid over it.
    func merged(with environment: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var values = environment
        let flags: [(String, String?)] = [
            ("APPLE_TEAM_ID", teamId), ("APPLE_CLIENT_ID", clientId), ("APPLE_KEY_ID", keyId),
            ("APPLE_PRIVATE_KEY_PATH", privateKeyPath), ("APPLE_PRIVATE_KEY", privateKey), ("APPLE_REDIRECT_URI", redirectUri),
            ("APPLE_BASE_URL", appleBaseUrl), ("APPLE_NATIVE_CLIENT_IDS", nativeClientIds), ("PUBLIC_URL", publicUrl),
            ("DATABASE_URL", databaseUrl), ("HOST", host), ("PORT", port), ("TOKEN_ENCRYPTION_KEY", tokenEncryptionKey),
            ("APPLE_TIMEOUT", appleTimeout), ("EMULATOR_PORT", emulatorPort), ("RATE_LIMIT_PER_MINUTE", rateLimitPerMinute),
            ("PROFILE_FALLBACK", profileFallback), ("APPLE_CLIENT_SECRET_LIFETIME", clientSecretLifetime),
            ("DATA_DIR", dataDir), ("SITE_NAME", siteName), ("MAX_PENDING_AUTHORIZATIONS", maxPendingAuthorizations),
            ("MAX_PENDING_AUTHORIZATIONS_PER_CLIENT", maxPendingAuthorizationsPerClient), ("TRUSTED_PROXIES", trustedProxies),
            ("SESSION_COOKIE_DOMAIN", sessionCookieDomain), ("ALLOWED_REDIRECT_HOSTS", allowedRedirectHosts), ("METRICS_PORT", metricsPort), ("METRICS_TOKEN", metricsToken),
            ("SIWA_DEMO", demo ? "1" : nil), ("OIDC_CLIENTS_FILE", oidcClientsFile), ("OIDC_SIGNING_KEY_PATH", oidcSigningKeyPath),
        ]
        for (name, value) in flags { if let value { values[name] = value } }
        return values
    }
}

/// Prints a line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
