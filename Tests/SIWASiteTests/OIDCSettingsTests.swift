import Foundation
import JOSE
import SIWASite
import SIWATestSupport
import SIWAWeb
import Testing

/// `OIDC_CLIENTS_FILE` and `OIDC_SIGNING_KEY_PATH` read by the settings table (moved from SIWAWebTests'
/// OIDCConfigurationTests, which keeps the clients file's and the keys' own rules).
@Suite("OpenID provider settings")
struct OIDCSettingsTests {
    static func production(_ extra: [String: String]) throws -> [String: String] {
        [
            "APPLE_TEAM_ID": Fixture.teamID, "APPLE_CLIENT_ID": Fixture.webClientID, "APPLE_KEY_ID": Fixture.keyID,
            "APPLE_PRIVATE_KEY": try P256PrivateKey.generate().pkcs8PEM(), "PUBLIC_URL": "https://example.com",
            "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)), "DATABASE_URL": "sqlite::memory:",
        ].merging(extra) { $1 }
    }

    @Test("production: no clients file, no provider; a clients file needs OIDC_SIGNING_KEY_PATH, readable and RSA")
    func production() throws {
        #expect(try SIWAConfiguration.load(from: Self.production([:])).oidc == nil)
        let directory = NSTemporaryDirectory() + "siwa-oidc-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clients = directory + "/clients.json"
        try #"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"]}]"#.write(toFile: clients, atomically: true, encoding: .utf8)

        func failure(_ extra: [String: String]) throws -> ConfigurationError? {
            do {
                _ = try SIWAConfiguration.load(from: try Self.production(extra))
                return nil
            } catch let error as ConfigurationError { return error }
        }
        #expect(try failure(["OIDC_CLIENTS_FILE": directory + "/missing.json"])?.setting == "OIDC_CLIENTS_FILE")
        #expect(try failure(["OIDC_CLIENTS_FILE": clients])?.setting == "OIDC_SIGNING_KEY_PATH")
        #expect(try failure(["OIDC_CLIENTS_FILE": clients, "OIDC_SIGNING_KEY_PATH": directory + "/none.pem"])?.setting == "OIDC_SIGNING_KEY_PATH")
        try P256PrivateKey.generate().pkcs8PEM().write(toFile: directory + "/ec.pem", atomically: true, encoding: .utf8)
        #expect(try failure(["OIDC_CLIENTS_FILE": clients, "OIDC_SIGNING_KEY_PATH": directory + "/ec.pem"])?.setting == "OIDC_SIGNING_KEY_PATH")

        let key = try RSAPrivateKey.generate()
        try key.pkcs8PEM().write(toFile: directory + "/oidc.pem", atomically: true, encoding: .utf8)
        let configuration = try SIWAConfiguration.load(from: try Self.production(["OIDC_CLIENTS_FILE": clients, "OIDC_SIGNING_KEY_PATH": directory + "/oidc.pem"]))
        let oidc = try #require(configuration.oidc)
        #expect(oidc.issuer == "https://example.com")
        #expect(oidc.signingKeys.previous == nil)
        #expect(oidc.signingKeys.current.publicKey.modulus == key.publicKey.modulus)
        #expect(configuration.summary.contains { $0.0 == "OIDC_CLIENTS_FILE" && $0.1.contains("1 client") })
        #expect(SiteSettings.all.map(\.name).contains("OIDC_CLIENTS_FILE") && SiteSettings.all.map(\.name).contains("OIDC_SIGNING_KEY_PATH"))

        // OIDC_REFRESH_TOKEN_LIFETIME_SECONDS: 30 days unless set; a whole number of seconds, at least 1.
        #expect(oidc.refreshTokenLifetime == 30 * 86_400)
        #expect(configuration.summary.contains { $0.0 == "OIDC_REFRESH_TOKEN_LIFETIME_SECONDS" && $0.1 == "2592000 s" })
        let provider = ["OIDC_CLIENTS_FILE": clients, "OIDC_SIGNING_KEY_PATH": directory + "/oidc.pem"]
        let week = try SIWAConfiguration.load(from: try Self.production(provider.merging(["OIDC_REFRESH_TOKEN_LIFETIME_SECONDS": "604800"]) { $1 }))
        #expect(week.oidc?.refreshTokenLifetime == 604_800)
        for bad in ["0", "-1", "1.5", "a week"] {
            #expect(try failure(provider.merging(["OIDC_REFRESH_TOKEN_LIFETIME_SECONDS": bad]) { $1 })?.setting == "OIDC_REFRESH_TOKEN_LIFETIME_SECONDS", "\(bad)")
        }

        // A key set without clients is a warning: the provider stays off.
        let warned = try SIWAConfiguration.load(from: try Self.production(["OIDC_SIGNING_KEY_PATH": directory + "/oidc.pem"]))
        #expect(warned.oidc == nil && warned.warnings.contains { $0.contains("OIDC_CLIENTS_FILE") })
    }

    @Test("demo mode registers the demo client and generates the signing key into DATA_DIR, reused on restart")
    func demo() throws {
        let directory = NSTemporaryDirectory() + "siwa-oidc-demo-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try #require(try SIWAConfiguration.load(from: ["DATA_DIR": directory]).oidc)
        #expect(first.clients.client(OIDCProviderConfiguration.Demo.clientID)?.isPublic == true)
        #expect(first.clients.client(OIDCProviderConfiguration.Demo.clientID)?.redirectURIs.contains("http://localhost:8090/callback") == true)
        #expect(FileManager.default.fileExists(atPath: directory + "/oidc-signing-key.pem"))
        let second = try #require(try SIWAConfiguration.load(from: ["DATA_DIR": directory]).oidc)
        #expect(second.signingKeys.current.kid == first.signingKeys.current.kid)
        #expect(first.issuer == "http://localhost:8080")
    }
}
