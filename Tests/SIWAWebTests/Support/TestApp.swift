import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import Logging
import SIWAStore
import SIWAWeb
import Testing

/// The databases every web test runs on. PostgreSQL needs SIWA_TEST_POSTGRES_URL (`.ci/postgres.sh`
/// prints it); without it those cases are skipped locally, and fail when SIWA_REQUIRE_POSTGRES=1.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }

    static var all: [Backend] { [.sqlite, .postgres] }

    /// Opens a fresh, private database for one test: a temporary SQLite file or a new PostgreSQL schema.
    func open() async throws -> SIWADatabase? {
        var logger = Logger(label: "test.db")
        logger.logLevel = .warning
        switch self {
        case .sqlite:
            let path = NSTemporaryDirectory() + "siwa-web-\(UUID().uuidString).sqlite"
            let database = try await SIWADatabase.open(DatabaseURL("sqlite:\(path)"), logger: logger)
            try await database.migrate()
            return database
        case .postgres:
            let environment = ProcessInfo.processInfo.environment
            guard let url = environment["SIWA_TEST_POSTGRES_URL"], !url.isEmpty else {
                if environment["SIWA_REQUIRE_POSTGRES"] == "1" {
                    Issue.record("SIWA_REQUIRE_POSTGRES=1 but SIWA_TEST_POSTGRES_URL is not set")
                } else {
                    print("note: PostgreSQL case skipped (set SIWA_TEST_POSTGRES_URL, see .ci/postgres.sh)")
                }
                return nil
            }
            let schema = "web_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20)
            let database = try await SIWADatabase.open(DatabaseURL(url), logger: logger, postgresSchema: String(schema))
            try await database.migrate()
            return database
        }
    }
}

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
            "APPLE_TIMEOUT": "2", "RATE_LIMIT_PER_MINUTE": "0", "DATABASE_URL": "sqlite::memory:",
        ]
        values.merge(overrides) { $1 }
        return values
    }

    /// Runs `test` against the app on `backend` (skipped when that backend is unavailable).
    static func run(
        _ backend: Backend, settings overrides: [String: String] = [:],
        _ test: @escaping @Sendable (TestApp, Browser) async throws -> Void
    ) async throws {
        guard let database = try await backend.open() else { return }
        let apple = try await LoopbackApple.start()
        defer { apple.stop() }
        let configuration = try SIWAConfiguration.load(from: try settings(apple: apple, overrides: overrides))
        var logger = Logger(label: "test.web")
        logger.logLevel = .warning
        var httpConfiguration = CurlHTTPClient.Configuration()
        httpConfiguration.defaultTimeout = .milliseconds(Int64(configuration.appleTimeout * 1000))
        let http = CurlHTTPClient(configuration: httpConfiguration)
        let pages = try await PageRenderer(templatesDirectory: ResourceLocator.directory("templates"), siteName: "Example")
        let dependencies = try SIWADependencies(configuration: configuration, database: database, http: http, pages: pages)
        let testApp = TestApp(apple: apple, dependencies: dependencies, database: database)
        let app = buildApplication(dependencies, logger: logger)
        try await app.test(.router) { client in
            try await test(testApp, Browser(client: client))
        }
    }
}

/// A browser over the in-process client: a cookie jar that honours Path, Max-Age and expiry.
final class Browser: @unchecked Sendable {
    struct StoredCookie { var value: String; var path: String }
    let client: any TestClientProtocol
    private(set) var cookies: [String: StoredCookie] = [:]

    init(client: any TestClientProtocol) { self.client = client }

    /// Another browser profile sharing nothing with this one.
    func fresh() -> Browser { Browser(client: client) }

    func cookie(_ name: String) -> String? { cookies[name]?.value }
    func setCookie(_ name: String, _ value: String, path: String = "/") { cookies[name] = StoredCookie(value: value, path: path) }
    func removeCookie(_ name: String) { cookies[name] = nil }

    @discardableResult
    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await send(uri, method: .get, headers: headers, body: nil)
    }

    @discardableResult
    func postForm(_ uri: String, _ fields: [(String, String)], headers: HTTPFields = [:]) async throws -> TestResponse {
        var headers = headers
        headers[.contentType] = "application/x-www-form-urlencoded"
        let body = fields.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&")
        return try await send(uri, method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    @discardableResult
    func send(_ uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer?) async throws -> TestResponse {
        var headers = headers
        let path = String(uri.prefix { $0 != "?" })
        let applicable = cookies.filter { path.hasPrefix($0.value.path) }.map { "\($0.key)=\($0.value.value)" }
        if !applicable.isEmpty, headers[.cookie] == nil { headers[.cookie] = applicable.sorted().joined(separator: "; ") }
        let response = try await client.execute(uri: uri, method: method, headers: headers, body: body)
        for header in response.headers[values: .setCookie] { absorb(header) }
        return response
    }

    private func absorb(_ header: String) {
        let parts = header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = parts.first, let equals = first.firstIndex(of: "=") else { return }
        let name = String(first[..<equals])
        let value = String(first[first.index(after: equals)...])
        var path = "/"
        var expired = false
        for attribute in parts.dropFirst() {
            let lower = attribute.lowercased()
            if lower.hasPrefix("path=") { path = String(attribute.dropFirst(5)) }
            if lower == "max-age=0" || lower.hasPrefix("max-age=-") { expired = true }
        }
        if expired || value.isEmpty { cookies[name] = nil } else { cookies[name] = StoredCookie(value: value, path: path) }
    }

    static func encode(_ value: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
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
