import AppleSignIn
import CurlHTTP
import Foundation
import JOSE
import Logging
import SIWAStore
import SIWAWeb

/// `siwa doctor`'s checks of a configuration, each returning the line it prints: the signing key, the
/// database, the OpenID provider's signing keys, and Apple's keys at `APPLE_BASE_URL`.
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

    /// TOKEN_ENCRYPTION_KEY (and TOKEN_ENCRYPTION_KEY_PREVIOUS) against the key the database records
    /// (SPEC §14), recording nothing: what `siwa serve` would do with them, or why it would refuse them.
    public static func checkSealingKey(_ configuration: SIWAConfiguration) async -> Check {
        do {
            // Opening it to look checks the key (a refusal is the failure below), and records nothing.
            let admin = try await SiteAdmin.openToLook(configuration: configuration)
            await admin.close()
            let text: String
            switch admin.sealingKey {
            case .recorded:
                text = "TOKEN_ENCRYPTION_KEY is the key the database records"
            case .rotating:
                text = "TOKEN_ENCRYPTION_KEY is the target of the change of key under way (TOKEN_ENCRYPTION_KEY_PREVIOUS the recorded key): "
                    + "`siwa admin reseal` finishes it"
            case .acceptedUnrecorded, .recordedNow:
                text = "TOKEN_ENCRYPTION_KEY fits what the database holds; `siwa serve` records it (or starts the change of key "
                    + "to it) at its next start"
            }
            return Check(outcome: .ok, text: text)
        } catch {
            return Check(outcome: .fail, text: "\(error)")
        }
    }

    /// The OpenID provider's signing keys as `siwa admin oidc keys` shows them (`kid`, state, dates; never a
    /// private half), found the way it finds them, and the line that sums them up. Opens the database as
    /// `siwa admin` does but writes nothing a start would: a key file not yet stored (the first start, or a
    /// file replaced and the instances not yet restarted) is named, not stored, so it does not start
    /// signing on the running instances. Skipped when the provider is off.
    public static func checkOIDCKeys(_ configuration: SIWAConfiguration) async -> (check: Check, keys: [OIDCKeyStatus]) {
        guard let oidc = configuration.oidc else {
            return (Check(outcome: .skip, text: "OpenID signing keys (the provider is off: no OIDC_CLIENTS_FILE)"), [])
        }
        let configured = oidc.signingKeys.current.kid
        let statuses: OIDCKeyStatuses?
        do {
            let admin = try await SiteAdmin.openToLook(configuration: configuration)
            do {
                statuses = try await admin.oidcKeyStatuses()
            } catch {
                await admin.close()
                throw error
            }
            await admin.close()
        } catch {
            return (Check(outcome: .fail, text: "OpenID signing keys: \(error)"), [])
        }
        guard let statuses else { return (Check(outcome: .skip, text: "OpenID signing keys (the provider is off)"), []) }
        let text: String
        if statuses.keys.isEmpty {
            text = "OpenID signing keys: none stored yet; OIDC_SIGNING_KEY_PATH's key (\(configured)) is stored, and signs, "
                + "at the first start of `siwa serve`"
        } else if !statuses.keys.contains(where: { $0.kid == configured }) {
            text = "OpenID signing keys: \(statuses.keys.count) stored, \(statuses.signer) signs; OIDC_SIGNING_KEY_PATH's key "
                + "(\(configured)) is not stored: the next start of `siwa serve` stores it, and it signs from then on"
        } else {
            text = "OpenID signing keys: \(statuses.keys.count) stored, \(statuses.signer) signs"
        }
        return (Check(outcome: .ok, text: text), statuses.keys)
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
