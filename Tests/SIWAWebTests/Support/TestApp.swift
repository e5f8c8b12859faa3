import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import Logging
import SIWAStore
import SIWASite
import SIWATestSupport
import SIWAWeb
import Testing

/// The app under test, wired to a loopback Apple and a fresh database, driven in-process.
struct TestApp {
    static let clientID = "com.example.web"
    static let nativeClientID = "com.example.ios"
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"

    let apple: LoopbackApple
    let dependencies: SIWADependencies
    let database: SIWADatabase

    /// The settings a production operator would give, pointed at the stand-in.
    static func settings(apple: LoopbackApple, overrides: [String: String]) throws -> [String: String] {
        var values = [
            "APPLE_TEAM_ID": teamID, "APPLE_CLIENT_ID": clientID, "APPLE_KEY_ID": keyID,
            "APPLE_PRIVATE_KEY": try P256PrivateKey.generate().pkcs8PEM(),
            "APPLE_BASE_URL": apple.baseURL, "APPLE_NATIVE_CLIENT_IDS": nativeClientID,
            "PUBLIC_URL": "https://app.example.com", "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)),
            "APPLE_TIMEOUT": "10", "RATE_LIMIT_PER_MINUTE": "0", "DATABASE_URL": "sqlite::memory:",
        ]
        values.merge(overrides) { $1 }
        return values
    }

    /// The time at the call, standing still (for `run`'s `now`): the rate limit counts in fixed minutes,
    /// and a case that crossed a minute's end on a loaded machine found its budget renewed half-way.
    static func stillClock() -> @Sendable () -> Int64 {
        let start = Int64(Date().timeIntervalSince1970)
        return { start }
    }

    /// Runs `test` against the app on a private database on `backend` (skipped when that backend is
    /// unavailable), with a loopback Apple; both are gone afterwards.
    static func run(
        _ backend: Backend, settings overrides: [String: String] = [:], live: Bool = false, logger: Logger? = nil,
        now: (@Sendable () -> Int64)? = nil,
        _ test: @escaping @Sendable (TestApp, Browser) async throws -> Void
    ) async throws {
        // Small pools: many cases run in parallel against one PostgreSQL.
        try await withDatabase(backend, poolSize: 2) { testDatabase in
            try await LoopbackApple.with { apple in
                let configuration = try SIWAConfiguration.load(from: try settings(apple: apple, overrides: overrides))
                let logger = logger ?? TestDatabase.quietLogger
                // The production wiring (Apple's HTTP client, templates, token re-seal) on this test's database and clock.
                let dependencies = try await Site.makeDependencies(configuration: configuration, logger: logger,
                                                                   overrides: SiteOverrides(database: testDatabase.db, now: now))
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
