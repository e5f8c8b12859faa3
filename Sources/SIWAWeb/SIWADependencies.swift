import AppleSignIn
import Foundation
import Hummingbird
import JOSE
import Logging
import SIWAStore

/// Everything the web app needs, built once and passed to each controller (no singletons), so a
/// test builds the same app against a loopback Apple and a temporary database.
public struct SIWADependencies: Sendable {
    public let configuration: SIWAConfiguration
    public let database: SIWADatabase
    /// Apple's REST API; its HTTP client is closed with the app (see ``buildApplication``).
    public let apple: AppleAPIClient
    public let keys: JWKSCache
    public let identityTokens: IdentityTokenVerifier
    public let notifications: NotificationVerifier
    public let pages: PageRenderer
    public let metrics: SIWAMetrics
    public let now: @Sendable () -> Int64
    let cipher: TokenCipher
    let csrf: CSRFTokens
    let cookies: Cookies
    /// `RATE_LIMIT_PER_MINUTE`, one instance for every limited route (each route its own bucket).
    let rateLimit: RateLimitMiddleware
    /// `rateLimit` with one budget for both ways to start a sign-in (`/auth/apple`, `/oauth2/start`).
    var signInStartLimit: RateLimitMiddleware { rateLimit.sharing("/auth/apple") }
    /// `MAX_PENDING_AUTHORIZATIONS` and its per-client share, for the web and the native starts alike.
    let signInCap: SignInCap
    /// This process among the instances sharing the database: the holder of its job leases.
    public let instanceID = SecureRandom.token(byteCount: 12)
    let revocationSignal: RevocationSignal
    /// The OpenID provider's signing keys, shared through the database (nil when the provider is off).
    public let oidcKeys: OIDCKeyRing?
    /// The gateway's sessions read less than a second ago (`GATEWAY_SESSION_CACHE`).
    let gatewayCache: GatewaySessionCache
    /// Whether the gateway's session cache answers (its capacity is not 0, and on PostgreSQL this instance
    /// hears the others' changes).
    public var gatewaySessionCacheIsOn: Bool { gatewayCache.isEnabled }

    /// The key cache and the verifiers are built over `apple` (which the composition root builds with
    /// its HTTP client and this `now` for its client secrets). The caller owns `database`.
    /// `oidcKeyRefresh`: seconds a read of the OpenID signing keys serves (tests shorten it).
    public init(
        configuration: SIWAConfiguration, database: SIWADatabase, apple: AppleAPIClient, pages: PageRenderer,
        metrics: SIWAMetrics = SIWAMetrics(),
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        oidcKeyRefresh: Int64 = OIDCKeyRing.defaultRefreshInterval
    ) {
        let keys = apple.keyCache(now: now)
        self.configuration = configuration
        self.database = database
        self.apple = apple
        self.keys = keys
        self.identityTokens = IdentityTokenVerifier(keys: keys, now: now)
        self.notifications = NotificationVerifier(keys: keys, now: now)
        self.pages = pages
        self.metrics = metrics
        self.now = now
        let cipher = TokenCipher(key: configuration.tokenEncryptionKey, previousKey: configuration.tokenEncryptionKeyPrevious)
        self.cipher = cipher
        self.csrf = CSRFTokens(secret: configuration.tokenEncryptionKey, previous: configuration.tokenEncryptionKeyPrevious)
        self.revocationSignal = RevocationSignal()
        self.cookies = Cookies(https: configuration.isHTTPS, sessionDomain: configuration.sessionCookieDomain)
        self.rateLimit = RateLimitMiddleware(
            limiter: configuration.rateLimitPerMinute > 0 ? RateLimiter(limit: configuration.rateLimitPerMinute, now: now) : nil,
            metrics: metrics)
        self.signInCap = SignInCap(configuration: configuration, now: now)
        self.gatewayCache = GatewaySessionCache(capacity: configuration.gatewaySessionCache, database: database,
                                                touch: configuration.sessionTouch)
        var keyLogger = Logger(label: "siwa")
        keyLogger.logLevel = configuration.logLevel
        self.oidcKeys = configuration.oidc.map {
            OIDCKeyRing(configured: $0.signingKeys, database: database, cipher: cipher, refreshInterval: oidcKeyRefresh,
                        logger: keyLogger, now: now)
        }
    }

    /// Client ids whose tokens this service accepts in notifications: the web Services ID and the app bundles.
    var allClientIDs: Set<String> { Set([configuration.clientID] + configuration.nativeClientIDs) }
}

extension SIWAConfiguration {
    /// The signer of this team's client secrets (`APPLE_TEAM_ID`, `APPLE_KEY_ID`, the .p8 key, the lifetime).
    public func clientSecretProvider(now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) throws -> ClientSecretProvider {
        try ClientSecretProvider(teamID: teamID, keyID: keyID, privateKey: privateKey,
                                 lifetime: Int(clientSecretLifetime.components.seconds), now: now)
    }
}

/// Wakes the revocation worker when a deletion enqueues work, so Apple hears about it at once.
final class RevocationSignal: Sendable {
    let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func notify() { continuation.yield() }
    func finish() { continuation.finish() }
}

extension Response {
    /// 303 See Other: after a POST the browser GETs `location`.
    static func seeOther(_ location: String, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.location] = location
        fields[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: fields)
    }

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                        body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
