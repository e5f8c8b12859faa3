import AppleSignIn
import ArgumentParser
import CurlHTTP
import Foundation
import JOSE
import Logging
import SIWAStore
import SIWASite
import SIWAWeb

/// `siwa doctor`: checks the whole configuration, prints what it found, and signs a test client secret.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Checks the configuration, the database and Apple's keys, and signs a test client secret.",
        discussion: SettingFlags.helpText
    )

    @OptionGroup var settings: SettingsOptions
    @Flag(help: "Do not contact APPLE_BASE_URL") var offline = false

    func run() async throws {
        let configuration = try settings.configuration()
        print("siwa doctor")
        for (name, value) in configuration.summary {
            print("  \(name.padding(toLength: 30, withPad: " ", startingAt: 0)) \(value)")
        }
        for warning in configuration.warnings { print("WARN  \(warning)") }
        var problems = 0

        let secrets = try configuration.clientSecretProvider()
        let secret = try await secrets.clientSecret(for: configuration.clientID)
        print("ok    client secret signed (ES256, kid \(configuration.keyID), sub \(configuration.clientID))")
        print("client_secret: \(secret)")
        print("public_key_pem:")
        print(try configuration.privateKey.publicKey.pem())

        var logger = Logger(label: "siwa.doctor")
        logger.logLevel = .error
        do {
            let database = try await SIWADatabase.open(configuration.databaseURL, logger: logger)
            try await database.ping()
            try await database.migrate()
            try await database.close()
            print("ok    database answers and is migrated (\(configuration.databaseURL.redactedDescription))")
        } catch {
            problems += 1
            print("FAIL  database: \(error)")
        }

        if offline {
            print("skip  Apple's keys (--offline)")
        } else {
            let http = Site.appleHTTPClient(for: configuration)
            let keysURL = configuration.appleBaseURL + "/auth/keys"
            do {
                let response = try await http.execute(HTTPClientRequest(url: keysURL))
                let keys = try response.decodeJSON(JWKSet.self)
                print("ok    \(keysURL) answered \(response.status) with \(keys.keys.count) keys")
            } catch {
                problems += 1
                print("FAIL  \(keysURL): \(error)\(configuration.isDemo ? " (in demo mode the emulator runs only with `siwa serve`)" : "")")
            }
            await http.shutdown()
        }
        print(problems == 0 ? "all checks passed" : "\(problems) check(s) failed")
        if problems > 0 { throw ExitCode(1) }
    }
}
