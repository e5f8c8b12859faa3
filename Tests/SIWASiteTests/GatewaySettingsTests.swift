import Foundation
import JOSE
import SIWASite
import SIWATestSupport
import SIWAWeb
import Testing

/// The gateway's settings as the settings table reads them: `SESSION_COOKIE_DOMAIN` and `ALLOWED_REDIRECT_HOSTS`
/// (moved from SIWAWebTests' SessionCookieScopeTests, which tests the cookies they make).
@Suite("Session cookie scope and redirect host settings")
struct GatewaySettingsTests {
    @Test("SESSION_COOKIE_DOMAIN must be PUBLIC_URL's host or a parent of it")
    func validation() throws {
        let pem = try P256PrivateKey.generate().pkcs8PEM()
        let settings = [
            "APPLE_TEAM_ID": Fixture.teamID, "APPLE_CLIENT_ID": Fixture.webClientID, "APPLE_KEY_ID": Fixture.keyID,
            "APPLE_PRIVATE_KEY": pem, "PUBLIC_URL": "https://app.example.com",
            "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)), "DATABASE_URL": "sqlite::memory:",
        ]
        func load(_ overrides: [String: String]) throws -> SIWAConfiguration {
            var values = settings
            values.merge(overrides) { $1 }
            return try SIWAConfiguration.load(from: values)
        }
        #expect(try load(["SESSION_COOKIE_DOMAIN": "example.com"]).sessionCookieDomain == "example.com")
        #expect(try load(["SESSION_COOKIE_DOMAIN": "app.example.com"]).sessionCookieDomain == "app.example.com")
        // a leading dot and capitals as operators write them: the domain SIWAWebTests' SessionCookieScopeTests sets
        #expect(try load(["SESSION_COOKIE_DOMAIN": ".Example.com"]).sessionCookieDomain == "example.com")
        for bad in ["evil.com", "com", "ample.com", "sub.app.example.com", "."] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try load(["SESSION_COOKIE_DOMAIN": bad]) }
        }
        #expect(try load(["ALLOWED_REDIRECT_HOSTS": "a.example.net,.example.org"]).allowedRedirectHosts.allows("x.example.org"))
        do {
            _ = try load(["ALLOWED_REDIRECT_HOSTS": "a.example.net,https://evil.com"])
            Issue.record("accepted")
        } catch let error as ConfigurationError {
            #expect(error.setting == "ALLOWED_REDIRECT_HOSTS" && error.problem.contains("https://evil.com"))
        }
        #expect(SiteSettings.all.map(\.name).contains("ALLOWED_REDIRECT_HOSTS"))
    }
}
