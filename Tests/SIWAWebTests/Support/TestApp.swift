import AppleSignIn
import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import Logging
import SIWAStore
import SIWATestSupport
import SIWAWeb
import Testing

/// The app under test, wired to a loopback Apple and a fresh database, driven in-process.
struct TestApp {
    let apple: LoopbackApple
    let dependencies: SIWADependencies
    let database: SIWADatabase

    /// The site's public URL in the tests.
    static let publicURL = "https://app.example.com"

    /// The configuration a production operator's settings make (the credentials, `APPLE_BASE_URL`,
    /// `APPLE_NATIVE_CLIENT_IDS`, `PUBLIC_URL`, `TOKEN_ENCRYPTION_KEY`, `APPLE_TIMEOUT=10`,
    /// `RATE_LIMIT_PER_MINUTE=0`, every other setting at its default), pointed at `appleBaseURL`, built from
    /// the web layer's own type: reading settings is SIWASite's, and SIWASiteTests test it. `edit` changes
    /// it as a setting would (`$0.rateLimitPerMinute = 3` for `RATE_LIMIT_PER_MINUTE=3`).
    static func configuration(appleBaseURL: String, edit: (inout SIWAConfiguration) throws -> Void = { _ in })
        throws -> SIWAConfiguration {
        var configuration = SIWAConfiguration(
            isDemo: false, teamID: Fixture.teamID, clientID: Fixture.webClientID, keyID: Fixture.keyID, privateKey: try P256PrivateKey.generate(),
            redirectURI: publicURL + "/auth/apple/callback", appleBaseURL: appleBaseURL, nativeClientIDs: [Fixture.nativeClientID],
            publicURL: publicURL, databaseURL: try DatabaseURL("sqlite::memory:"), host: "127.0.0.1", port: 8080,
            tokenEncryptionKey: AESGCMKey.generate(), emulatorPort: 8081, dataDirectory: "data",
            siteName: "app.example.com", resources: SiteResources(root: packageRoot))
        configuration.appleTimeout = .seconds(10)
        configuration.rateLimitPerMinute = 0
        try edit(&configuration)
        return configuration
    }

    /// ``configuration(appleBaseURL:edit:)`` pointed at the loopback Apple.
    static func configuration(apple: LoopbackApple, edit: (inout SIWAConfiguration) throws -> Void = { _ in })
        throws -> SIWAConfiguration {
        try configuration(appleBaseURL: apple.baseURL, edit: edit)
    }

    /// The source checkout (Tests/SIWAWebTests/Support/TestApp.swift → the root): its templates/.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// The dependencies as a starting instance builds them over an opened database, in the order SIWASite's
    /// `Site.makeDependencies` does (which a test of the web layer does not link): Apple's client with
    /// `APPLE_TIMEOUT` on every call, the templates, TOKEN_ENCRYPTION_KEY checked against the database
    /// (`.serve`: a refusal is the web layer's ``SealingKeyRefusal``), tokens of an older version re-sealed,
    /// `OIDC_SIGNING_KEY_PATH`'s key adopted. The caller closes `database`; `apple.shutdown()` closes the
    /// HTTP client when it was made here.
    static func dependencies(
        _ configuration: SIWAConfiguration, database: SIWADatabase, http: CurlHTTPClient? = nil,
        now: (@Sendable () -> Int64)? = nil, oidcKeyRefresh: Int64 = OIDCKeyRing.defaultRefreshInterval,
        logger: Logger = TestDatabase.quietLogger
    ) async throws -> SIWADependencies {
        let now = now ?? { Int64(Date().timeIntervalSince1970) }
        let apple = AppleAPIClient(baseURL: configuration.appleBaseURL, http: http ?? appleHTTPClient(for: configuration),
                                   secrets: try configuration.clientSecretProvider(now: now), timeout: configuration.appleTimeout)
        let pages = try PageRenderer(templatesDirectory: configuration.resources.templatesDirectory, siteName: configuration.siteName)
        let dependencies = SIWADependencies(configuration: configuration, database: database, apple: apple, pages: pages,
                                            now: now, oidcKeyRefresh: oidcKeyRefresh)
        do {
            _ = try await dependencies.checkSealingKey(.serve)
        } catch {
            await apple.shutdown()
            throw error
        }
        try await dependencies.resealLegacyTokens(logger: logger)
        try await dependencies.adoptConfiguredOIDCKey(logger: logger)
        return dependencies
    }

    /// A libcurl client for Apple with `APPLE_TIMEOUT` on every call.
    static func appleHTTPClient(for configuration: SIWAConfiguration) -> CurlHTTPClient {
        var httpConfiguration = CurlHTTPClient.Configuration()
        httpConfiguration.defaultTimeout = configuration.appleTimeout
        return CurlHTTPClient(configuration: httpConfiguration)
    }

    /// The time at the call, standing still (for `run`'s `now`): the rate limit counts in fixed minutes,
    /// and a case that crossed a minute's end on a loaded machine found its budget renewed half-way.
    static func stillClock() -> @Sendable () -> Int64 {
        let start = Int64(Date().timeIntervalSince1970)
        return { start }
    }

    /// Runs `test` against the app on a private database on `backend` (skipped when that backend is
    /// unavailable), with a loopback Apple; both are gone afterwards.
    /// `configure` changes the configuration as settings would (``configuration(appleBaseURL:edit:)``).
    static func run(
        _ backend: Backend, configure: @escaping @Sendable (inout SIWAConfiguration) throws -> Void = { _ in }, live: Bool = false,
        logger: Logger? = nil, now: (@Sendable () -> Int64)? = nil,
        _ test: @escaping @Sendable (TestApp, Browser) async throws -> Void
    ) async throws {
        // Small pools: many cases run in parallel against one PostgreSQL.
        try await withDatabase(backend, poolSize: 2) { testDatabase in
            try await LoopbackApple.with { apple in
                let configuration = try Self.configuration(apple: apple, edit: configure)
                let logger = logger ?? TestDatabase.quietLogger
                // The production wiring (Apple's HTTP client, templates, token re-seal) on this test's database and clock.
                let dependencies = try await Self.dependencies(configuration, database: testDatabase.db, now: now, logger: logger)
                let testApp = TestApp(apple: apple, dependencies: dependencies, database: testDatabase.db)
                let app = buildApplication(dependencies, logger: logger)
                try await app.test(live ? .live : .router) { client in
                    try await test(testApp, Browser(client: client))
                }
            }
        }
    }
}

/// A browser over the in-process client, with its own cookie jar.
final class Browser: Sendable {
    let client: any TestClientProtocol
    let jar = CookieJar()

    init(client: any TestClientProtocol) { self.client = client }

    /// Another browser profile sharing nothing with this one.
    func fresh() -> Browser { Browser(client: client) }

    /// The app's port on 127.0.0.1 when the test runs `live`.
    var port: Int? { client.port }

    func cookie(_ name: String) -> String? { jar[name] }
    func setCookie(_ name: String, _ value: String) { jar[name] = value }
    func removeCookie(_ name: String) { jar[name] = nil }

    @discardableResult
    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await send(uri, method: .get, headers: headers, body: nil)
    }

    @discardableResult
    func postForm(_ uri: String, _ fields: [(String, String)], headers: HTTPFields = [:]) async throws -> TestResponse {
        var headers = headers
        headers[.contentType] = "application/x-www-form-urlencoded"
        return try await send(uri, method: .post, headers: headers, body: ByteBuffer(string: PercentEncoding.query(fields)))
    }

    @discardableResult
    func send(_ uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer?) async throws -> TestResponse {
        var headers = headers
        if headers[.cookie] == nil, let cookies = jar.header(for: uri) { headers[.cookie] = cookies }
        let response = try await client.execute(uri: uri, method: method, headers: headers, body: body)
        for header in response.headers[values: .setCookie] { jar.absorb(header) }
        return response
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
    var location: String? { headers[.location] }
    /// The `data-page` marker of an HTML page.
    var page: String? {
        guard let range = text.range(of: "data-page=\"") else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "\"" })
    }
    func json() throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] ?? [:]
    }
}
