import Foundation
import JOSE
import Logging
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
/// Which HTTP/1.1 server answers (`HTTP_SERVER`): the hand-built layer, or Hummingbird's own, which the
/// ledger of hand-built layers measures it against (docs/architecture.md).
public enum HTTPServerKind: String, Sendable, CaseIterable {
    /// `HTTP1Server`: one Task per request from the channel handler, with siwa's connection limits.
    case siwa
    /// Hummingbird's stock `HTTP1Channel`, with the idle timeout as its only bound.
    case hummingbird
}

public enum ProfileFallback: String, Sendable, CaseIterable {
    /// The recovery page: stop using Sign in with Apple for this site, then sign in again.
    case recovery
    /// A form asking for the name.
    case ask
}

/// Where the site's files are: `templates/` (pages and the emulator's) and `Public/` (static files).
public struct SiteResources: Sendable, Equatable {
    /// The folder holding both.
    public var root: String

    public init(root: String) { self.root = root }

    public var templatesDirectory: String { root + "/templates" }
    public var emulatorTemplatesDirectory: String { root + "/templates/emulator" }
    public var publicDirectory: String { root + "/Public" }
}

/// The whole service configuration (SPEC §2), as values. `SIWASite`'s settings table produces it from
/// the environment and flags, validating each setting; the web app only reads it.
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
    /// `TOKEN_ENCRYPTION_KEY_PREVIOUS`: the key `tokenEncryptionKey` replaced. What it sealed is still read;
    /// nothing is sealed with it; `siwa admin reseal` seals it again with the current key.
    public var tokenEncryptionKeyPrevious: AESGCMKey?
    /// How long any call to Apple may take.
    public var appleTimeout: Duration = .seconds(10)
    /// `REVOCATION_INTERVAL_SECONDS`: how often the revocation worker looks for due revocations when no
    /// deletion in this instance woke it (other instances queue revocations too).
    public var revocationInterval: Duration = .seconds(5)
    /// `REVOCATION_LEASE_SECONDS`: how long a revocation claimed by one instance stays its own. The worker
    /// renews it before each call to Apple, so it has to outlast one call (at least `appleTimeout` + 2 s).
    public var revocationLease: Duration = .seconds(120)
    /// `CONSENT_CHECK_INTERVAL_SECONDS`: a person's refresh tokens are validated with Apple again when their
    /// last check (or sign-in) is older than this.
    public var consentCheckInterval: Duration = .seconds(86_400)
    /// `CONSENT_CHECK_PASS_INTERVAL_SECONDS`: the wait between two passes of the consent check once
    /// everybody due was checked.
    public var consentCheckPassInterval: Duration = .seconds(600)
    /// `CONSENT_CHECK_CLAIM_SECONDS`: how long people claimed by one instance's consent check stay its own.
    /// Renewed before each call to Apple, so it has to outlast one call (at least `appleTimeout` + 2 s).
    public var consentCheckClaim: Duration = .seconds(900)
    public var emulatorPort: Int
    /// Requests per client IP per minute on the sign-in endpoints; 0 turns the limit off.
    public var rateLimitPerMinute: Int = 60
    public var profileFallback: ProfileFallback = .recovery
    /// Lifetime of the signed client secret (at most 15,777,000 s, Apple's limit).
    public var clientSecretLifetime: Duration = .seconds(86_400 * 30)
    /// Where demo mode keeps its generated keys and the default SQLite file.
    public var dataDirectory: String
    /// The site's name on its pages (SITE_NAME; defaults to PUBLIC_URL's host).
    public var siteName: String
    public var logLevel: Logger.Level = .info
    /// `LOG_FORMAT`: each log line as swift-log's text, or as one JSON object (SIWASite's `SiteLogHandler`).
    public var logFormat: LogFormat = .text
    /// Threads that accept connections and run request handlers: NIO's event loops, which `siwa serve` also
    /// makes Swift Concurrency's executor. Applied once, as the process starts (see `SIWACommand.main`).
    public var eventLoopThreads: Int = SIWAConfiguration.defaultEventLoopThreads
    /// Half the cores the process may use, at least one: the rest is left to libcurl's thread, SQLite's
    /// checkpointer and the kernel's network stack, which every request also keeps busy (`siwa-loadtest`
    /// measured less CPU per sign-in and more sign-ins per second this way on 2 cores than with one
    /// loop per core).
    public static var defaultEventLoopThreads: Int { max(1, ProcessInfo.processInfo.activeProcessorCount / 2) }
    /// Where `templates/` and `Public/` are.
    public var resources: SiteResources
    /// Connections this instance opens to PostgreSQL at most (`POSTGRES_MAX_CONNECTIONS`); requests
    /// beyond them wait for one. Not used with SQLite.
    public var postgresMaxConnections: Int = SIWADatabase.defaultPostgresPoolSize
    /// The pool size to open `databaseURL` with: ``postgresMaxConnections`` on PostgreSQL, SQLite's own
    /// default otherwise.
    public var databasePoolSize: Int? { databaseURL.isPostgres ? postgresMaxConnections : nil }
    /// Sessions the gateway's check keeps in memory for up to a second (`GATEWAY_SESSION_CACHE`); 0 = off.
    public var gatewaySessionCache: Int = SIWAConfiguration.defaultGatewaySessionCache
    /// Enough for ten thousand people signed in at once (a few MB).
    public static let defaultGatewaySessionCache = GatewaySessionCache.defaultCapacity
    /// `SESSION_LIFETIME_SECONDS`: a web session's absolute lifetime (SPEC §13).
    public var sessionLifetime = SIWAConfiguration.defaultSessionLifetime
    public static let defaultSessionLifetime = 30 * 86_400
    /// `SESSION_IDLE_TIMEOUT_SECONDS`: a web session unused this long ends; 0 = none.
    public var sessionIdleTimeout = SIWAConfiguration.defaultSessionIdleTimeout
    public static let defaultSessionIdleTimeout = 14 * 86_400
    /// `APP_ACCESS_TOKEN_LIFETIME_SECONDS`: an app access token's life.
    public var appAccessTokenLifetime = SIWAConfiguration.defaultAppAccessTokenLifetime
    public static let defaultAppAccessTokenLifetime = 3_600
    /// `APP_REFRESH_TOKEN_LIFETIME_SECONDS`: an app session's (refresh token family's) absolute lifetime.
    public var appRefreshTokenLifetime = SIWAConfiguration.defaultAppRefreshTokenLifetime
    public static let defaultAppRefreshTokenLifetime = 90 * 86_400
    /// How a used web session moves forward.
    public var sessionTouch: SessionTouch { SessionTouch(idleTimeout: Int64(sessionIdleTimeout)) }
    /// Most sign-ins in progress (unexpired, unused pending authorizations) at once; past it `/auth/apple`
    /// answers 503. The per-IP rate limit cannot bound this table against many addresses; this can.
    public var maximumPendingAuthorizations: Int = 20_000
    /// Sign-ins one client address (IPv6: its /64) may start in ten minutes — the life of a pending
    /// authorization — so one client cannot use up `maximumPendingAuthorizations` for everyone (SPEC §9);
    /// 0 turns it off (a load test from one address).
    public var maximumPendingAuthorizationsPerClient: Int = 300
    /// How long a request's head may take from its first byte (`HTTP_HEAD_TIMEOUT`, SPEC §9).
    public var httpHeadTimeout: Duration = .seconds(30)
    /// The longest pause between two reads of a request body (`HTTP_BODY_TIMEOUT`).
    public var httpBodyTimeout: Duration = .seconds(30)
    /// How long a keep-alive connection waits for its next request, or an answer waits to be read
    /// (`HTTP_IDLE_TIMEOUT`; nginx's `keepalive_timeout` default).
    public var httpIdleTimeout: Duration = .seconds(75)
    /// The HTTP/1.1 server (`HTTP_SERVER`): siwa's own unless an A/B asks for Hummingbird's.
    public var httpServer: HTTPServerKind = .siwa
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

    /// The settings every site has; the rest start at their defaults and are set one by one.
    public init(
        isDemo: Bool, teamID: String, clientID: String, keyID: String, privateKey: P256PrivateKey, redirectURI: String,
        appleBaseURL: String, nativeClientIDs: [String], publicURL: String, databaseURL: DatabaseURL, host: String,
        port: Int, tokenEncryptionKey: AESGCMKey, emulatorPort: Int, dataDirectory: String, siteName: String,
        resources: SiteResources
    ) {
        self.isDemo = isDemo
        self.teamID = teamID
        self.clientID = clientID
        self.keyID = keyID
        self.privateKey = privateKey
        self.redirectURI = redirectURI
        self.appleBaseURL = appleBaseURL
        self.nativeClientIDs = nativeClientIDs
        self.publicURL = publicURL
        self.databaseURL = databaseURL
        self.host = host
        self.port = port
        self.tokenEncryptionKey = tokenEncryptionKey
        self.emulatorPort = emulatorPort
        self.dataDirectory = dataDirectory
        self.siteName = siteName
        self.resources = resources
    }

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

/// How log lines are written (`LOG_FORMAT`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's `StreamLogHandler` line: time, level, label, sorted metadata, source, message.
    case text
    /// One JSON object per line, for log collectors (Loki, Elasticsearch, CloudWatch, journald's JSON export).
    case json
}
