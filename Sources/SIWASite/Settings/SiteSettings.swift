import Foundation
import JOSE
import Logging
import SIWAStore
import SIWAWeb

/// The table of settings (SPEC §2): every setting siwa reads, once. Each entry is the environment
/// variable, the `siwa serve` flag, what it means, its default and its parser; `--help`, README's
/// configuration table (checked by `SettingsTableTests`) and `siwa doctor`'s summary are made from it.
/// Adding a setting means adding an entry here (and to `all`) plus the code that uses it.
public enum SiteSettings {
    // MARK: Apple credentials
    static let teamID = Setting<String>(
        "APPLE_TEAM_ID", flag: "team-id", meaning: "10-character team id (client secret `iss`)",
        defaultText: "— (demo mode when unset)", parse: Parse.teamID, summary: { $0.teamID })
    static let clientID = Setting<String>(
        "APPLE_CLIENT_ID", flag: "client-id", meaning: "the Services ID used as `client_id` on the web",
        defaultText: "—", parse: Parse.servicesID, summary: { $0.clientID })
    static let keyID = Setting<String>(
        "APPLE_KEY_ID", flag: "key-id", meaning: "the .p8 key's id (client secret header `kid`)",
        defaultText: "—", parse: Parse.keyID, summary: { $0.keyID })
    static let privateKeyPath = Setting<P256PrivateKey>(
        "APPLE_PRIVATE_KEY_PATH", flag: "private-key-path", meaning: "path of the .p8 file (PKCS#8 PEM, P-256)",
        defaultText: "—", parse: Parse.p8File, summary: { _ in nil })
    static let privateKey = Setting<P256PrivateKey>(
        "APPLE_PRIVATE_KEY", flag: "private-key", meaning: "the .p8 contents, instead of a path",
        defaultText: "—", secret: true, parse: Parse.inlineP8,
        summary: { "P-256 key loaded (public x: \(Base64URL.encode($0.privateKey.publicKey.x).prefix(12))…)" })
    static let redirectURI = Setting<String>(
        "APPLE_REDIRECT_URI", flag: "redirect-uri",
        meaning: "the callback URL registered with Apple (https outside demo mode)",
        defaultText: "`PUBLIC_URL/auth/apple/callback`", parse: Parse.url, summary: { $0.redirectURI })
    static let appleBaseURL = Setting<String>(
        "APPLE_BASE_URL", flag: "apple-base-url", meaning: "Apple's origin; the emulator's in staging",
        defaultText: "`https://appleid.apple.com`", parse: Parse.url, summary: { $0.appleBaseURL })
    static let nativeClientIDs = Setting<[String]>(
        "APPLE_NATIVE_CLIENT_IDS", flag: "native-client-ids",
        meaning: "comma-separated iOS bundle ids accepted by `/auth/apple/native`", defaultText: "none",
        parse: Parse.bundleIDs,
        summary: { $0.nativeClientIDs.isEmpty ? "(none)" : $0.nativeClientIDs.joined(separator: ",") })

    // MARK: The site
    static let publicURL = Setting<String>(
        "PUBLIC_URL", flag: "public-url", meaning: "the service's external origin",
        defaultText: "`http://localhost:PORT`", parse: Parse.url, summary: { $0.publicURL })
    static let databaseURL = Setting<DatabaseURL>(
        "DATABASE_URL", flag: "database-url", meaning: "`sqlite:PATH` or `postgres://user:pass@host:port/db`",
        defaultText: "`sqlite:data/siwa.sqlite`", parse: Parse.databaseURL,
        summary: { $0.databaseURL.redactedDescription })
    static let host = Setting<String>(
        "HOST", flag: "host", meaning: "listen address", default: "127.0.0.1", defaultText: "`127.0.0.1`",
        parse: Parse.text, summary: { $0.host })
    static let port = Setting<Int>(
        "PORT", flag: "port", meaning: "listen port", default: 8080, defaultText: "`8080`",
        parse: Parse.port, summary: { String($0.port) })
    static let tokenEncryptionKey = Setting<AESGCMKey>(
        "TOKEN_ENCRYPTION_KEY", flag: "token-encryption-key",
        meaning: "base64 of 32 bytes: AES-256-GCM key for Apple tokens at rest",
        defaultText: "generated into `data/` in demo mode; required otherwise", secret: true,
        parse: Parse.tokenKey, summary: { _ in "set (32 bytes)" })
    static let tokenEncryptionKeyPrevious = Setting<AESGCMKey>(
        "TOKEN_ENCRYPTION_KEY_PREVIOUS", flag: "token-encryption-key-previous",
        meaning: "a second key (base64 of 32 bytes) that is only read, never sealed with: the one `TOKEN_ENCRYPTION_KEY` replaced, until `siwa admin reseal` has moved what it sealed (\"Rotating keys\" below)",
        defaultText: "unset", secret: true,
        parse: Parse.tokenKey,
        summary: { $0.tokenEncryptionKeyPrevious == nil ? "(none)" : "set (32 bytes): read only, until `siwa admin reseal`" })
    static let appleTimeout = Setting<Duration>(
        "APPLE_TIMEOUT", flag: "apple-timeout", meaning: "seconds before any call to Apple gives up",
        default: .seconds(10), defaultText: "`10`",
        parse: Parse.seconds(in: 0...300, excludingLowerBound: true, "must be a number of seconds between 0 and 300"),
        summary: { "\(seconds($0.appleTimeout)) s" })
    static let emulatorPort = Setting<Int>(
        "EMULATOR_PORT", flag: "emulator-port", meaning: "where demo mode's emulator listens (host `127.0.0.1`)",
        defaultText: "`PORT`+1", parse: Parse.port, summary: { $0.isDemo ? String($0.emulatorPort) : nil })
    static let rateLimitPerMinute = Setting<Int>(
        "RATE_LIMIT_PER_MINUTE", flag: "rate-limit-per-minute",
        meaning: "requests per client address (IPv6: per /64) per minute on each sign-in route (`/auth/apple`, the callback, the native endpoints); `0` = off",
        default: 60, defaultText: "`60`",
        parse: Parse.wholeNumber(atLeast: 0, "must be 0 (off) or a positive number"),
        summary: { $0.rateLimitPerMinute == 0 ? "off" : String($0.rateLimitPerMinute) })
    static let profileFallback = Setting<ProfileFallback>(
        "PROFILE_FALLBACK", flag: "profile-fallback", meaning: "a new account without a name: `recovery` page or `ask` form",
        default: .recovery, defaultText: "`recovery`", parse: Parse.profileFallback, summary: { $0.profileFallback.rawValue })
    static let clientSecretLifetime = Setting<Duration>(
        "APPLE_CLIENT_SECRET_LIFETIME", flag: "client-secret-lifetime",
        meaning: "seconds a signed client secret lives (≤ 15,777,000)", default: .seconds(86_400 * 30),
        defaultText: "`2592000` (30 days)",
        parse: Parse.wholeSeconds(in: 3601...15_777_000, "must be between 3601 and 15777000 seconds (Apple's maximum)"),
        summary: { "\(seconds($0.clientSecretLifetime)) s" })
    static let dataDirectory = Setting<String>(
        "DATA_DIR", flag: "data-dir", meaning: "demo keys and the default SQLite file", default: "data",
        defaultText: "`data`", parse: Parse.text, summary: { $0.dataDirectory })
    static let siteName = Setting<String>(
        "SITE_NAME", flag: "site-name", meaning: "the site's name on its pages", defaultText: "`PUBLIC_URL`'s host",
        parse: Parse.text, summary: { $0.siteName })
    static let logLevel = Setting<Logger.Level>(
        "LOG_LEVEL", flag: "log-level", meaning: "`trace` … `error`", default: .info, defaultText: "`info`",
        parse: Parse.logLevel, summary: { $0.logLevel.rawValue })
    static let logFormat = Setting<LogFormat>(
        "LOG_FORMAT", flag: "log-format",
        meaning: "`text` (swift-log's lines) or `json` (one object per line: `time`, `level`, `message`, `request_id`, `user`, … for a log collector)",
        default: .text, defaultText: "`text`", parse: Parse.logFormat, summary: { $0.logFormat.rawValue })
    static let eventLoopThreads = Setting<Int>(
        "EVENT_LOOP_THREADS", flag: "event-loop-threads",
        meaning: "threads that read and write HTTP (NIO event loops; request handlers run on Swift's cooperative pool)",
        default: SIWAConfiguration.defaultEventLoopThreads, defaultText: "half the cores, at least 1",
        parse: Parse.wholeNumber(in: 1...256, "must be a number of threads from 1 to 256"),
        summary: { String($0.eventLoopThreads) })
    static let postgresMaxConnections = Setting<Int>(
        "POSTGRES_MAX_CONNECTIONS", flag: "postgres-max-connections",
        meaning: "connections this instance opens to PostgreSQL at most (requests beyond them wait); with several instances keep their sum under the server's `max_connections`",
        default: SIWADatabase.defaultPostgresPoolSize, defaultText: "4 per core, at least 16",
        parse: Parse.wholeNumber(in: 1...10_000, "must be a number of connections from 1 to 10000"),
        summary: { $0.databaseURL.isPostgres ? String($0.postgresMaxConnections) : nil })
    static let gatewaySessionCache = Setting<Int>(
        "GATEWAY_SESSION_CACHE", flag: "gateway-session-cache",
        meaning: "sessions `/oauth2/auth` keeps in memory, each for at most a second (a sign-out or deletion empties it at once, on PostgreSQL on every instance); `0` = off",
        default: SIWAConfiguration.defaultGatewaySessionCache, defaultText: "`10000`",
        parse: Parse.wholeNumber(in: 0...10_000_000, "must be a number of sessions from 0 to 10000000"),
        summary: { String($0.gatewaySessionCache) })
    // MARK: Sessions (SPEC §13)
    static let sessionLifetime = Setting<Int>(
        "SESSION_LIFETIME_SECONDS", flag: "session-lifetime",
        meaning: "a web session's absolute lifetime from sign-in, in seconds; use never extends it",
        default: SIWAConfiguration.defaultSessionLifetime, defaultText: "`2592000` (30 days)",
        parse: Parse.wholeNumber(in: 1...315_360_000, "must be a number of seconds from 1 to 315360000 (10 years)"),
        summary: { "\($0.sessionLifetime) s" })
    static let sessionIdleTimeout = Setting<Int>(
        "SESSION_IDLE_TIMEOUT_SECONDS", flag: "session-idle-timeout",
        meaning: "a web session unused this many seconds ends; use moves the deadline (and the cookie's expiry) forward at most once an hour, or once per tenth of this when shorter; `0` = none",
        default: SIWAConfiguration.defaultSessionIdleTimeout, defaultText: "`1209600` (14 days)",
        parse: Parse.wholeNumber(in: 0...315_360_000, "must be 0 (none) or a number of seconds up to 315360000 (10 years)"),
        summary: { $0.sessionIdleTimeout == 0 ? "none" : "\($0.sessionIdleTimeout) s" })
    static let appAccessTokenLifetime = Setting<Int>(
        "APP_ACCESS_TOKEN_LIFETIME_SECONDS", flag: "app-access-token-lifetime",
        meaning: "seconds an app's access token (`POST /auth/apple/native`, `…/refresh`) is accepted",
        default: SIWAConfiguration.defaultAppAccessTokenLifetime, defaultText: "`3600` (1 hour)",
        parse: Parse.wholeNumber(in: 1...2_592_000, "must be a number of seconds from 1 to 2592000 (30 days)"),
        summary: { "\($0.appAccessTokenLifetime) s" })
    static let appRefreshTokenLifetime = Setting<Int>(
        "APP_REFRESH_TOKEN_LIFETIME_SECONDS", flag: "app-refresh-token-lifetime",
        meaning: "an app session's absolute lifetime from sign-in, in seconds: its refresh tokens rotate but never outlive it",
        default: SIWAConfiguration.defaultAppRefreshTokenLifetime, defaultText: "`7776000` (90 days)",
        parse: Parse.wholeNumber(in: 1...315_360_000, "must be a number of seconds from 1 to 315360000 (10 years)"),
        summary: { "\($0.appRefreshTokenLifetime) s" })
    static let resourcesDirectory = Setting<String>(
        "SIWA_RESOURCES_DIR", flag: "resources-dir",
        meaning: "the folder holding `templates/` and `Public/` (an installed binary's; see systemd below)",
        defaultText: "the working directory, else `../share/siwa` beside the binary (the package's `/usr/share/siwa`), else the source checkout", parse: Parse.text,
        summary: { $0.resources.root })

    // MARK: Limits and the proxy in front (SPEC §9)
    static let maximumPendingAuthorizations = Setting<Int>(
        "MAX_PENDING_AUTHORIZATIONS", flag: "max-pending-authorizations",
        meaning: "sign-ins in progress at once (unused, unexpired `state`s and native nonces); past it `/auth/apple` answers a 503 page",
        default: 20_000, defaultText: "`20000`",
        parse: Parse.wholeNumber(atLeast: 1, "must be a positive number of sign-ins in progress"),
        summary: { String($0.maximumPendingAuthorizations) })
    static let maximumPendingAuthorizationsPerClient = Setting<Int>(
        "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT", flag: "max-pending-authorizations-per-client",
        meaning: "sign-ins one client address (IPv6: its /64) may start in ten minutes, the life of a pending authorization; past it a 429 page; `0` = off (a load test from one address)",
        default: 300, defaultText: "`300`",
        parse: Parse.wholeNumber(atLeast: 0, "must be 0 (off) or a positive number of sign-ins per client address"),
        summary: { $0.maximumPendingAuthorizationsPerClient == 0 ? "off" : String($0.maximumPendingAuthorizationsPerClient) })
    static let httpHeadTimeout = Setting<Duration>(
        "HTTP_HEAD_TIMEOUT", flag: "http-head-timeout",
        meaning: "seconds from a request's first byte to the end of its head; past it `408` and the connection closes",
        default: .seconds(30), defaultText: "`30`",
        parse: Parse.seconds(in: 0...3600, excludingLowerBound: true, "must be a number of seconds between 0 and 3600"),
        summary: { "\(seconds($0.httpHeadTimeout)) s" })
    static let httpBodyTimeout = Setting<Duration>(
        "HTTP_BODY_TIMEOUT", flag: "http-body-timeout",
        meaning: "seconds a request body may pause between two reads; past it `408` and the connection closes",
        default: .seconds(30), defaultText: "`30`",
        parse: Parse.seconds(in: 0...3600, excludingLowerBound: true, "must be a number of seconds between 0 and 3600"),
        summary: { "\(seconds($0.httpBodyTimeout)) s" })
    static let httpIdleTimeout = Setting<Duration>(
        "HTTP_IDLE_TIMEOUT", flag: "http-idle-timeout",
        meaning: "seconds a keep-alive connection may wait for its next request, or leave an answer unread, before it is closed",
        default: .seconds(75), defaultText: "`75` (nginx's `keepalive_timeout`)",
        parse: Parse.seconds(in: 0...3600, excludingLowerBound: true, "must be a number of seconds between 0 and 3600"),
        summary: { "\(seconds($0.httpIdleTimeout)) s" })
    static let httpServer = Setting<HTTPServerKind>(
        "HTTP_SERVER", flag: "http-server",
        meaning: "`siwa` (the hand-built HTTP/1.1 layer, with the limits above) or `hummingbird` (Hummingbird's stock server, idle timeout only): the A/B reference of docs/architecture.md's ledger",
        default: .siwa, defaultText: "`siwa`", parse: Parse.httpServer, summary: { $0.httpServer.rawValue })
    static let trustedProxies = Setting<TrustedProxies>(
        "TRUSTED_PROXIES", flag: "trusted-proxies",
        meaning: "comma-separated addresses and CIDR ranges (IPv4, IPv6) whose `X-Forwarded-For/-Proto/-Host/-Uri` and `X-Real-IP` are believed",
        default: .loopback, defaultText: "`127.0.0.0/8,::1`", parse: Parse.trustedProxies,
        summary: { $0.trustedProxies.description })
    static let sessionCookieDomain = Setting<String>(
        "SESSION_COOKIE_DOMAIN", flag: "session-cookie-domain",
        meaning: "share the session cookie with subdomains (`example.com`); must be `PUBLIC_URL`'s host or a parent of it",
        defaultText: "unset: this host only", parse: Parse.cookieDomain,
        summary: { $0.sessionCookieDomain ?? "(none: this host only)" })
    static let allowedRedirectHosts = Setting<AllowedRedirectHosts>(
        "ALLOWED_REDIRECT_HOSTS", flag: "allowed-redirect-hosts",
        meaning: "hosts the gateway's `rd` may name besides `PUBLIC_URL`'s: `app.example.com` exactly, `.example.com` for the domain and its subdomains",
        default: AllowedRedirectHosts.none, defaultText: "none", parse: Parse.redirectHosts,
        summary: { $0.allowedRedirectHosts.description })
    static let metricsPort = Setting<Int>(
        "METRICS_PORT", flag: "metrics-port", meaning: "serve `/metrics` on its own listener (same `HOST`) instead of `PORT`",
        defaultText: "unset: on `PORT`", parse: Parse.port,
        summary: { $0.metricsPort.map(String.init) ?? "(none: /metrics on PORT)" })
    static let metricsToken = Setting<String>(
        "METRICS_TOKEN", flag: "metrics-token", meaning: "bearer token `/metrics` requires (16+ characters)",
        defaultText: "unset: open", secret: true, parse: Parse.metricsToken,
        summary: { $0.metricsToken == nil ? "(none)" : "set" })
    static let demo = Setting<Bool>(
        "SIWA_DEMO", flag: "demo",
        meaning: "`1` (or `siwa serve --demo`): demo mode even when `HOST` is not a loopback address",
        default: false, defaultText: "unset", isSwitch: true, parse: Parse.onOff, summary: { _ in nil })

    // MARK: Background work shared by several instances (SPEC §5, §6)
    static let revocationInterval = Setting<Duration>(
        "REVOCATION_INTERVAL_SECONDS", flag: "revocation-interval",
        meaning: "seconds between two looks for due Apple revocations when no deletion in this instance woke the worker (other instances queue them too)",
        default: .seconds(5), defaultText: "`5`",
        parse: Parse.wholeSeconds(in: 1...3_600, "must be a whole number of seconds from 1 to 3600"),
        summary: { "\(seconds($0.revocationInterval)) s" })
    static let revocationLease = Setting<Duration>(
        "REVOCATION_LEASE_SECONDS", flag: "revocation-lease",
        meaning: "seconds a revocation claimed by one instance stays its own; renewed before each call to Apple, so at least `APPLE_TIMEOUT` + 2",
        default: .seconds(120), defaultText: "`120` (`APPLE_TIMEOUT` + 2 if longer)",
        parse: Parse.wholeSeconds(in: 2...86_400, "must be a whole number of seconds from 2 to 86400"),
        summary: { "\(seconds($0.revocationLease)) s" })
    static let consentCheckInterval = Setting<Duration>(
        "CONSENT_CHECK_INTERVAL_SECONDS", flag: "consent-check-interval",
        meaning: "seconds between two validations of a person's refresh tokens with Apple (the consent check; Apple throttles them)",
        default: .seconds(86_400), defaultText: "`86400` (a day)",
        parse: Parse.wholeSeconds(in: 60...31_536_000, "must be a whole number of seconds from 60 to 31536000"),
        summary: { "\(seconds($0.consentCheckInterval)) s" })
    static let consentCheckPassInterval = Setting<Duration>(
        "CONSENT_CHECK_PASS_INTERVAL_SECONDS", flag: "consent-check-pass-interval",
        meaning: "seconds between two passes of the consent check once everybody due was checked",
        default: .seconds(600), defaultText: "`600`",
        parse: Parse.wholeSeconds(in: 1...86_400, "must be a whole number of seconds from 1 to 86400"),
        summary: { "\(seconds($0.consentCheckPassInterval)) s" })
    static let consentCheckClaim = Setting<Duration>(
        "CONSENT_CHECK_CLAIM_SECONDS", flag: "consent-check-claim",
        meaning: "seconds people claimed by one instance's consent check stay its own; renewed before each call to Apple, so at least `APPLE_TIMEOUT` + 2",
        default: .seconds(900), defaultText: "`900` (`APPLE_TIMEOUT` + 2 if longer)",
        parse: Parse.wholeSeconds(in: 2...86_400, "must be a whole number of seconds from 2 to 86400"),
        summary: { "\(seconds($0.consentCheckClaim)) s" })

    // MARK: The OpenID Provider (SPEC §11)
    static let oidcClientsFile = Setting<String>(
        "OIDC_CLIENTS_FILE", flag: "oidc-clients-file",
        meaning: "JSON array of the OpenID Connect clients (below); set, siwa is also an OpenID Provider",
        defaultText: "unset: no provider (demo mode: the demo client `siwa-demo-rp`)", parse: Parse.text,
        summary: { $0.oidc.map { "\($0.clients.clients.count) client(s) from \($0.clientsSource)" } ?? "(none: OpenID provider off)" })
    static let oidcSigningKeyPath = Setting<String>(
        "OIDC_SIGNING_KEY_PATH", flag: "oidc-signing-key-path",
        meaning: "RSA private key (PEM, ≥ 2048 bits) signing ID tokens, stored in the database at the first start (or when replaced); `siwa admin oidc rotate-key` replaces it without a restart; `PATH.previous`, when present, is published too",
        defaultText: "required with `OIDC_CLIENTS_FILE`; demo mode: generated into `data/oidc-signing-key.pem`",
        parse: Parse.text,
        summary: { configuration in
            configuration.oidc.map { "\($0.signingKeyPath) (kid \($0.signingKeys.current.kid)\($0.signingKeys.previous == nil ? "" : ", previous key published"))" } ?? "(none)"
        })
    static let oidcRefreshTokenLifetime = Setting<Int>(
        "OIDC_REFRESH_TOKEN_LIFETIME_SECONDS", flag: "oidc-refresh-token-lifetime",
        meaning: "a refresh token family's absolute lifetime from the code's exchange, in seconds (confidential clients that ask for `offline_access`): its tokens rotate but never outlive it",
        default: Int(OIDCProviderConfiguration.defaultRefreshTokenLifetime), defaultText: "`2592000` (30 days)",
        parse: Parse.wholeNumber(in: 1...315_360_000, "must be a number of seconds from 1 to 315360000 (10 years)"),
        summary: { $0.oidc.map { "\($0.refreshTokenLifetime) s" } })

    /// Every setting, in README's order.
    public static let all: [SettingRow] = [
        teamID.row, clientID.row, keyID.row, privateKeyPath.row, privateKey.row, redirectURI.row, appleBaseURL.row,
        nativeClientIDs.row, publicURL.row, databaseURL.row, host.row, port.row, tokenEncryptionKey.row, tokenEncryptionKeyPrevious.row, appleTimeout.row,
        emulatorPort.row, rateLimitPerMinute.row, profileFallback.row, clientSecretLifetime.row, dataDirectory.row,
        siteName.row, logLevel.row, logFormat.row, eventLoopThreads.row, postgresMaxConnections.row, gatewaySessionCache.row,
        sessionLifetime.row, sessionIdleTimeout.row, appAccessTokenLifetime.row, appRefreshTokenLifetime.row, resourcesDirectory.row, maximumPendingAuthorizations.row,
        maximumPendingAuthorizationsPerClient.row, httpHeadTimeout.row, httpBodyTimeout.row, httpIdleTimeout.row, httpServer.row,
        trustedProxies.row, sessionCookieDomain.row, allowedRedirectHosts.row,
        metricsPort.row, metricsToken.row, demo.row, oidcClientsFile.row, oidcSigningKeyPath.row, oidcRefreshTokenLifetime.row,
        revocationInterval.row, revocationLease.row, consentCheckInterval.row, consentCheckPassInterval.row, consentCheckClaim.row,
    ]

    /// `EVENT_LOOP_THREADS` alone, as `siwa serve` needs it before anything else runs (the event loops start
    /// with the first task). A malformed value counts as unset here; loading the configuration reports it.
    public static func eventLoopThreads(in sources: SettingSources) -> Int {
        ((try? sources.value(eventLoopThreads)) ?? nil) ?? SIWAConfiguration.defaultEventLoopThreads
    }

    /// The names of the secret settings (never printed).
    static var secretNames: Set<String> { Set(all.filter(\.isSecret).map(\.name)) }

    /// A duration in whole seconds when it is whole, as the summary prints it.
    static func seconds(_ duration: Duration) -> String {
        let (whole, attoseconds) = duration.components
        if attoseconds == 0 { return String(whole) }
        return String(Double(whole) + Double(attoseconds) / 1e18)
    }
}
