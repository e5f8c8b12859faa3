import AppleIDEmulator
import CurlHTTP
import Foundation
import Hummingbird
import Logging
import SIWAStore
import SIWASite
import SIWATestSupport
import SIWAWeb


/// The app and the Apple ID emulator running for real on loopback, as demo mode runs them: the app
/// on `localhost`, the emulator on `127.0.0.1` — two sites, so the callback is a cross-site POST.
struct EndToEnd: Sendable {
    let appURL: String
    let emulatorURL: String
    let emulator: AppleIDEmulatorState
    let database: SIWADatabase
    let configuration: SIWAConfiguration
    let http: CurlHTTPClient

    /// A data folder (keys, SQLite file) that survives a restart within one test.
    static func dataDirectory() -> String { TestScratch.path("siwa-e2e") }

    /// Runs `body` with both servers started on a private database on `backend` (nothing when that
    /// backend is skipped); stops them and removes the database afterwards.
    static func run(
        on backend: Backend, settings: [String: String] = [:], logger appLogger: Logger = TestDatabase.quietLogger,
        _ body: @escaping @Sendable (EndToEnd) async throws -> Void
    ) async throws {
        try await withDatabase(backend) { test in
            try await run(databaseLocation: (test.url, test.schema), settings: settings, logger: appLogger, body)
        }
    }

    /// Runs `body` with both servers started; stops them afterwards. Pass the same `dataDirectory`,
    /// `databaseLocation` and `emulator` again to restart the app on the same state.
    static func run(
        dataDirectory: String = EndToEnd.dataDirectory(), databaseLocation: (url: DatabaseURL, schema: String?),
        emulator existing: AppleIDEmulatorState? = nil, settings: [String: String] = [:],
        logger appLogger: Logger = TestDatabase.quietLogger,
        _ body: @escaping @Sendable (EndToEnd) async throws -> Void
    ) async throws {
        let (appPort, emulatorPort) = try await SiteWithEmulator.freePorts()
        var values = ["DATA_DIR": dataDirectory, "PORT": String(appPort), "EMULATOR_PORT": String(emulatorPort),
                      "RATE_LIMIT_PER_MINUTE": "0", "APPLE_TIMEOUT": "10", "DATABASE_URL": "sqlite::memory:"]
        values.merge(settings) { $1 }
        let configuration = try SIWAConfiguration.load(from: values)
        // The app logs to `appLogger` (a test may capture it); everything else logs quietly.
        let logger = TestDatabase.quietLogger
        let database = try await SIWADatabase.open(databaseLocation.url, logger: appLogger, postgresSchema: databaseLocation.schema)
        try await database.migrate()
        let dependencies = try await Site.makeDependencies(configuration: configuration, logger: appLogger,
                                                           overrides: SiteOverrides(database: database))

        let emulatorConfiguration = EmulatorConfiguration.forSite(configuration)
        let emulator = try existing ?? AppleIDEmulatorState(configuration: emulatorConfiguration)

        let clientHTTP = CurlHTTPClient()
        let endToEnd = EndToEnd(appURL: configuration.publicURL, emulatorURL: configuration.appleBaseURL, emulator: emulator,
                                database: database, configuration: configuration, http: clientHTTP)
        do {
            try await SiteWithEmulator.run(
                dependencies: dependencies, emulatorConfiguration: emulatorConfiguration, emulator: emulator,
                emulatorPort: emulatorPort, appLogger: appLogger, logger: logger) { try await body(endToEnd) }
        } catch {
            await clientHTTP.shutdown()
            throw error
        }
        await clientHTTP.shutdown()
    }
}

/// A browser without a screen, over libcurl: a cookie jar for the app, no redirects followed.
struct WebClient: Sendable {
    let http: CurlHTTPClient
    let jar = CookieJar()

    func get(_ url: String) async throws -> HTTPClientResponse {
        try await send(HTTPClientRequest(method: .GET, url: url))
    }

    func postForm(_ url: String, _ fields: [(String, String)]) async throws -> HTTPClientResponse {
        try await send(HTTPClientRequest.form(url: url, fields: fields))
    }

    func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        var request = request
        if let path = URLComponents(string: request.url)?.path, let cookies = jar.header(for: path) {
            request.headers.append(HTTPHeader("Cookie", cookies))
        }
        let response = try await http.execute(request)
        for header in response.headers where header.name.lowercased() == "set-cookie" { jar.absorb(header.value) }
        return response
    }
}

extension HTTPClientResponse {
    var text: String { String(decoding: body, as: UTF8.self) }
    var page: String? {
        guard let range = text.range(of: "data-page=\"") else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "\"" })
    }
}
