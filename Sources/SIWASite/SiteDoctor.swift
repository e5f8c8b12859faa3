import AppleSignIn
import CurlHTTP
import Foundation
import JOSE
import Logging
import SIWAStore
import SIWAWeb

/// `siwa doctor`'s checks of a configuration, each returning the line it prints: the signing key, the
/// database, and Apple's keys at `APPLE_BASE_URL`.
public enum SiteDoctor {
    public struct Check: Sendable {
        public enum Outcome: String, Sendable { case ok, fail, skip }
        public let outcome: Outcome
        public let text: String

        public init(outcome: Outcome, text: String) {
            self.outcome = outcome
            self.text = text
        }

        /// `ok    text`, `FAIL  text`, `skip  text`.
        public var line: String {
            (outcome == .fail ? "FAIL" : outcome.rawValue).padding(toLength: 6, withPad: " ", startingAt: 0) + text
        }
    }

    /// A client secret signed with the configured key (for the operator to try against Apple), and the key's
    /// public half as PEM.
    public static func signTestClientSecret(_ configuration: SIWAConfiguration) async throws -> (check: Check, secret: String, publicKeyPEM: String) {
        let secret = try await configuration.clientSecretProvider().clientSecret(for: configuration.clientID)
        let check = Check(outcome: .ok, text: "client secret signed (ES256, kid \(configuration.keyID), sub \(configuration.clientID))")
        return (check, secret, try configuration.privateKey.publicKey.pem())
    }

    /// Opens `DATABASE_URL`, pings it and applies the migrations.
    public static func checkDatabase(_ configuration: SIWAConfiguration) async -> Check {
        var logger = Logger(label: "siwa.doctor")
        logger.logLevel = .error
        do {
            let database = try await SIWADatabase.open(configuration.databaseURL, logger: logger, poolSize: configuration.databasePoolSize)
            try await database.ping()
            try await database.migrate()
            try await database.close()
            return Check(outcome: .ok, text: "database answers and is migrated (\(configuration.databaseURL.redactedDescription))")
        } catch {
            return Check(outcome: .fail, text: "database: \(error)")
        }
    }

    /// Fetches Apple's keys with the client `siwa serve` uses.
    public static func checkAppleKeys(_ configuration: SIWAConfiguration) async -> Check {
        let http = Site.appleHTTPClient(for: configuration)
        let keysURL = configuration.appleBaseURL + "/auth/keys"
        let check: Check
        do {
            let response = try await http.execute(HTTPClientRequest(url: keysURL))
            let keys = try response.decodeJSON(JWKSet.self)
            check = Check(outcome: .ok, text: "\(keysURL) answered \(response.status) with \(keys.keys.count) keys")
        } catch {
            let hint = configuration.isDemo ? " (in demo mode the emulator runs only with `siwa serve`)" : ""
            check = Check(outcome: .fail, text: "\(keysURL): \(error)\(hint)")
        }
        await http.shutdown()
        return check
    }
}
